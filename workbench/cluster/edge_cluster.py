"""The emulated edge cluster: W workers with HET caches over one parameter server, and its clock.


              +-------- parameter server: global table (value, ver per row) --------+
              |                                                                      |
      link (B_1, L_1)            link (B_2, L_2)        ...              link (B_W, L_W)
              |                          |                                       |
        edge worker 1              edge worker 2                          edge worker W
        cache C_1 rows             cache C_2 rows                         cache C_W rows
        speed s_1                  speed s_2                              speed s_W

Each worker reads and writes its keys through its own HET cache
([`WorkerCache`][workbench.cluster.cache.WorkerCache]); [`EdgeCluster.end_iteration`][] closes an
iteration, turning the counter deltas into bytes and seconds with the clock of
[`workbench.cluster.time_model`][], and keeps one record per iteration for the figures.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from workbench.cluster.cache import (
    COUNTERS,
    CacheSpec,
    ParameterServer,
    WorkerCache,
    cluster_slots,
)
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.routes import HYBRID, Routes
from workbench.cluster.time_model import BYTES_PER_FLOAT, Links, SoftwareCost, time_model


def cache_capacity(cache: CacheConfig, table_rows: int) -> int:
    """Cache lines per worker: ``cache.rows`` if set, else ``ceil(ratio x table_rows)``."""
    if cache.policy == "none":
        return 0
    return int(cache.rows) if cache.rows is not None else int(math.ceil(cache.ratio * table_rows))


def cache_spec(cache: CacheConfig, table_rows: int) -> CacheSpec:
    """The per-worker [`CacheSpec`][] of ``cache`` over a table of ``table_rows`` rows."""
    return CacheSpec(cache.policy, cache_capacity(cache, table_rows), cache.read_bound,
                     cache.write_bound, cache.clock)


class EdgeCluster:
    """W edge workers, each with a `WorkerCache`, over one PS.

    Args:
        cluster: links, speeds and workers.
        cache: policy, capacity and bounds (the same for every worker).
        table_rows: rows of the (concatenated) embedding table.
        dim: embedding width D of the rows the caches and the server hold.
        init_values: initial table ``[table_rows, dim]`` (default: zeros).
        wire_dim: width of a row on the wire, which every byte and second of
            [`end_iteration`][] counts (None: ``dim``). A counter-only replay holds narrow rows
            (the counters do not depend on the width) and clocks them at the model's D.
        software: the resolved per-message / per-row software cost of the clock (None: none;
            ``workbench.training.clock.clock_costs`` resolves the config's).

    Example:

        cl = EdgeCluster(cluster_cfg, cache_cfg, table_rows=1000, dim=16)
        rows = cl.read(0, keys)                  # worker 0 reads through its cache
        cl.write(0, keys, -lr * grad_rows)       # and writes its updates back
        record = cl.end_iteration(compute_s)     # per-worker counters, bytes and seconds
    """

    def __init__(self, cluster: ClusterConfig, cache: CacheConfig, table_rows: int, dim: int,
                 init_values: np.ndarray | None = None,
                 software: SoftwareCost | None = None, wire_dim: int | None = None) -> None:
        self.links = Links.from_config(cluster, software)
        self.workers = cluster.workers
        self.dim = dim
        self.wire_dim = dim if wire_dim is None else int(wire_dim)
        if self.wire_dim < 1:
            raise ValueError(f"wire_dim must be at least 1, got {wire_dim}")
        values = np.zeros((table_rows, dim), np.float32) if init_values is None else init_values
        if values.shape != (table_rows, dim):
            raise ValueError(f"init_values has shape {values.shape}; expected "
                             f"({table_rows}, {dim})")
        self.server = ParameterServer(values)
        self.spec = cache_spec(cache, table_rows)
        # key-major slots and stacked lines (cluster_slots): the cost model reads every
        # worker's state of a key from one memory line
        self.slot_of, self.lines = cluster_slots(self.spec, table_rows, self.workers)
        self.caches = [WorkerCache(self.spec, self.server, slot_of=self.slot_of[:, w],
                                   lines=self.lines[w]) for w in range(self.workers)]
        self._last = self.counters()
        self._deltas: list[np.ndarray] = []
        self.records: list[dict[str, np.ndarray]] = []
        self.clock_s = np.zeros(self.workers)

    @property
    def row_bytes(self) -> int:
        """Bytes of one embedding row on the wire (fp32, ``wire_dim`` wide)."""
        return self.wire_dim * BYTES_PER_FLOAT

    def read(self, worker: int, keys: np.ndarray, want_values: bool = True) -> np.ndarray:
        """Worker ``worker`` reads ``keys`` through its cache (one row per occurrence)."""
        return self.caches[worker].read(keys, want_values)

    def write(self, worker: int, keys: np.ndarray, grads: np.ndarray | float) -> None:
        """Worker ``worker`` applies update rows (already ``-lr x grad``) for ``keys``."""
        self.caches[worker].write(keys, grads)

    def counters(self) -> np.ndarray:
        """Cumulative counters ``[workers, len(COUNTERS)]``."""
        return np.stack([c.counters for c in self.caches]).copy()

    def end_iteration(self, compute_s: np.ndarray | float = 0.0, dense_bytes: float = 0.0,
                      routes: Routes = HYBRID,
                      hidden_s: np.ndarray | float = 0.0) -> dict[str, np.ndarray]:
        """Close an iteration: per-worker counter deltas, bytes and seconds.

        Args:
            compute_s: per-worker compute seconds of this iteration (already speed-scaled).
            dense_bytes: bytes of the dense parameters (synchronised once per iteration).
            routes: how the dense gradients and the embedding rows travel
                ([`Routes`][workbench.cluster.routes.Routes]: a ring or the parameter servers;
                rows through the PS as the caches counted, or all-gathered).
            hidden_s: per-worker compute that overlaps this iteration's communication even
                without prefetch (Hotline's popular micro-batch; see [`time_model`][]).

        Returns:
            [`time_model`][] for this iteration, one value per worker; the counter deltas
            are kept for [`history`][].
        """
        now = self.counters()
        delta = now - self._last
        self._last = now
        record = {k: v[0] for k, v in time_model(
            delta[None], self.links, self.wire_dim, compute_s, dense_bytes, routes,
            hidden_s).items()}
        self.clock_s += record["iter_s"] + record["dense_s"]
        self._deltas.append(delta)
        self.records.append(record)
        return record

    def snapshot(self) -> np.ndarray:
        """The table as if every worker flushed now: server rows + all unpushed updates.

        Side-effect free (no counters move); used to evaluate the model during training.
        """
        table = self.server.values.copy()
        for cache in self.caches:
            keys, grads = cache.unpushed()
            np.add.at(table, keys, grads)
        return table

    def flush(self) -> None:
        """Push every dirty line of every worker (end of training)."""
        for cache in self.caches:
            cache.flush()

    def history(self) -> pd.DataFrame:
        """All iteration records, one row per (iteration, worker): counter deltas, bytes and
        seconds (see [`end_iteration`][])."""
        if not self.records:
            return pd.DataFrame()
        frame = pd.DataFrame(np.concatenate(self._deltas), columns=list(COUNTERS))
        frame.insert(0, "worker", np.tile(np.arange(self.workers), len(self.records)))
        frame.insert(0, "iteration", np.repeat(np.arange(len(self.records)), self.workers))
        for key in self.records[0]:
            frame[key] = np.concatenate([r[key] for r in self.records])
        return frame


def replay(cluster: EdgeCluster, trace: np.ndarray, update: float = -0.01,
           order: str = "sequential", want_values: bool = False, record: bool = True,
           progress: bool = False) -> pd.DataFrame:
    """Replay a key trace ``[steps, workers, keys_per_step]`` through the cluster.

    Each step every worker reads its keys and then writes one constant update per key
    occurrence; all pushes of step t land before any read of step t + 1.

    Args:
        cluster: the cluster (its worker count must match the trace).
        trace: integer keys in ``0..table_rows-1``.
        update: the update added to every element per occurrence (``-lr x grad`` stand-in).
        order: ``sequential``: for each step, workers 0..W-1 in turn read then write;
            ``bsp``: for each step, every worker reads, then every worker writes (no worker
            sees another's step-t pushes within step t).
        want_values: also materialise the read rows (slower; the counters do not need them).
        record: close every step with [`EdgeCluster.end_iteration`][] (per-step records);
            without it only the cumulative counters are kept.
        progress: show a tqdm bar over steps.

    Returns:
        [`EdgeCluster.history`][] (one row per step and worker; empty without ``record``).
    """
    replay_steps(cluster, trace, update, order, want_values, record, progress)
    return cluster.history()


def replay_steps(cluster: EdgeCluster, trace: np.ndarray, update: float = -0.01,
                 order: str = "sequential", want_values: bool = False, record: bool = True,
                 progress: bool = False) -> None:
    """[`replay`][]'s steps without building the history (a trace replayed a window at a
    time calls this per window and reads [`EdgeCluster.history`][] once at the end)."""
    from tqdm.auto import tqdm

    if trace.ndim != 3 or trace.shape[1] != cluster.workers:
        raise ValueError(f"trace shape {trace.shape}: expected [steps, {cluster.workers}, keys]")
    if order not in ("sequential", "bsp"):
        raise ValueError(f"order {order!r}: must be 'sequential' or 'bsp'")
    for step in tqdm(range(trace.shape[0]), disable=not progress, desc="replay", unit="step"):
        if order == "sequential":
            for w in range(cluster.workers):
                cluster.read(w, trace[step, w], want_values)
                cluster.write(w, trace[step, w], update)
        else:
            for w in range(cluster.workers):
                cluster.read(w, trace[step, w], want_values)
            for w in range(cluster.workers):
                cluster.write(w, trace[step, w], update)
        if record:
            cluster.end_iteration()


def reclock(history: pd.DataFrame, links: Links, dim: int, dense_bytes: float,
            routes: Routes = HYBRID) -> pd.DataFrame:
    """The clock of a recorded run ([`EdgeCluster.history`][]) on other links or in another
    dense synchronisation mode: exact wherever the run's traffic does not depend on time
    (the counters and the compute are the run's own; a dispatcher that decided for other links
    would have moved other rows).

    Args:
        history: one row per (iteration, worker) with the counter deltas and ``compute_s``.
        links: the links, software cost, overlap and dense synchronisation to clock it on.
        dim: embedding width D.
        dense_bytes: dense bytes synchronised per iteration.
        routes: the system's dense and sparse routes (see [`time_model`][]).

    Returns:
        One row per iteration: ``step_s`` (the BSP step), ``dense_s`` (the AllReduce the step
        saw), ``dense_total_s``, ``compute_s`` and ``comm_s`` (the slowest worker's).
    """
    iterations = int(history["iteration"].nunique())
    workers = len(history) // iterations
    counters = history[list(COUNTERS)].to_numpy().reshape(iterations, workers, len(COUNTERS))
    compute = history["compute_s"].to_numpy(np.float64).reshape(iterations, workers)
    t = time_model(counters, links, dim, compute, dense_bytes, routes)
    return pd.DataFrame({"iteration": np.arange(iterations), "step_s": t["step_s"][:, 0],
                         "dense_s": t["dense_s"][:, 0],
                         "dense_total_s": t["dense_total_s"][:, 0],
                         "compute_s": t["compute_s"].max(axis=1),
                         "comm_s": t["comm_s"].max(axis=1)})


def summarize(counters: np.ndarray) -> list[dict[str, float | int]]:
    """Per-worker summary of cumulative counters (what the replay command prints).

    ``miss_rate`` = misses / unique keys over the reads that ended with the cache full
    (HET's ``overall_miss_rate``; NaN when the cache never filled); ``pull_rows_per_key`` =
    rows pulled / keys read (duplicates counted); ``push_rows_per_key`` = rows pushed / keys
    written.
    """
    out = []
    for row in np.atleast_2d(counters):
        c = {name: int(v) for name, v in zip(COUNTERS, row)}
        pulled = c["miss_pulls"] + c["stale_pulls"]
        pushed = c["bound_pushes"] + c["evict_pushes"] + c["uncached_pushes"] + c["flush_pushes"]
        out.append({
            "miss_rate": c["full_misses"] / c["full_unique"] if c["full_unique"] else math.nan,
            "pull_rows_per_key": pulled / c["keys_read"] if c["keys_read"] else math.nan,
            "push_rows_per_key": pushed / c["keys_written"] if c["keys_written"] else math.nan,
            "pulled_rows": pulled, "pushed_rows": pushed, **c})
    return out
