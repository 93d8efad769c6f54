"""Replay key traces: ``python -m workbench.replay cache`` and
``python -m workbench.replay dispatch``.

``dispatch``: a ``.npy`` of integer keys shaped ``[samples, tables]`` (one global key per table
per sample). Global batch t is samples ``[t W b, (t + 1) W b)``, wrapping around; the
dispatcher assigns each sample of the batch to a worker (exactly b each), every worker reads its
samples' keys through its HET cache and writes one update per occurrence. Output:
``{"batches": [{"workers": [{"samples": [...], "sync_plan_size": n, ...counters}, ...]}, ...]}``
with each worker's sorted sample indices, its sync-plan size (LAIA's ``cplan``; 0 for the
others) and its transfer counters for the batch. Example::

    python -m workbench.replay dispatch --trace keys.npy --dispatcher laia --workers 8 \
        --per-worker 128 --cache-rows 50000 --batches 100 --out dispatch.json

``cache``:

A trace is a ``.npy`` file of integer keys shaped ``[steps, workers, keys_per_step]`` (e.g.
exported from a production system). Each step, for workers 0..W-1 in order, the worker reads its
keys through its cache and then writes one constant update per key occurrence; all pushes of
step t land before any read of step t + 1 (``--order bsp`` instead makes every worker read before
any worker writes within a step). Example::

    python -m workbench.replay cache --trace trace.npy --policy lfu --cache-rows 10000 \\
        --bound 100 --dim 16 --out result.json

Output JSON: ``{"workers": [{...}, ...], "config": {...}}``, one object per worker with
``miss_rate`` (misses / unique keys over the reads that ended with the cache full),
``pull_rows_per_key`` (rows pulled / keys read, duplicates counted), ``push_rows_per_key`` (rows
pushed / keys written) and every raw counter of :data:`workbench.cache.COUNTERS`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from workbench.cluster.cache import POLICIES
from workbench.utils.errors import UserError, one_line


class TraceError(UserError, ValueError):
    """The trace file is missing, unreadable or not a valid key trace."""


def load_keys(path: Path, rows: int | None, axes: tuple[str, ...]) -> tuple[np.ndarray, int]:
    """Load and validate an integer key array whose dimensions are named ``axes``.

    Args:
        path: the ``.npy`` file.
        rows: table rows (keys must lie in ``0..rows-1``); None = the largest key + 1.
        axes: the expected dimension names, e.g. ``("step", "worker", "position")``.

    Returns:
        The keys as int64 and the table size.

    Raises:
        TraceError: naming the file and what is wrong (shape, dtype, the first bad key and
            where it is).
    """
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: a directory; --trace takes a .npy file")
    if path.stat().st_size == 0:
        raise TraceError(f"{path}: an empty file (0 bytes); save the keys with numpy.save")
    try:
        keys = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise TraceError(f"{path}: not a readable .npy array ({err})") from None
    if not isinstance(keys, np.ndarray):  # an .npz archive, whatever its name
        names = list(keys.files)
        keys.close()
        raise TraceError(f"{path}: an .npz archive (arrays {names}), not one .npy array; save "
                         "the key array alone with numpy.save")
    if keys.ndim != len(axes):
        raise TraceError(f"{path}: shape {keys.shape}; expected {len(axes)} dimensions "
                         f"[{', '.join(axes)}]")
    if not np.issubdtype(keys.dtype, np.integer):
        raise TraceError(f"{path}: dtype {keys.dtype}; expected integer keys")
    if keys.size == 0:
        raise TraceError(f"{path}: the trace is empty (shape {keys.shape})")
    keys = keys.astype(np.int64, copy=False)
    table_rows = int(keys.max()) + 1 if rows is None else rows
    bad = np.argwhere((keys < 0) | (keys >= table_rows))
    if len(bad):
        where = ", ".join(f"{a} {int(i)}" for a, i in zip(axes, bad[0]))
        raise TraceError(f"{path}: key {keys[tuple(bad[0])]} at [{where}] is outside "
                         f"0..{table_rows - 1} (--rows {table_rows}); {len(bad)} keys out of "
                         "range")
    return keys, table_rows


def compact(keys: np.ndarray) -> tuple[np.ndarray, int]:
    """Relabel keys to ``0..U-1`` in key order (``U`` distinct keys), so that the emulated tables
    hold U rows whatever the key values (a key of 10^12 costs one row, not 10^12).

    The relabelling keeps the order of keys, and every mechanism replayed here depends on keys
    only through equality and order (HET's caches touch sorted unique keys, LAIA touches keys in
    ascending order), so every counter is the same as on the original keys.

    Returns:
        The relabelled keys (same shape) and U.
    """
    uniq, inverse = np.unique(keys, return_inverse=True)
    return inverse.reshape(keys.shape).astype(np.int64), int(len(uniq))


def _check_out(out: Path | None) -> None:
    """``--out`` must name a file in an existing directory (checked before any work)."""
    if out is None:
        return
    if out.is_dir():
        raise TraceError(f"--out {out}: a directory; give a file path, e.g. {out / 'result.json'}")
    if not out.parent.is_dir():
        raise TraceError(f"--out {out}: the directory {out.parent} does not exist")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workbench.replay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    cache = sub.add_parser("cache", help="replay a trace through per-worker HET caches")
    cache.add_argument("--trace", type=Path, required=True, help=".npy [steps, workers, keys]")
    cache.add_argument("--policy", choices=sorted(POLICIES), default="lru")
    cache.add_argument("--cache-rows", type=int, default=None,
                       help="lines per worker cache (default: 10%% of --rows)")
    cache.add_argument("--bound", type=int, default=None,
                       help="staleness bound s for both reads and writes (default 100)")
    cache.add_argument("--read-bound", type=int, default=None)
    cache.add_argument("--write-bound", type=int, default=None)
    cache.add_argument("--rows", type=int, default=None,
                       help="table rows (default: the largest key + 1)")
    cache.add_argument("--dim", type=int, default=16, help="embedding width D")
    cache.add_argument("--update", type=float, default=-0.01,
                       help="constant update per key occurrence")
    cache.add_argument("--order", choices=["sequential", "bsp"], default="sequential")
    cache.add_argument("--out", type=Path, default=None, help="JSON output (default: stdout)")
    from workbench.dispatch.registry import DISPATCHERS

    disp = sub.add_parser("dispatch", help="dispatch global batches of a [samples, tables] "
                                           "trace to workers with HET caches")
    disp.add_argument("--trace", type=Path, required=True, help=".npy [samples, tables]")
    disp.add_argument("--dispatcher", choices=DISPATCHERS, required=True)
    disp.add_argument("--workers", type=int, required=True)
    disp.add_argument("--per-worker", type=int, required=True, help="samples per worker b")
    disp.add_argument("--cache-rows", type=int, required=True, help="cache lines per worker")
    disp.add_argument("--batches", type=int, required=True, help="global batches T")
    disp.add_argument("--bound", type=int, default=100, help="cache staleness bound")
    disp.add_argument("--rows", type=int, default=None, help="default: largest key + 1")
    disp.add_argument("--bandwidth-gbps", type=float, nargs="+", default=[1.0],
                      help="worker links (one value, or one per worker)")
    disp.add_argument("--dim", type=int, default=16, help="row width for the cost model")
    disp.add_argument("--seed", type=int, default=0)
    disp.add_argument("--out", type=Path, default=None, help="JSON output (default: stdout)")
    return parser


def run_cache(args: argparse.Namespace) -> dict:
    """Run ``replay cache`` for parsed ``args``; return the output document."""
    from workbench.cluster.config import CacheConfig, CachePolicy, ClusterConfig
    from workbench.cluster.edge_cluster import EdgeCluster, replay, summarize

    _check_out(args.out)
    trace, rows = load_keys(args.trace, args.rows, ("step", "worker", "position"))
    default = 100 if args.bound is None else args.bound
    read_bound = default if args.read_bound is None else args.read_bound
    write_bound = default if args.write_bound is None else args.write_bound
    for name, value, lo in (("--rows", rows, 1), ("--dim", args.dim, 1),
                            ("--read-bound", read_bound, 0), ("--write-bound", write_bound, 0),
                            ("--cache-rows", args.cache_rows if args.cache_rows is not None else
                             0, 0)):
        if value < lo:
            raise TraceError(f"{name} = {value}: must be >= {lo}")
    cache_rows = args.cache_rows if args.cache_rows is not None else max(1, rows // 10)
    # no lines: every key pulled and pushed
    policy: CachePolicy = "none" if cache_rows == 0 else args.policy
    trace, distinct = compact(trace)
    # A cache of more than `distinct` lines never fills: distinct + 1 lines behave the same.
    cluster = EdgeCluster(ClusterConfig(workers=trace.shape[1]),
                          CacheConfig(policy=policy, rows=min(cache_rows, distinct + 1) or None,
                                      read_bound=read_bound, write_bound=write_bound),
                          table_rows=distinct, dim=args.dim)
    replay(cluster, trace, update=args.update, order=args.order, record=False,
           progress=sys.stderr.isatty())
    return {"workers": summarize(cluster.counters()),
            "config": {"trace": str(args.trace), "steps": int(trace.shape[0]),
                       "workers": int(trace.shape[1]), "keys_per_step": int(trace.shape[2]),
                       "policy": args.policy, "cache_rows": cache_rows if policy != "none"
                       else 0, "read_bound": read_bound, "write_bound": write_bound,
                       "rows": rows, "distinct_keys": distinct,
                       "dim": args.dim, "update": args.update, "order": args.order}}


def run_dispatch_command(args: argparse.Namespace) -> dict:
    """Run ``replay dispatch`` for parsed ``args``; return the output document."""
    from workbench.cluster.cache import COUNTERS
    from workbench.cluster.config import CacheConfig, ClusterConfig
    from workbench.cluster.edge_cluster import EdgeCluster
    from workbench.dispatch.base import run_dispatch
    from workbench.dispatch.registry import make_dispatcher
    from workbench.utils.validation import ConfigError

    _check_out(args.out)
    keys, rows = load_keys(args.trace, args.rows, ("sample", "table"))
    for name, value, lo in (("--workers", args.workers, 1), ("--per-worker", args.per_worker, 1),
                            ("--cache-rows", args.cache_rows, 0), ("--batches", args.batches, 1),
                            ("--bound", args.bound, 0), ("--dim", args.dim, 1)):
        if value < lo:
            raise TraceError(f"{name} = {value}: must be >= {lo}")
    if args.workers * args.per_worker > len(keys):
        raise TraceError(f"--workers {args.workers} x --per-worker {args.per_worker} = "
                         f"{args.workers * args.per_worker:,} samples per global batch, more than "
                         f"the {len(keys):,} samples of {args.trace}: at most --workers "
                         f"{max(len(keys) // args.per_worker, 1)} with --per-worker "
                         f"{args.per_worker}")
    keys, distinct = compact(keys)
    try:
        cluster_cfg = ClusterConfig(workers=args.workers, bandwidth_gbps=args.bandwidth_gbps)
    except ConfigError as err:
        raise TraceError(f"--bandwidth-gbps: {err}") from None
    cache = (CacheConfig(policy="none") if args.cache_rows == 0 else
             CacheConfig(policy="lru", rows=min(args.cache_rows, distinct + 1),
                         read_bound=args.bound, write_bound=args.bound))
    cluster = EdgeCluster(cluster_cfg, cache, distinct, args.dim)
    caps = np.full(args.workers, args.per_worker, dtype=np.int64)
    dispatcher = make_dispatcher(args.dispatcher, cluster, caps, seed=args.seed)
    records = run_dispatch(cluster, keys, dispatcher, args.batches,
                           progress=sys.stderr.isatty())
    deltas = cluster.history()
    batches = []
    for t, rec in enumerate(records):
        workers = []
        for w in range(args.workers):
            row = deltas.iloc[t * args.workers + w]
            workers.append({
                "samples": sorted(int(i) for i in rec["samples"][w]),
                "sync_plan_size": int(rec["sync_plan_sizes"][w])
                if len(rec["sync_plan_sizes"]) else 0,
                "pulled_rows": int(rec["pulled_rows"][w]),
                "pushed_rows": int(rec["pushed_rows"][w]),
                **{name: int(row[name]) for name in COUNTERS}})
        batches.append({"batch": t, "method": rec["method"], "workers": workers})
    return {"batches": batches,
            "config": {"trace": str(args.trace), "dispatcher": args.dispatcher,
                       "workers": args.workers, "per_worker": args.per_worker,
                       "cache_rows": args.cache_rows, "batches": args.batches,
                       "bound": args.bound, "rows": rows, "distinct_keys": distinct,
                       "samples": int(len(keys))}}


def main(argv: list[str] | None = None) -> None:
    """Entry point; bad input exits with status 2 and one line naming the problem."""
    from workbench.utils.io import write_json

    args = _parser().parse_args(argv)
    try:
        result = run_cache(args) if args.command == "cache" else run_dispatch_command(args)
    except UserError as err:  # TraceError, a ConfigError of a dispatcher's settings, ...
        print(one_line(err), file=sys.stderr)
        sys.exit(2)
    if args.out is None:
        sys.stdout.write(json.dumps(result, indent=2, allow_nan=True) + "\n")
    else:
        write_json(args.out, result)


if __name__ == "__main__":
    main()
