"""Benchmark: per-message and per-row software cost of a PS exchange, client and server (one core).

One exchange of n rows: the client encodes a pull request of n keys with versions, the server
(a 100,000-key hash-map shard) answers with all n rows, the client decodes them and encodes a
push of n rows, the server applies it (workbench.cluster.software_cost): 2 messages and 3n rows
handled. Per D, the medians over the repeats at each size are fitted to
``t = 2 per_message + 3n per_row`` on each side, in the units the time model charges (per
message, per row handled); these are the measured defaults of the emulator's software cost.

Usage: python benchmarks/software_cost.py [--dims 32 128] [--repeats 31]
                                          [--out benchmarks/results/software_cost.json]
"""

from __future__ import annotations

import os
import platform

from workbench.cluster.software_cost import measure
from workbench.utils.io import write_json
from workbench.utils.timing import bench_parser, pin_one_core

SIZES = (1, 8, 64, 512, 4096)


def main() -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--dims", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--table-rows", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    pin_one_core()
    results = []
    print(f"{'D':>5s} {'side':6s} {'per message (us)':>17s} {'per row (us)':>13s}   "
          + " ".join(f"n={n:<6d}" for n in args.sizes) + " (median us per exchange)")
    for dim in args.dims:
        costs = measure(dim, sizes=args.sizes, repeats=args.repeats,
                        table_rows=args.table_rows, seed=args.seed)
        results.append(costs.to_dict())
        for side in ("client", "server"):
            medians = getattr(costs, f"{side}_seconds")
            print(f"{dim:5d} {side:6s} {getattr(costs, f'{side}_message_s') * 1e6:17.3f} "
                  f"{getattr(costs, f'{side}_row_s') * 1e6:13.5f}   "
                  + " ".join(f"{t * 1e6:8.1f}" for t in medians))
    write_json(args.out, {
        "benchmark": "software_cost", "units": "seconds",
        "setting": {"sizes": args.sizes, "repeats": args.repeats,
                    "table_rows": args.table_rows, "seed": args.seed, "cores": 1,
                    "fit": "relative least squares, coefficients >= 0, on per-size medians"},
        "machine": {"python": platform.python_version(), "processor": platform.processor(),
                    "cpus": os.cpu_count()},
        "results": results})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
