"""Dispatchers by name: what the ``esd`` stage, the trainer and ``workbench.replay`` build.

=================  ==================================================  ==========================
name               what it does                                        module
=================  ==================================================  ==========================
``contiguous``     consecutive slices of the batch                     :mod:`~.base`
``random``         a seeded permutation, then slices                   :mod:`~.base`
``laia``           Herald's hit-count greedy on its LRU snapshots      :mod:`~.laia`
``esd_heuristic``  regret-ordered greedy + swaps on the dedup cost     :mod:`~.hybriddis`
``esd_greedy``     the plain greedy in batch order (a named variant)   :mod:`~.hybriddis`
``esd_exact``      transportation optimum or deduplicated ILP          :mod:`~.hybriddis`
``hybriddis``      heuristic, plus the exact solver when it fits       :mod:`~.hybriddis`
=================  ==================================================  ==========================
"""

from __future__ import annotations

import numpy as np

from workbench.cluster.edge_cluster import EdgeCluster
from workbench.dispatch.base import Dispatcher
from workbench.dispatch.cost_model import CostModel
from workbench.dispatch.hybriddis import EsdDispatcher
from workbench.dispatch.laia import LaiaBaseline

DISPATCHERS = ("contiguous", "random", "laia", "esd_heuristic", "esd_greedy", "esd_exact",
               "hybriddis")


def make_dispatcher(name: str, cluster: EdgeCluster, capacities: np.ndarray, *,
                    wire_dim: int | None = None, mode: str = "additive",
                    time_limit_s: float = 1.0, budget_s: float = 0.05,
                    small_instance: int = 2048, seconds_per_variable: float | None = None,
                    objective: str = "total", heuristic_rounds: int = 1,
                    predictor: str | None = None, seed: int = 0,
                    local: np.ndarray | None = None) -> Dispatcher:
    """Build a dispatcher by name for ``cluster`` (LAIA's snapshots get the caches' capacity;
    ``local`` marks rows replicated on every worker outside the caches, free to ESD's cost
    model; LAIA, as Herald, knows no such tier)."""
    workers = cluster.workers
    if name in ("contiguous", "random"):
        return Dispatcher(name, workers, capacities, seed)
    if name == "laia":
        return LaiaBaseline(workers, capacities, cluster.server.rows, cluster.spec.capacity)
    if name in ("esd_heuristic", "esd_greedy", "esd_exact", "hybriddis"):
        return EsdDispatcher(name, workers, capacities, CostModel(cluster, wire_dim, local), mode,
                             time_limit_s, budget_s, small_instance, seconds_per_variable,
                             objective, heuristic_rounds, predictor)
    raise ValueError(f"dispatcher {name!r}: must be one of {DISPATCHERS}")
