"""How a training system's parameters travel: the dense gradients' route and the embeddings'.

HET's systems differ in two choices, which the time model ([`workbench.cluster.time_model`][])
charges, and the cluster's ``dense_mode`` ([`workbench.cluster.dense_sync`][]) refines:

    dense route   allreduce   a ring among the workers, in the cluster's dense mode (after
                              backward, DDP's buckets, or ``ps``: onto the parameter servers
                              when the embeddings go there too)
                  ps          always pushed to and pulled from the parameter servers (HET's PS)
    sparse route  ps          rows pulled and pushed as the caches count (Hybrid, Cache, PS)
                  allgather   every worker's updated rows all-gathered (HET's AllReduce)

[`Routes`][] holds both; [`Routes.dense_on_ps`][] decides where the dense gradients go, the
one place the two choices and the dense mode combine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class DenseRoute(StrEnum):
    """How the dense gradients travel."""

    ALLREDUCE = "allreduce"
    PS = "ps"


class SparseRoute(StrEnum):
    """How the embedding rows travel."""

    PS = "ps"
    ALLGATHER = "allgather"


@dataclass(frozen=True)
class Routes:
    """A system's dense and sparse routes (default: HET's Hybrid, a ring and a PS).

    Raises:
        ValueError: a route is not one of its kind's values, or the pair is not supported (the
            AllGather of embeddings runs with a ring of dense gradients only).
    """

    dense: DenseRoute = DenseRoute.ALLREDUCE
    sparse: SparseRoute = SparseRoute.PS

    def __post_init__(self) -> None:
        for name, kind in (("dense", DenseRoute), ("sparse", SparseRoute)):
            value = getattr(self, name)
            if not isinstance(value, kind):
                try:
                    object.__setattr__(self, name, kind(value))
                except ValueError:
                    raise ValueError(f"{name} route {value!r}: must be one of "
                                     f"{[v.value for v in kind]}") from None
        if self.sparse is SparseRoute.ALLGATHER and self.dense is DenseRoute.PS:
            raise ValueError("sparse route allgather with dense route ps: supported are ps with "
                             "ps or allreduce, and allgather with allreduce")

    def dense_on_ps(self, dense_mode: str) -> bool:
        """Whether the dense gradients go to the parameter servers: the dense route is ``ps``,
        or the cluster's dense mode is ``ps`` and the embeddings travel to the servers too."""
        return self.dense is DenseRoute.PS or (dense_mode == "ps"
                                               and self.sparse is SparseRoute.PS)


#: HET's Hybrid: a ring for the dense gradients, the parameter servers for the rows (the default).
HYBRID = Routes()
