"""Dispatchers by name: what the ``esd`` stage, the trainer and ``workbench.replay`` build.

| name | what it does | strategy class |
| --- | --- | --- |
| ``contiguous`` | consecutive slices of the batch | ``base.Contiguous`` |
| ``random`` | a seeded permutation, then slices | ``base.RandomPermutation`` |
| ``laia`` | Herald's hit-count greedy on its LRU snapshots | ``laia.LaiaBaseline`` |
| ``esd_heuristic`` | regret-ordered greedy + swaps on the dedup cost | ``hybriddis.EsdHeuristic`` |
| ``esd_greedy`` | the plain greedy in batch order (a named variant) | ``hybriddis.EsdGreedy`` |
| ``esd_exact`` | transportation optimum or deduplicated ILP | ``hybriddis.EsdExact`` |
| ``hybriddis`` | heuristic, plus the exact solver when it fits | ``hybriddis.HybridDis`` |

A name is resolved to its strategy class once ([`strategy`][]; an unknown name is a one-line
[`ConfigError`][workbench.utils.validation.ConfigError] naming the allowed ones), and
[`make_dispatcher`][] builds the object; whoever dispatches holds the object and calls its
[`decide`][workbench.dispatch.base.Dispatcher.decide] per batch. [`DispatcherSpec`][] is a
dispatcher not yet built (name and solver settings), for a component that builds it on a
cluster of its own (the trainer):

    DispatcherSpec(name, SolverOptions) --build(cluster, capacities)--> Dispatcher
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workbench.cluster.edge_cluster import EdgeCluster
from workbench.dispatch.base import BaselineDispatcher, Contiguous, Dispatcher, RandomPermutation
from workbench.dispatch.cost_model import CostModel
from workbench.dispatch.hybriddis import (
    EsdDispatcher,
    EsdExact,
    EsdGreedy,
    EsdHeuristic,
    HybridDis,
    SolverOptions,
)
from workbench.dispatch.laia import LaiaBaseline
from workbench.utils.validation import ConfigError

__all__ = ["DISPATCHERS", "DispatcherSpec", "SolverOptions", "make_dispatcher", "strategy"]

#: Every strategy class by its name.
STRATEGIES: dict[str, type[Dispatcher]] = {cls.name: cls for cls in (
    Contiguous, RandomPermutation, LaiaBaseline, EsdHeuristic, EsdGreedy, EsdExact, HybridDis)}
DISPATCHERS = tuple(STRATEGIES)


def strategy(name: str) -> type[Dispatcher]:
    """The strategy class called ``name``.

    Raises:
        ConfigError: an unknown name (the message names the allowed ones).
    """
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ConfigError(f"dispatcher {name!r}: must be one of "
                          f"{', '.join(DISPATCHERS)}") from None


@dataclass(frozen=True)
class DispatcherSpec:
    """A dispatcher not yet built: its strategy's name and the solvers' settings.

    The name is checked when the spec is made (an unknown one raises [`ConfigError`][]).

    Attributes:
        name: one of [`DISPATCHERS`][].
        options: the ESD solvers' settings (read by the ESD strategies only).
    """

    name: str = "contiguous"
    options: SolverOptions = field(default_factory=SolverOptions)

    def __post_init__(self) -> None:
        strategy(self.name)

    def build(self, cluster: EdgeCluster | None, capacities: np.ndarray, *,
              wire_dim: int | None = None, seed: int = 0,
              local: np.ndarray | None = None) -> Dispatcher:
        """The dispatcher on ``cluster`` (see [`make_dispatcher`][]).

        Raises:
            ValueError: a cost-aware dispatcher without a cluster.
        """
        kind = strategy(self.name)
        if issubclass(kind, BaselineDispatcher):
            workers = len(capacities) if cluster is None else cluster.workers
            return kind(workers, capacities, seed)
        if cluster is None:
            raise ValueError("a cost-aware dispatcher needs a cluster (not the plain system)")
        if issubclass(kind, LaiaBaseline):
            return kind(cluster.workers, capacities, cluster.server.rows, cluster.spec.capacity)
        assert issubclass(kind, EsdDispatcher)
        return kind(cluster.workers, capacities, CostModel(cluster, wire_dim, local),
                    self.options)


def make_dispatcher(name: str, cluster: EdgeCluster | None, capacities: np.ndarray,
                    options: SolverOptions | None = None, *, wire_dim: int | None = None,
                    seed: int = 0, local: np.ndarray | None = None) -> Dispatcher:
    """Build the dispatcher called ``name`` for ``cluster``.

    Args:
        name: one of [`DISPATCHERS`][].
        cluster: the emulated cluster whose caches the cost-aware dispatchers read (LAIA's
            snapshots get the caches' capacity); None: a baseline on ``len(capacities)``
            workers.
        capacities: samples per worker per global batch.
        options: the ESD solvers' settings (default: [`SolverOptions`][]'s).
        wire_dim: the width of a row on the wire of ESD's cost model (None: the cluster's).
        seed: seeds the ``random`` baseline.
        local: rows replicated on every worker outside the caches, free to ESD's cost model
            (LAIA, as Herald, knows no such tier).

    Raises:
        ConfigError: an unknown name.
        ValueError: a cost-aware dispatcher without a cluster, or bad solver settings.
    """
    spec = DispatcherSpec(name, SolverOptions() if options is None else options)
    return spec.build(cluster, capacities, wire_dim=wire_dim, seed=seed, local=local)
