"""Benchmark: preprocess throughput and peak memory against input size, streaming vs in memory.

Input: the full-size synthetic (Criteo Kaggle's cardinalities, ``cardinality_scale = 1.0``)
written as Criteo ``train.txt`` (TSV, no header, 8-hex-digit tokens) by
:func:`workbench.data.synthetic.write_criteo_tsv`: 1M, 10M and 45M rows (Criteo Kaggle has
45.8M). Each size is preprocessed by the stage's own code (``pipeline.preprocess``, a ``local``
``criteo_tsv`` source, ``min_count = 3`` as for Criteo Kaggle) in a fresh process per engine:

* ``streaming``: DuckDB, ``memory_limit_mb`` (default 2048);
* ``memory``: the in-memory path (pandas), only where its peak, extrapolated linearly from the
  smallest size, stays under 80% of this machine's RAM; otherwise recorded as skipped.

Per run: wall seconds, rows/s, and the child's peak RSS (``wait4``'s ``ru_maxrss``; the inputs
are generated in a child too, so this process stays small: a child's peak counts its parent's
at spawn, see ``workbench.utils.timing.ChildRun``). Then the
growth: seconds per row and peak RSS of each size relative to the smallest (time should be
linear: flat seconds per row; streaming memory flat). Inputs are cached under ``--workdir``
(11 GB at 45M rows) and reused when their size matches.

Usage: python benchmarks/preprocess_scaling.py [--sizes 1000000 10000000 45000000]
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
from workbench.utils.timing import run_measured

GENERATE = """
import sys
from workbench.data.config import SyntheticConfig
from workbench.data.synthetic import write_criteo_tsv
rows, seed, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
write_criteo_tsv(SyntheticConfig(rows=rows, cardinality_scale=1.0, chunk_rows=1_000_000), seed,
                 path, progress=True)
"""
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


def _input(workdir: Path, rows: int, seed: int) -> Path:
    path = workdir / f"criteo_full_{rows}" / "train.txt"
    marker = path.with_suffix(".rows")
    if path.exists() and marker.exists() and marker.read_text().strip() == str(rows):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    # In a child process: the generator's model (~1.5 GB at full size) must not raise this
    # process's RSS, which every measured child starts from (ChildRun.floor_mb).
    code = run_measured([sys.executable, "-c", GENERATE, str(rows), str(seed), str(path)])
    if code.exit_code != 0:
        raise RuntimeError(f"generating {path} failed (exit {code.exit_code})")
    marker.write_text(f"{rows}\n")
    print(f"wrote {rows:,} rows ({path.stat().st_size / 1e9:.2f} GB) in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    return path


def _run(ds: DatasetConfig, root: Path) -> dict:
    """Preprocess in a child process; its wall time and peak RSS."""
    shutil.rmtree(root / "processed" / ds.name, ignore_errors=True)
    args = {k: getattr(ds, k) for k in ("name", "source", "format", "path", "files", "min_count",
                                         "test_fraction", "engine", "memory_limit_mb",
                                         "row_group_rows")}
    run = run_measured([sys.executable, "-c", CHILD, json.dumps(args), str(root)])
    seconds = run.seconds
    if run.exit_code != 0:
        return {"engine": ds.engine, "failed": True, "exit": run.exit_code, "seconds": seconds,
                "peak_rss_mb": run.peak_rss_mb}
    if run.peak_rss_mb <= run.floor_mb:
        raise RuntimeError(f"the child's peak RSS ({run.peak_rss_mb:.0f} MB) is this process's "
                           f"({run.floor_mb:.0f} MB): not a measurement of the child")
    meta = json.loads((root / "processed" / ds.name / "meta.json").read_text())
    rows = meta["rows"]["train"] + meta["rows"]["test"]
    out = root / "processed" / ds.name
    return {"engine": ds.engine, "rows": rows, "seconds": seconds, "rows_per_s": rows / seconds,
            "peak_rss_mb": run.peak_rss_mb, "parent_rss_floor_mb": run.floor_mb,
            "embedding_rows": sum(meta["cardinalities"].values()),
            "output_bytes": sum(f.stat().st_size for f in out.glob("*.parquet"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000,
                                                                 45_000_000])
    parser.add_argument("--memory-limit-mb", type=int, default=2048)
    parser.add_argument("--workdir", type=Path, default=Path("data/bench"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-inputs", action="store_true",
                        help="keep the generated TSV files (11 GB at 45M rows)")
    parser.add_argument("--keep-outputs", action="store_true",
                        help="keep the largest size's processed dataset under --workdir "
                             "(root_<rows>/processed/criteo_full_<rows>) for the later stages")
    parser.add_argument("--out", type=Path,
                        default=Path("benchmarks/results/preprocess_scaling.json"))
    args = parser.parse_args()
    from workbench.data import pipeline

    ram = _ram_bytes()
    runs: list[dict] = []
    memory_mb_per_row: float | None = None
    for rows in sorted(args.sizes):
        tsv = _input(args.workdir, rows, args.seed)
        root = args.workdir / f"root_{rows}"
        base = DatasetConfig(name=f"criteo_full_{rows}", source="local", format="criteo_tsv",
                             path=str(tsv.parent.resolve()), files=[tsv.name], min_count=3,
                             memory_limit_mb=args.memory_limit_mb)
        pipeline.download(base, root, seed=args.seed)  # manifest (sha256 of the input)
        for engine in ("streaming", "memory"):
            ds = DatasetConfig(**{**base.__dict__, "engine": engine})
            if engine == "memory" and memory_mb_per_row is not None and \
                    memory_mb_per_row * rows * 2**20 > 0.8 * ram:
                runs.append({"engine": engine, "rows": rows, "skipped": (
                    f"extrapolated peak {memory_mb_per_row * rows / 1024:.1f} GB exceeds 80% "
                    f"of this machine's {ram / 2**30:.0f} GB")})
                print(f"{rows:,} rows, {engine}: skipped ({runs[-1]['skipped']})", flush=True)
                continue
            result = {"input_bytes": tsv.stat().st_size, **_run(ds, root)}
            result["rows"] = result.get("rows", rows)
            runs.append(result)
            if engine == "memory" and not result.get("failed") and memory_mb_per_row is None:
                memory_mb_per_row = result["peak_rss_mb"] / rows
            print(f"{rows:,} rows, {engine}: {result['seconds']:.1f} s, "
                  f"{result.get('rows_per_s', 0):,.0f} rows/s, peak RSS "
                  f"{result['peak_rss_mb']:,.0f} MB", flush=True)
        if not (args.keep_outputs and rows == max(args.sizes)):
            shutil.rmtree(root, ignore_errors=True)
        if not args.keep_inputs:
            shutil.rmtree(tsv.parent, ignore_errors=True)
    growth = {}
    for engine in ("streaming", "memory"):
        done = [r for r in runs if r["engine"] == engine and "seconds" in r
                and not r.get("failed")]
        if done:
            first = done[0]
            growth[engine] = [{"rows": r["rows"],
                               "seconds_per_row_vs_smallest": (r["seconds"] / r["rows"])
                               / (first["seconds"] / first["rows"]),
                               "peak_rss_vs_smallest": r["peak_rss_mb"] / first["peak_rss_mb"]}
                              for r in done]
    write_json(args.out, {
        "benchmark": "preprocess_scaling",
        "workload": {"input": "full-size synthetic as Criteo train.txt (cardinality_scale 1.0)",
                     "format": "criteo_tsv", "min_count": 3, "test_fraction": 0.1,
                     "memory_limit_mb": args.memory_limit_mb, "seed": args.seed},
        "machine": {"cpus": os.cpu_count(), "ram_gb": ram / 2**30,
                    "python": platform.python_version()},
        "runs": runs, "growth": growth})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
