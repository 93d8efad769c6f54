"""Benchmark: preprocess throughput and peak memory against input size, streaming vs in memory.

Inputs, written once per size in a child process and cached under ``--workdir``:

* ``criteo_tsv``: the full-size synthetic (Criteo Kaggle's cardinalities, ``cardinality_scale =
  1.0``) written as Criteo ``train.txt`` (TSV, no header, 8-hex-digit tokens) by
  :func:`workbench.data.synthetic.write_criteo_tsv`: 1M, 10M and 45M rows (Criteo Kaggle has
  45.8M);
* ``avazu_csv``: an Avazu-shaped CSV (:func:`write_avazu_csv`: the header ``id,click,hour,
  C1,...,C21``, Avazu's per-column cardinalities, Zipf(1.3) popularity, 17% clicks, ten days of
  ``YYMMDDHH`` hours in order).

Each size is preprocessed by the stage's own code (``pipeline.preprocess``, a ``local`` source,
``min_count = 3`` as for Criteo Kaggle) in a fresh process per engine:

* ``streaming``: DuckDB, ``memory_limit_mb`` (default 2048);
* ``memory``: the in-memory path (pandas), only where its peak, extrapolated linearly from the
  smallest size, stays under 80% of this machine's RAM; otherwise recorded as skipped.

and, beside them on the same input, the scripts a user would write without the workbench
(``benchmarks/plain_preprocess.py``: ``pandas``, ``duckdb``, ``polars`` in memory and
``polars_streaming`` on Polars' streaming engine, ``--references``),
each in a fresh process too. Issues 48 and 69's target: the streaming stage beats every one in
rows per CPU-second and in wall time (``beats_references``), at every size, its rows and
vocabularies equal to theirs.

With ``--baseline DIR`` (a checkout of an earlier version, e.g. ``git worktree add /tmp/base
<commit>``) every streaming run is repeated, right after, with that checkout's ``workbench`` first
on ``PYTHONPATH``, on the same input: the before/after of one run, and ``speedup`` = the
baseline's seconds / ours (issue 35's target: 3x at 10M rows for both formats).

Per run: wall seconds, CPU seconds (user + system, every thread), rows/s, rows per CPU-second,
and the child's peak RSS (``wait4``'s ``ru_maxrss``; the inputs
are generated in a child too, so this process stays small: a child's peak counts its parent's
at spawn, see ``workbench.utils.timing.ChildRun``). Then the
growth: seconds per row and peak RSS of each size relative to the smallest (time should be
linear: flat seconds per row; streaming memory flat). Inputs are cached under ``--workdir``
(11 GB at 45M rows) and reused when their size matches.

Usage: python benchmarks/preprocess_scaling.py [--sizes 1000000 10000000 45000000]
       [--formats criteo_tsv avazu_csv] [--engines streaming memory] [--baseline DIR]
       [--references pandas duckdb polars polars_streaming]
       [--memory-limit-mb 2048] [--workdir data/bench] [--keep-inputs] [--keep-outputs]
       [--out benchmarks/results/preprocess_scaling.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

from workbench.data.config import DatasetConfig
from workbench.utils.io import write_json
from workbench.utils.timing import ChildRun, describe_checkout, run_measured

GENERATE = """
import sys
from workbench.data.config import SyntheticConfig
from workbench.data.synthetic import write_criteo_tsv
fmt, rows, seed, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if fmt == "criteo_tsv":
    write_criteo_tsv(SyntheticConfig(rows=rows, cardinality_scale=1.0, chunk_rows=1_000_000),
                     seed, path, progress=True)
else:
    sys.path.insert(0, sys.argv[5])
    from preprocess_scaling import write_avazu_csv
    write_avazu_csv(rows, seed, path)
"""
FILE_NAMES = {"criteo_tsv": "train.txt", "avazu_csv": "train.csv"}
TARGET_SPEEDUP = 3.0  # issue 35: streaming rows/s against the baseline's, at 10M rows
AVAZU_CARDINALITY = {  # Avazu CTR's distinct values per column (its 40M-row train file)
    "C1": 7, "banner_pos": 7, "site_id": 4737, "site_domain": 7745, "site_category": 26,
    "app_id": 8552, "app_domain": 559, "app_category": 36, "device_id": 2686408,
    "device_ip": 6729486, "device_model": 8251, "device_type": 5, "device_conn_type": 4,
    "C14": 2626, "C15": 8, "C16": 9, "C17": 435, "C18": 4, "C19": 68, "C20": 172, "C21": 60}
AVAZU_HEX = {"site_id", "site_domain", "site_category", "app_id", "app_domain", "app_category",
             "device_id", "device_ip", "device_model"}
CHILD = """
import sys, json, logging
from pathlib import Path
from workbench.data.config import DatasetConfig
from workbench.data import pipeline
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
ds = DatasetConfig(**json.loads(sys.argv[1]))
pipeline.preprocess(ds, Path(sys.argv[2]), seed=0)
"""


def _ram_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def write_avazu_csv(rows: int, seed: int, path: str | Path, chunk: int = 1_000_000) -> None:
    """An Avazu-shaped ``train`` CSV of ``rows`` rows (see the module docstring), vectorised."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from workbench.data.formats.avazu import AVAZU_HEADER

    rng = np.random.default_rng(seed)
    hexdigits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    shifts = np.arange(28, -1, -4, dtype=np.uint64)

    def text(values: np.ndarray) -> pa.Array:
        return pa.array(values).cast(pa.string())

    with open(path, "wb") as f:
        f.write((",".join(AVAZU_HEADER) + "\n").encode())
        for done in range(0, rows, chunk):
            n = min(chunk, rows - done)
            hours = (done + np.arange(n, dtype=np.int64)) * 240 // rows  # ten days, in order
            cols = {"id": text(rng.integers(0, 2**63 - 1, n)),
                    "click": text((rng.random(n) < 0.17).astype(np.int64)),
                    "hour": text(14_102_100 + hours // 24 * 100 + hours % 24)}
            for name in AVAZU_HEADER[3:]:
                rank = np.minimum(rng.zipf(1.3, n) - 1, AVAZU_CARDINALITY[name] - 1)
                v = (rank.astype(np.uint64) * np.uint64(2654435761)) % np.uint64(2**32)
                if name in AVAZU_HEX:  # 8 hex digits, as Avazu's hashed ids
                    chars = hexdigits[(v[:, None] >> shifts) & np.uint64(15)]
                    cols[name] = pa.array(chars.view("S8").ravel()).cast(pa.string())
                else:
                    cols[name] = text((v % np.uint64(100_000)).astype(np.int64))
            pacsv.write_csv(pa.table(cols), f, pacsv.WriteOptions(include_header=False,
                                                                 quoting_style="none"))


def _input(workdir: Path, fmt: str, rows: int, seed: int) -> Path:
    path = workdir / f"{fmt}_{rows}" / FILE_NAMES[fmt]
    marker = path.with_suffix(".rows")
    if path.exists() and marker.exists() and marker.read_text().strip() == str(rows):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    # In a child process: the generator's model (~1.5 GB at full size) must not raise this
    # process's RSS, which every measured child starts from (ChildRun.floor_mb).
    code = run_measured([sys.executable, "-c", GENERATE, fmt, str(rows), str(seed), str(path),
                         str(Path(__file__).resolve().parent)])
    if code.exit_code != 0:
        raise RuntimeError(f"generating {path} failed (exit {code.exit_code})")
    marker.write_text(f"{rows}\n")
    print(f"wrote {rows:,} rows ({path.stat().st_size / 1e9:.2f} GB) in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    return path


def _run(ds: DatasetConfig, root: Path, baseline: Path | None = None) -> dict:
    """Preprocess in a child process (with ``baseline``'s ``workbench`` first on the path when
    given); its wall time and peak RSS."""
    shutil.rmtree(root / "processed" / ds.name, ignore_errors=True)
    args = {k: getattr(ds, k) for k in ("name", "source", "format", "path", "files", "min_count",
                                         "test_fraction", "engine", "memory_limit_mb",
                                         "row_group_rows")}
    env = None
    if baseline is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(baseline.resolve()), os.environ.get("PYTHONPATH")]))}
    run = run_measured([sys.executable, "-c", CHILD, json.dumps(args), str(root)], env=env)
    seconds = run.seconds
    if run.exit_code != 0:
        return {"engine": ds.engine, "failed": True, "exit": run.exit_code, "seconds": seconds,
                "peak_rss_mb": run.peak_rss_mb}
    _check_child(run)
    meta = json.loads((root / "processed" / ds.name / "meta.json").read_text())
    rows = meta["rows"]["train"] + meta["rows"]["test"]
    out = root / "processed" / ds.name
    return {"engine": ds.engine, "rows": rows, **_speeds(run, rows),
            "split_rows": meta["rows"], "embedding_rows": sum(meta["cardinalities"].values()),
            "cardinalities": meta["cardinalities"],
            "output_bytes": sum(f.stat().st_size for f in out.glob("*.parquet"))}


def _check_child(run: ChildRun) -> None:
    """A measured child's peak must be its own (see ``ChildRun.floor_mb``)."""
    if run.peak_rss_mb <= run.floor_mb:
        raise RuntimeError(f"the child's peak RSS ({run.peak_rss_mb:.0f} MB) is this process's "
                           f"({run.floor_mb:.0f} MB): not a measurement of the child")


def _speeds(run: ChildRun, rows: int) -> dict:
    """A child's wall and CPU seconds, its rows per second of each, its peak RSS."""
    return {"seconds": run.seconds, "cpu_seconds": run.cpu_seconds,
            "rows_per_s": rows / run.seconds, "rows_per_cpu_s": rows / run.cpu_seconds,
            "peak_rss_mb": run.peak_rss_mb, "parent_rss_floor_mb": run.floor_mb}


def _reference(tool: str, fmt: str, path: Path, workdir: Path, ours: dict,
               memory_limit_mb: int) -> dict:
    """One plain script (``plain_preprocess.py``) on ``path`` in a fresh process: its speeds,
    and whether its split rows and vocabularies equal the stage's (``ours``)."""
    out, said = workdir / f"plain_{tool}", workdir / f"plain_{tool}.json"
    shutil.rmtree(out, ignore_errors=True)
    with open(said, "w") as f:
        run = run_measured([sys.executable, str(Path(__file__).resolve().parent /
                                                "plain_preprocess.py"),
                            tool, fmt, str(path), str(out), "--memory-limit-mb",
                            str(memory_limit_mb)], stdout=f)
    shutil.rmtree(out, ignore_errors=True)
    if run.exit_code != 0:
        return {"engine": f"{tool}_script", "failed": True, "exit": run.exit_code,
                "seconds": run.seconds, "peak_rss_mb": run.peak_rss_mb}
    _check_child(run)
    result = json.loads(said.read_text().strip().splitlines()[-1])
    said.unlink()
    rows = result["rows"]["train"] + result["rows"]["test"]
    same = None
    if "cardinalities" in ours:  # the stage's cardinality of a feature counts id 0
        same = bool(result["rows"] == ours["split_rows"] and all(
            ours["cardinalities"].get(c) == k + 1 for c, k in result["vocabulary"].items()))
    return {"engine": f"{tool}_script", "rows": rows, **_speeds(run, rows),
            "same_rows_and_vocabulary": same}


def _row(fmt: str, path: Path, rows: int, run: dict) -> dict:
    """One run's JSON row: its format, input bytes and rows (the requested count unless the
    run reports its own) with the run's measurements."""
    return {"format": fmt, "input_bytes": path.stat().st_size, **run,
            "rows": run.get("rows", rows)}


def _sizes(args: argparse.Namespace, fmt: str, ram: int) -> list[dict]:
    """Every size of one format: each engine, and the baseline's streaming run beside ours."""
    from workbench.data import pipeline

    runs: list[dict] = []
    memory_mb_per_row: float | None = None
    for rows in sorted(args.sizes):
        path = _input(args.workdir, fmt, rows, args.seed)
        root = args.workdir / f"root_{fmt}_{rows}"
        base = DatasetConfig(name=f"{fmt}_{rows}", source="local", format=fmt,
                             path=str(path.parent.resolve()), files=[path.name], min_count=3,
                             memory_limit_mb=args.memory_limit_mb)
        pipeline.download(base, root, seed=args.seed)  # manifest (sha256 of the input)
        for engine in args.engines:
            ds = DatasetConfig(**{**base.__dict__, "engine": engine})
            if engine == "memory" and memory_mb_per_row is not None and \
                    memory_mb_per_row * rows * 2**20 > 0.8 * ram:
                runs.append({"format": fmt, "engine": engine, "rows": rows, "skipped": (
                    f"extrapolated peak {memory_mb_per_row * rows / 1024:.1f} GB exceeds 80% "
                    f"of this machine's {ram / 2**30:.0f} GB")})
                print(f"{fmt}, {rows:,} rows, {engine}: skipped ({runs[-1]['skipped']})",
                      flush=True)
                continue
            result = _row(fmt, path, rows, _run(ds, root))
            runs.append(result)
            if engine == "memory" and not result.get("failed") and memory_mb_per_row is None:
                memory_mb_per_row = result["peak_rss_mb"] / rows
            _say(fmt, rows, engine, result)
            if engine == "streaming" and args.baseline is not None:
                before = {**_row(fmt, path, rows, _run(ds, root, args.baseline)),
                          "baseline": True}
                runs.append(before)
                _say(fmt, rows, "streaming (baseline)", before)
                if not (before.get("failed") or result.get("failed")):
                    result["speedup"] = before["seconds"] / result["seconds"]
                    print(f"  speedup {result['speedup']:.2f}x", flush=True)
        ours = next((r for r in runs if r.get("engine") == "streaming" and r["rows"] == rows
                     and r["format"] == fmt and not r.get("baseline") and not r.get("failed")),
                    {})
        for tool in args.references:
            result = _row(fmt, path, rows, _reference(tool, fmt, path, args.workdir, ours,
                                                      args.memory_limit_mb))
            runs.append(result)
            _say(fmt, rows, f"{tool} script", result)
        if ours and args.references:
            _judge(ours, [r for r in runs[-len(args.references):] if not r.get("failed")])
        if not (args.keep_outputs and rows == max(args.sizes)):
            shutil.rmtree(root, ignore_errors=True)
        if not args.keep_inputs:
            shutil.rmtree(path.parent, ignore_errors=True)
    return runs


def _judge(ours: dict, references: list[dict]) -> None:
    """Issue 48's verdict on the stage's streaming run: faster than every plain script in rows
    per CPU-second and in wall seconds, on the same rows and vocabularies."""
    ours["vs_references"] = {r["engine"]: {
        "cpu_speedup": r["cpu_seconds"] / ours["cpu_seconds"],
        "wall_speedup": r["seconds"] / ours["seconds"],
        "same_rows_and_vocabulary": r["same_rows_and_vocabulary"]} for r in references}
    ours["beats_references"] = bool(references) and all(
        v["cpu_speedup"] > 1 and v["wall_speedup"] > 1 and v["same_rows_and_vocabulary"]
        for v in ours["vs_references"].values())
    for name, v in ours["vs_references"].items():
        print(f"  vs {name}: {v['cpu_speedup']:.2f}x CPU, {v['wall_speedup']:.2f}x wall"
              f"{'' if v['same_rows_and_vocabulary'] else ' (DIFFERENT rows or vocabulary)'}",
              flush=True)


def _say(fmt: str, rows: int, what: str, result: dict) -> None:
    print(f"{fmt}, {rows:,} rows, {what}: {result['seconds']:.1f} s "
          f"({result.get('cpu_seconds', 0):.1f} CPU s), "
          f"{result.get('rows_per_s', 0):,.0f} rows/s, peak RSS "
          f"{result['peak_rss_mb']:,.0f} MB", flush=True)


def _beaten(runs: list[dict]) -> bool | None:
    """Whether every judged streaming run beat the plain scripts (None: none judged)."""
    judged = [r["beats_references"] for r in runs if "beats_references" in r]
    return bool(all(judged)) if judged else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000,
                                                                 45_000_000])
    parser.add_argument("--formats", nargs="+", default=list(FILE_NAMES),
                        choices=list(FILE_NAMES))
    parser.add_argument("--engines", nargs="+", default=["streaming", "memory"],
                        choices=["streaming", "memory"])
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a checkout of an earlier version: each streaming run again with "
                             "its workbench first on PYTHONPATH")
    parser.add_argument("--references", nargs="*",
                        default=["pandas", "duckdb", "polars", "polars_streaming"],
                        choices=["pandas", "duckdb", "polars", "polars_streaming"],
                        help="the plain scripts run beside the stage (plain_preprocess.py)")
    parser.add_argument("--memory-limit-mb", type=int, default=2048)
    parser.add_argument("--workdir", type=Path, default=Path("data/bench"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-inputs", action="store_true",
                        help="keep the generated TSV files (11 GB at 45M rows)")
    parser.add_argument("--keep-outputs", action="store_true",
                        help="keep the largest size's processed dataset under --workdir "
                             "(root_<format>_<rows>/processed/<format>_<rows>) for the later "
                             "stages")
    parser.add_argument("--out", type=Path,
                        default=Path("benchmarks/results/preprocess_scaling.json"))
    args = parser.parse_args()

    ram = _ram_bytes()
    runs: list[dict] = []
    for fmt in args.formats:
        runs += _sizes(args, fmt, ram)
    growth = {}
    for fmt in args.formats:
        for engine in ("streaming", "memory"):
            done = [r for r in runs if r["format"] == fmt and r["engine"] == engine
                    and "seconds" in r and not r.get("failed") and not r.get("baseline")]
            if done:
                first = done[0]
                growth[f"{fmt}/{engine}"] = [
                    {"rows": r["rows"], "seconds_per_row_vs_smallest": (r["seconds"] / r["rows"])
                     / (first["seconds"] / first["rows"]),
                     "peak_rss_vs_smallest": r["peak_rss_mb"] / first["peak_rss_mb"]}
                    for r in done]
    at_10m = [r for r in runs if "speedup" in r and r["rows"] >= 10_000_000]
    from workbench.utils.timing import machine

    write_json(args.out, {
        "benchmark": "preprocess_scaling",
        "workload": {"inputs": {"criteo_tsv": "full-size synthetic as Criteo train.txt "
                                              "(cardinality_scale 1.0)",
                                "avazu_csv": "Avazu-shaped CSV (write_avazu_csv)"},
                     "formats": args.formats, "min_count": 3, "test_fraction": 0.1,
                     "memory_limit_mb": args.memory_limit_mb, "seed": args.seed},
        "machine": {**machine(), "ram_gb": ram / 2**30, "python": platform.python_version()},
        "baseline": None if args.baseline is None else describe_checkout(args.baseline),
        "target_speedup": TARGET_SPEEDUP,
        # None: no baseline run at 10M rows or more to judge by
        "meets_target": None if not at_10m else bool(all(r["speedup"] >= TARGET_SPEEDUP
                                                         for r in at_10m)),
        "beats_references": _beaten(runs) if args.references else None,
        "runs": runs, "growth": growth})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
