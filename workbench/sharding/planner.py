r"""FlexShard's cut points: how many of the hottest rows to replicate everywhere and per node.

Our formalisation (plans: `workbench/sharding/plans.py`). Rows are ranked by access probability; a
plan is the pair of cut points ``(t1, u)``, ``0 <= t1 <= u <= N``: ranks ``[0, t1)`` replicated on
every device, ``[t1, u)`` replicated per node and row-sharded inside it, ``[u, N)`` row-sharded over
all devices ([`tiered`][workbench.sharding.plans.tiered], ``t2 = u - t1``). The planner minimises
the expected time of one iteration's all-to-all (forward + backward) subject to the memory of the
baseline, ``max_d memory_d <= limit`` (weights + buffers, [`workbench.sharding.traffic`][]).

Every candidate is evaluated in closed form from per-device prefix sums of probability mass and
row counts over the candidate cut positions ``C`` (the owners are a function of the rank, so a
cut only moves tier boundaries):

    S_d = sum of p over ranks >= u owned by d (tier 2)      n_d = their count
    N_g = sum of p over ranks in [t1, u) with local index g  m_g = their count
    F   = lambda x row_bytes
    intra_send_d = F (G - 1) (S_d + N_g(d))       inter_send_d = F (P - G) S_d
    intra_recv_d = F (S_node(d) - S_d + N - N_g(d)) inter_recv_d = F (S - S_node(d))
    time  = 2 max_d t_d                                     (Topology: sharding/topology.py)
    memory_d = (t1 + m_g(d) + n_d) row_bytes + the four terms above

which equals [`expected_traffic`][workbench.sharding.traffic.expected_traffic] of the built plan
exactly
(tested), at a cost of O(N + |C| P) to build the prefix sums and O(|C|^2 P) for the pairs. With
``|C| >= N + 1`` every cut is a candidate and the search is exhaustive (tested against brute
force); on large tables ``C`` is a log-and-linear grid of ``candidates`` positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.sharding.plans import rank_order, rank_sequences
from workbench.sharding.topology import Topology

__all__ = ["CutSearch", "candidate_cuts", "evaluate_cuts", "best_cut"]


@dataclass
class CutSearch:
    """Every evaluated pair of cut points.

    Attributes:
        t1: rows replicated everywhere, per pair.
        t2: rows replicated per node, per pair.
        seconds: expected all-to-all seconds of an iteration (forward + backward), per pair.
        memory: the largest device's expected memory (weights + buffers), per pair.
        inter_bytes: expected inter-node bytes of the forward all-to-all, per pair.
    """

    t1: np.ndarray
    t2: np.ndarray
    seconds: np.ndarray
    memory: np.ndarray
    inter_bytes: np.ndarray


def candidate_cuts(n: int, count: int, extra: np.ndarray | Sequence[int] = ()) -> np.ndarray:
    """Sorted distinct cut positions in ``[0, n]``: all of them when ``count > n``, else 0, n,
    ``count // 2`` log-spaced and ``count // 2`` linearly spaced positions, plus ``extra``."""
    if count > n:
        base = np.arange(n + 1)
    else:
        base = np.r_[0, n, np.geomspace(1, n, max(2, count // 2)),
                     np.linspace(0, n, max(2, count // 2))]
    cuts = np.r_[np.rint(base), np.asarray(extra, dtype=float)]
    return np.unique(np.clip(cuts, 0, n).astype(np.int64))


def _segments(cuts: np.ndarray, n: int) -> np.ndarray:
    """``int64[n]``: for each rank, the number of cuts at or below it (ranks in
    ``[cuts[k], cuts[k + 1])`` get ``k + 1``)."""
    return np.repeat(np.arange(len(cuts) + 1), np.diff(np.r_[0, cuts, n]))


def _prefix(values: np.ndarray | None, owners: np.ndarray, seg: np.ndarray, cuts: int,
            width: int) -> tuple[np.ndarray, np.ndarray]:
    """``([cuts, width], [cuts, width])``: the sums of ``values`` (None: 1 each) over the ranks
    below and at or above each cut, per owner. Both are accumulated from their own side, so an
    empty range sums to exactly 0 (a difference of totals would leave rounding residue, which
    the topology's ``traffic > 0`` test would charge a latency for)."""
    sums = np.bincount(seg * width + owners, weights=values,
                       minlength=(cuts + 1) * width).reshape(cuts + 1, width).astype(float)
    below = np.cumsum(sums, axis=0)[:-1]
    above = np.cumsum(sums[::-1], axis=0)[::-1][1:]
    return below, above


def evaluate_cuts(probability: np.ndarray, topo: Topology, lookups_per_device: float,
                  row_bytes: int, cuts: np.ndarray, *, node_tier: bool = True,
                  weighted: bool = True, chunk: int = 64,
                  order: np.ndarray | None = None) -> CutSearch:
    """Expected time and memory of every pair ``t1 <= u`` of ``cuts`` (``t1 == u`` only
    without ``node_tier``); see the module docstring. ``order`` may pass
    [`rank_order`][workbench.sharding.plans.rank_order] of ``probability`` when it is known."""
    p = np.asarray(probability, dtype=float)
    p = p / p.sum() if p.sum() > 0 else p
    n, n_dev, g = p.size, topo.devices, topo.devices_per_node
    order = rank_order(p) if order is None else order
    ps = p[order]
    seq_node, seq_sharded = rank_sequences(n, topo, weighted)
    cuts = np.asarray(cuts, dtype=np.int64)
    seg = _segments(cuts, n)
    _, mass_s = _prefix(ps, seq_sharded, seg, len(cuts), n_dev)   # [C, P] ranks >= cut
    _, count_s = _prefix(None, seq_sharded, seg, len(cuts), n_dev)
    mass_n, _ = _prefix(ps, seq_node, seg, len(cuts), g)           # [C, G] ranks < cut
    count_n, _ = _prefix(None, seq_node, seg, len(cuts), g)
    local = np.arange(n_dev) % g
    node = np.arange(n_dev) // g
    other_nodes = 1.0 - np.eye(topo.nodes)  # sums over the other nodes: exact zeros stay 0
    scale = lookups_per_device * row_bytes
    out: dict[str, list[Any]] = {k: [] for k in ("t1", "t2", "seconds", "memory", "inter_bytes")}
    pairs = [(i, j) for i in range(len(cuts)) for j in range(i, len(cuts) if node_tier else i + 1)]
    for start in range(0, len(pairs), chunk * len(cuts)):
        ii, jj = np.array(pairs[start:start + chunk * len(cuts)]).T
        s = mass_s[jj]                                      # S_d, [pairs, P]
        cs = count_s[jj]
        mass_between = mass_n[jj] - mass_n[ii]              # N_g, [pairs, G]
        nl = mass_between[:, local]                         # N_g(d), [pairs, P]
        cl = (count_n[jj] - count_n[ii])[:, local]
        per_node = s.reshape(-1, topo.nodes, g)             # S of each device, by node
        node_peers = (per_node.sum(axis=2, keepdims=True) - per_node).reshape(-1, n_dev)
        local_peers = mass_between @ (1.0 - np.eye(g))       # N of the other local indices
        remote = (per_node.sum(axis=2) @ other_nodes)[:, node]
        parts = {"intra_send": scale * (g - 1) * (s + nl),
                 "inter_send": scale * (n_dev - g) * s,
                 "intra_recv": scale * (node_peers + local_peers[:, local]),
                 "inter_recv": scale * remote}
        seconds = 2.0 * topo.device_seconds(parts).max(axis=1)
        weights = (cuts[ii][:, None] + cl + cs) * row_bytes
        buffers = sum(parts.values())
        out["t1"].append(cuts[ii])
        out["t2"].append(cuts[jj] - cuts[ii])
        out["seconds"].append(seconds)
        out["memory"].append((weights + buffers).max(axis=1))
        out["inter_bytes"].append(parts["inter_send"].sum(axis=1))
    return CutSearch(**{k: np.concatenate(v) for k, v in out.items()})


def best_cut(search: CutSearch, memory_limit: float | None = None) -> int:
    """Index of the fastest pair within ``memory_limit`` (None: any); ties go to the fewest
    replicated rows (smaller ``t1``, then smaller ``t2``).

    Raises:
        ValueError: no pair fits the limit.
    """
    ok = np.ones(search.t1.size, bool) if memory_limit is None else (
        search.memory <= memory_limit * (1 + 1e-12))
    if not ok.any():
        raise ValueError(f"no cut fits the memory limit of {memory_limit:.6g} bytes")
    idx = np.flatnonzero(ok)
    return int(idx[np.lexsort((search.t2[idx], search.t1[idx], search.seconds[idx]))[0]])


def estimate_probability(counts: np.ndarray, estimator: str = "good_turing",
                         missing: float | None = None) -> np.ndarray:
    """Each row's share of the lookups from profiled ``counts``.

    ``frequency``: ``count / total``. ``good_turing``: the unseen rows share the missing mass
    ``m`` evenly, and the seen rows get ``(1 - m) count / total``; ``m`` is ``missing`` when
    given ([`missing_mass`][]), else rows seen exactly once over all lookups (Good 1953, for
    independent lookups); with every row seen (or ``m = 0``) it is the frequency.

    Raises:
        ValueError: the profile saw no lookups, or ``missing`` is outside ``[0, 1]``.
    """
    counts = np.asarray(counts, dtype=float)
    total = counts.sum()
    if total <= 0:
        raise ValueError("the profile saw no lookups")
    if missing is not None and not 0.0 <= missing <= 1.0:
        raise ValueError(f"missing = {missing}: a probability mass must be in [0, 1]")
    p = counts / total
    unseen = counts == 0
    if estimator == "frequency" or not unseen.any():
        return p
    m = float((counts == 1).sum()) / total if missing is None else float(missing)
    p *= 1.0 - m
    p[unseen] = m / unseen.sum()
    return p


def missing_mass(profile: Sequence[np.ndarray], rows: int) -> float | None:
    """Good-Turing's missing mass with the iteration, not the lookup, as the independent unit.

    The share of the profile's lookups that go to rows seen in exactly one of its iterations:
    left out in turn, each iteration's lookups on rows no other iteration saw estimate the
    share of a new iteration's lookups on rows the profile missed (for a profile one iteration
    shorter: a slight over-estimate, the safe side for a memory limit). Lookups inside an
    iteration are not independent (a sample's history repeats its user's earlier items, and
    consecutive samples of a session share most of them), so hardly any row is looked up
    exactly once and the per-lookup estimate, rows seen once / lookups, is near zero: 0.04-0.9%
    on our sequence datasets, where 12-20% of the replayed lookups went to rows the profile had
    not seen. A planner told those rows are free filled RW's memory with replicas and then paid
    for their traffic in buffers (replayed memory up to 1.24x RW's under ``memory_limit: rw``).

    Args:
        profile: the row ids looked up in each profiled iteration.
        rows: N, rows of the table.

    Returns:
        The missing mass, or None with fewer than two iterations (no iteration to leave out).
    """
    counter = ProfileCounter(rows)
    for ids in profile:
        counter.add(ids)
    return counter.missing_mass()


class ProfileCounter:
    """A profile accumulated one iteration at a time: each row's lookups and the number of
    iterations that looked it up, so a profile of any length (a stream of millions of samples)
    is two arrays of the table's size ([`missing_mass`][]'s estimate, the same numbers).

    Args:
        rows: N, rows of the table.
    """

    def __init__(self, rows: int) -> None:
        self.counts = np.zeros(rows, dtype=np.int64)
        self.iterations_seen = np.zeros(rows, dtype=np.int32)
        self.iterations = 0

    def add(self, ids: np.ndarray) -> None:
        """Count one iteration's looked-up row ids."""
        seen, times = np.unique(ids, return_counts=True)
        self.counts[seen] += times
        self.iterations_seen[seen] += 1
        self.iterations += 1

    @property
    def lookups(self) -> int:
        """The lookups counted so far."""
        return int(self.counts.sum())

    def missing_mass(self) -> float | None:
        """[`missing_mass`][] of the iterations counted (None under two, or no lookups)."""
        total = self.lookups
        if self.iterations < 2 or not total:
            return None
        return float(self.counts[self.iterations_seen == 1].sum() / total)
