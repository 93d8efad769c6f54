"""Replay key traces: ``python -m workbench.replay cache`` and
``python -m workbench.replay dispatch``.

``dispatch``: a ``.npy`` of integer keys shaped ``[samples, tables]`` (one global key per table
per sample). Global batch t is samples ``[t W b, (t + 1) W b)``, wrapping around; the
dispatcher assigns each sample of the batch to a worker (exactly b each), every worker reads its
samples' keys through its HET cache and writes one update per occurrence. Output:
``{"batches": [{"workers": [{"samples": [...], "sync_plan_size": n, ...counters}, ...]}, ...]}``
with each worker's sorted sample indices, its sync-plan size (LAIA's ``cplan``; 0 for the
others) and its transfer counters for the batch. Example:

    python -m workbench.replay dispatch --trace keys.npy --dispatcher laia --workers 8 \
        --per-worker 128 --cache-rows 50000 --batches 100 --out dispatch.json

``cache``:

A trace is a ``.npy`` file of integer keys shaped ``[steps, workers, keys_per_step]`` (e.g.
exported from a production system). Each step, for workers 0..W-1 in order, the worker reads its
keys through its cache and then writes one constant update per key occurrence; all pushes of
step t land before any read of step t + 1 (``--order bsp`` instead makes every worker read before
any worker writes within a step). Example:

    python -m workbench.replay cache --trace trace.npy --policy lfu --cache-rows 10000 \\
        --bound 100 --dim 16 --out result.json

Output JSON: ``{"workers": [{...}, ...], "config": {...}}``, one object per worker with
``miss_rate`` (misses / unique keys over the reads that ended with the cache full),
``pull_rows_per_key`` (rows pulled / keys read, duplicates counted), ``push_rows_per_key`` (rows
pushed / keys written) and every raw counter of `workbench.cache.COUNTERS`. A worker
whose cache never filled (a trace with fewer distinct keys than cache lines) has no full-cache
miss rate (NaN) and its other rates are cold-start measurements: both commands then log a
warning with the numbers.

Bounds, checked before any work (one line, exit status 2): ``--dim`` in 1..65536 (the range of
``experiments.het_cache.dim``) and the emulated table (distinct keys x ``--dim`` float32, plus
the caches) within this machine's memory; ``--batches`` >= 1 and the output (every batch's sample
indices) within this machine's memory; the ``.npy`` header's shape x item size equal to the data
the file holds (a damaged header is not trusted); keys in 0..2^63-1 (a uint64 key above that is
refused at its position, by its value).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np

from workbench.arguments import Arg, ArgumentError, arg, check, key
from workbench.cluster.cache import POLICIES
from workbench.utils.errors import UserError, one_line
from workbench.utils.io import physical_memory

log = logging.getLogger("workbench.replay")
#: --dim: the embedding widths the experiments take
DIM = key("experiments.het_cache.dim")
#: bytes one float32 table or cache value takes
_FLOAT_BYTES = np.dtype(np.float32).itemsize
#: copies of a cache line's row each worker holds (two value buffers and the push queue,
#: :class:`workbench.cluster.cache.WorkerCache`)
_LINE_COPIES = 3
#: bytes one sample index of the dispatch output takes while it is built: in the batch's
#: record (int64), as a Python int in the worker's sorted list, and that list's pointer
_INDEX_BYTES = np.dtype(np.int64).itemsize + sys.getsizeof(1 << 40) + struct.calcsize("P")


class TraceError(UserError, ValueError):
    """The trace file is missing, unreadable or not a valid key trace, or an option is out of
    its bounds."""


def _bounds(spec: Arg) -> str:
    """``"1..65536"``: an option's closed interval, for its help."""
    lo, hi, _, _ = spec.meta["range"]
    return f"{lo}..{hi}"


def _options(command: str, **values: tuple[Any, Arg]) -> None:
    """Check options (``**{"--dim": (value, spec)}``) against their bounds.

    Raises:
        TraceError: ``"replay <command>: --dim = 0: must be an integer >= 1 and <= 65536 ..."``.
    """
    try:
        check(f"replay {command}", **values)
    except ArgumentError as err:
        raise TraceError(str(err)) from None


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def _check_memory(what: str, need: int, fix: str) -> None:
    """Refuse a run whose arrays ``need`` more bytes than this machine has.

    Raises:
        TraceError: naming ``what`` takes the memory, the two sizes and ``fix``.
    """
    have = physical_memory()
    if have is not None and need > have:
        raise TraceError(f"{what} would take {_gib(need)}, more than this machine's "
                         f"{_gib(have)} of memory: {fix}")


def _integer(dtype: np.dtype) -> bool:
    """An integer dtype (numpy counts ``timedelta64`` among its integers; a key is not one)."""
    return dtype.kind in "iu"


def _check_header(path: Path) -> None:
    """Trust an ``.npy`` header only as far as the file goes: its shape x item size must be the
    bytes of data after it, its dtype an integer one, and the keys (as int64) must fit this
    machine's memory (nothing is allocated before).

    Raises:
        TraceError: naming the file, what the header claims and what the file holds, or the
            memory the keys would take.
    """
    fmt = np.lib.format
    with path.open("rb") as fh:
        if fh.read(len(fmt.MAGIC_PREFIX)) != fmt.MAGIC_PREFIX:
            return  # not an .npy file: an .npz archive or no array at all, told by np.load
        fh.seek(0)
        try:
            major, _ = fmt.read_magic(fh)
            # versions 2 and 3 differ only in the header's encoding (an integer dtype's is ASCII)
            read = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
            shape, _, dtype = read(fh)
        except (ValueError, OSError, EOFError, SyntaxError) as err:
            raise TraceError(f"{path}: a damaged .npy header ({err}); save the keys again with "
                             "numpy.save") from None
        data = path.stat().st_size - fh.tell()
    if not _integer(dtype):
        raise TraceError(f"{path}: dtype {dtype}; expected integer keys")
    claimed = math.prod(shape) * dtype.itemsize
    if claimed != data:
        raise TraceError(f"{path}: the .npy header claims shape {shape} of {dtype} "
                         f"({claimed:,} bytes of data) but the file holds {data:,} bytes after "
                         "it: the file is truncated or its header damaged; save the keys again "
                         "with numpy.save")
    # the keys as read, and as int64 when they are narrower
    need = claimed + (0 if dtype.itemsize == 8 else 8 * math.prod(shape))
    _check_memory(f"{path}: its {math.prod(shape):,} keys (shape {shape})", need,
                  "replay a part of it (e.g. save np.load(path, mmap_mode='r')[:steps] "
                  "alone)")


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
    if rows is not None and rows < 1:
        raise TraceError(f"--rows = {rows}: must be an integer >= 1")
    _check_header(path)
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
    if not _integer(keys.dtype):
        raise TraceError(f"{path}: dtype {keys.dtype}; expected integer keys")
    if keys.size == 0:
        raise TraceError(f"{path}: the trace is empty (shape {keys.shape})")
    top = np.iinfo(np.int64).max
    if np.iinfo(keys.dtype).max > top:  # uint64: a key above int64's range cannot be cast
        big = np.argwhere(keys > top)
        if len(big):
            where = ", ".join(f"{a} {int(i)}" for a, i in zip(axes, big[0]))
            raise TraceError(f"{path}: key {int(keys[tuple(big[0])])} at [{where}] is above "
                             f"{top} (2^63 - 1), the largest key the replay takes; {len(big)} "
                             "keys that large (relabel them, e.g. np.unique(keys, "
                             "return_inverse=True))")
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


def _check_out(out: Path | None, trace: Path) -> None:
    """``--out`` must name a regular file (or a new one) in an existing directory, never a link
    or a device such as ``/dev/stdout`` (the result is written atomically: it would replace the
    link itself), and never the trace it reads; checked before any work."""
    if out is None:
        return
    if len(out.name.encode()) > 255:  # the OS refuses it (ENAMETOOLONG) only at the write
        raise TraceError(f"--out {out.name[:40]}... ({len(out.name.encode()):,} bytes): a file "
                         "name may have at most 255; give a shorter one")
    if out.exists() and trace.exists() and out.samefile(trace):  # a hard link too
        raise TraceError(f"--out {out}: that is the --trace it reads, which the result would "
                         f"replace; give another file, e.g. {out.with_suffix('.json')}")
    if out.is_dir() and not out.is_symlink():
        raise TraceError(f"--out {out}: a directory; give a file path, e.g. {out / 'result.json'}")
    if out.is_symlink() or (out.exists() and not out.is_file()):
        raise TraceError(f"--out {out}: a link or a special file, which would be replaced; give "
                         "a path to a regular file (or leave --out out for stdout)")
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
    cache.add_argument("--dim", type=int, default=16,
                       help=f"embedding width D, {_bounds(DIM)} (default 16)")
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
    disp.add_argument("--batches", type=int, required=True,
                      help="global batches T, >= 1; the output lists every batch's sample "
                           "indices, so at most what fits in this machine's memory")
    disp.add_argument("--bound", type=int, default=100, help="cache staleness bound")
    disp.add_argument("--rows", type=int, default=None, help="default: largest key + 1")
    disp.add_argument("--bandwidth-gbps", type=float, nargs="+", default=[1.0],
                      help="worker links (one value, or one per worker)")
    disp.add_argument("--dim", type=int, default=16,
                      help=f"row width for the cost model, {_bounds(DIM)} (default 16)")
    disp.add_argument("--seed", type=int, default=0)
    disp.add_argument("--out", type=Path, default=None, help="JSON output (default: stdout)")
    return parser


def run_cache(args: argparse.Namespace) -> dict:
    """Run ``replay cache`` for parsed ``args``; return the output document."""
    from workbench.cluster.config import CacheConfig, CachePolicy, ClusterConfig
    from workbench.cluster.edge_cluster import EdgeCluster, replay, summarize

    _check_out(args.out, args.trace)
    default = 100 if args.bound is None else args.bound
    read_bound = default if args.read_bound is None else args.read_bound
    write_bound = default if args.write_bound is None else args.write_bound
    bound = key("cache.read_bound")
    _options("cache", **{"--rows": (args.rows, arg(int, 1).or_none()), "--dim": (args.dim, DIM),
                         "--read-bound": (read_bound, bound), "--write-bound": (write_bound, bound),
                         "--cache-rows": (args.cache_rows, arg(int, 0).or_none()),
                         # a gradient step: finite, and small enough that a value stays finite
                         "--update": (args.update, arg(float, -1e3, 1e3))})
    trace, rows = load_keys(args.trace, args.rows, ("step", "worker", "position"))
    cache_rows = args.cache_rows if args.cache_rows is not None else max(1, rows // 10)
    # no lines: every key pulled and pushed
    policy: CachePolicy = "none" if cache_rows == 0 else args.policy
    trace, distinct = compact(trace)
    lines = min(cache_rows, distinct + 1) if policy != "none" else 0
    _check_memory(f"the table of {distinct:,} distinct keys and {trace.shape[1]} caches of "
                  f"{lines:,} lines at --dim {args.dim}",
                  (distinct + _LINE_COPIES * trace.shape[1] * lines) * args.dim * _FLOAT_BYTES,
                  "lower --dim or --cache-rows")
    # A cache of more than `distinct` lines never fills: distinct + 1 lines behave the same.
    cluster = EdgeCluster(ClusterConfig(workers=trace.shape[1]),
                          CacheConfig(policy=policy, rows=min(cache_rows, distinct + 1) or None,
                                      read_bound=read_bound, write_bound=write_bound),
                          table_rows=distinct, dim=args.dim)
    replay(cluster, trace, update=args.update, order=args.order, record=False,
           progress=sys.stderr.isatty())
    _warn_cold("replay cache", cluster.counters(), lines and cache_rows, distinct)
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

    _check_out(args.out, args.trace)
    _options("dispatch", **{
        "--workers": (args.workers, arg(int, 1)),  # its upper bound: the trace's samples
        "--per-worker": (args.per_worker, arg(int, 1)),
        "--cache-rows": (args.cache_rows, arg(int, 0)),
        "--batches": (args.batches, key("experiments.esd.batches")),
        "--bound": (args.bound, key("cache.read_bound")), "--dim": (args.dim, DIM),
        "--rows": (args.rows, arg(int, 1).or_none()), "--seed": (args.seed, key("seed"))})
    samples = args.batches * args.workers * args.per_worker
    have = physical_memory()
    if have is not None and samples * _INDEX_BYTES > have:
        most = max(have // (args.workers * args.per_worker * _INDEX_BYTES), 1)
        raise TraceError(f"--batches {args.batches}: the output lists {samples:,} sample "
                         f"indices ({_gib(samples * _INDEX_BYTES)}), more than this machine's "
                         f"{_gib(have)} of memory: at most --batches {most:,} with --workers "
                         f"{args.workers} --per-worker {args.per_worker}")
    keys, rows = load_keys(args.trace, args.rows, ("sample", "table"))
    if args.workers * args.per_worker > len(keys):
        raise TraceError(f"--workers {args.workers} x --per-worker {args.per_worker} = "
                         f"{args.workers * args.per_worker:,} samples per global batch, more than "
                         f"the {len(keys):,} samples of {args.trace}: at most --workers "
                         f"{max(len(keys) // args.per_worker, 1)} with --per-worker "
                         f"{args.per_worker}")
    keys, distinct = compact(keys)
    lines = min(args.cache_rows, distinct + 1)
    _check_memory(f"the table of {distinct:,} distinct keys and {args.workers} caches of "
                  f"{lines:,} lines at --dim {args.dim}",
                  (distinct + _LINE_COPIES * args.workers * lines) * args.dim * _FLOAT_BYTES,
                  "lower --dim or --cache-rows")
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
    _warn_cold("replay dispatch", cluster.counters(), args.cache_rows, distinct)
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


def _warn_cold(command: str, counters: np.ndarray, lines: int, distinct: int) -> None:
    """Log one warning when caches never filled: their hit ratios are cold-start measurements.

    Args:
        command: the command, for the message.
        counters: the cluster's cumulative ``[workers, COUNTERS]`` counters.
        lines: cache lines per worker asked for (0: no cache, nothing to fill).
        distinct: distinct keys of the trace.
    """
    from workbench.cluster.cache import C_INDEX

    cold = np.flatnonzero(counters[:, C_INDEX["full_reads"]] == 0)
    if lines == 0 or not len(cold):
        return
    which = "every worker's cache" if len(cold) == len(counters) else \
        f"the caches of workers {cold.tolist()} of {len(counters)}"
    lo, hi = (int(v) for v in (counters[cold, C_INDEX["keys_read"]].min(),
                               counters[cold, C_INDEX["keys_read"]].max()))
    log.warning("%s: %s never filled (--cache-rows %s; the trace has %s distinct keys and each "
                "of those workers read %s keys), so no read ran with a full cache: every hit "
                "and pull ratio is a cold-start measurement (miss_rate NaN); replay a longer "
                "trace or fewer --cache-rows", command, which, f"{lines:,}", f"{distinct:,}",
                f"{lo:,}" if lo == hi else f"{lo:,}..{hi:,}")


def main(argv: list[str] | None = None) -> None:
    """Entry point; bad input exits with status 2 and one line naming the problem."""
    from workbench.utils.io import write_json
    from workbench.utils.logs import setup

    args = _parser().parse_args(argv)
    setup("WARNING", role="replay")
    try:
        result = run_cache(args) if args.command == "cache" else run_dispatch_command(args)
    except UserError as err:  # TraceError, a ConfigError of a dispatcher's settings, ...
        print(one_line(err), file=sys.stderr)
        sys.exit(2)
    if args.out is None:
        sys.stdout.write(json.dumps(result, indent=2, allow_nan=True) + "\n")
        return
    try:
        write_json(args.out, result)
    except OSError as err:  # a full disk, a read-only folder: one line, nothing half-written
        from workbench.utils.io import is_disk_full

        why = "the disk is full" if is_disk_full(err) else (err.strerror or str(err))
        print(one_line(TraceError(f"--out {args.out}: could not write the result ({why}); "
                                  "free space or give another --out (nothing was written)")),
              file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
