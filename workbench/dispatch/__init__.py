"""Layer 3, sample dispatch: which worker trains which sample of a global batch.

A dispatcher is an object of its strategy, built once from its name; every batch calls its
``decide``. The modules:

* ``base``: the interface ([`Dispatcher`][.base.Dispatcher]), the cost-blind baselines
  (``contiguous``, ``random``), driving a dispatcher through the cluster, the per-worker traces;
* ``config``: the config schema of the trainer's baseline dispatch (``workbench/conf/dispatch/``);
* ``cost_model``: ESD's expected transmission cost per (worker, key), our formalisation;
* ``objective``: the additive and deduplicated cost models and their checks;
* ``exact``: the exact solvers (transportation problem, makespan and deduplicated MILPs);
* ``heuristic``: ESD's greedy and regret + swap heuristics;
* ``hybriddis``: ESD's dispatchers and HybridDis on the cost model, and their
  [`SolverOptions`][.hybriddis.SolverOptions];
* ``laia``: Herald's LAIA on its simulated LRU snapshots;
* ``registry``: dispatchers by name ([`make_dispatcher`][.registry.make_dispatcher],
  [`DispatcherSpec`][.registry.DispatcherSpec]).

Imports ``cluster``, ``data`` and ``utils``; not ``sparse``.
"""
