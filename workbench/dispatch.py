"""Sample dispatch: which sample of a global batch goes to which worker.

Every dispatcher assigns each of the ``W x b`` samples of a global batch to a worker such that
every worker gets exactly ``b`` samples. This module holds the two baselines every framework
has; the cost-aware dispatchers (LAIA, ESD, HybridDis) are in :mod:`workbench.esd`.

* ``contiguous``: worker ``w`` gets samples ``[w b, (w + 1) b)`` of the batch.
* ``random``: a seeded random permutation of the batch, then contiguous slices.
"""

from __future__ import annotations

import numpy as np

DISPATCHERS = ("contiguous", "random")


def assign(name: str, workers: int, per_worker: int | np.ndarray,
           rng: np.random.Generator) -> np.ndarray:
    """Worker index of every sample of one global batch.

    Args:
        name: ``contiguous`` or ``random``.
        workers: number of workers W.
        per_worker: samples per worker: one ``b`` for all, or ``int[W]`` capacities.
        rng: the run's random stream (``random`` only).

    Returns:
        ``int64[sum of capacities]``, worker w appearing exactly its capacity times.
    """
    base = np.repeat(np.arange(workers, dtype=np.int64), per_worker)
    if name == "contiguous":
        return base
    if name == "random":
        return base[rng.permutation(len(base))]
    raise ValueError(f"dispatcher {name!r}: must be one of {DISPATCHERS}")
