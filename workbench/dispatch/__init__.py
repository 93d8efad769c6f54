"""Layer 3, sample dispatch: which worker trains which sample of a global batch.

``base`` (the interface, the contiguous / random baselines, driving a dispatcher through the
cluster), ``laia`` (Herald's LAIA), ``cost_model`` (ESD's expected transmission cost, our
formalisation), ``objective`` (the additive and deduplicated models), ``exact`` and
``heuristic`` (the solvers), ``hybriddis`` (ESD's dispatchers and HybridDis), ``registry``
(dispatchers by name). Imports ``cluster``, ``data`` and ``utils``; not ``sparse``.
"""
