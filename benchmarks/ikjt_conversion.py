"""Benchmark: KJT -> IKJT conversion throughput, one core, beside a plain-torch baseline.

A session-like batch (RecD): samples come in user sessions of 4..12 consecutive
samples (mean ~8); user-side keys are identical within a session (``user_id`` + ``user_country``
deduplicated together, ``user_history`` a list of 20 ids on its own), item-side keys are unique per
sample (``item_id``, ``item_category`` with 1..3 ids). Contenders, timed in alternating rounds
(``repeat_seconds``; median/min/max over the rounds):

* ``hash`` and ``sort``: :func:`~workbench.sparse.dedup.to_ikjt` over ``GROUPS`` (every
  key in a dedup group);
* ``request``: RecD's reader-side
  :func:`~workbench.sparse.dedup.to_ikjt_by_request` (the user-side keys deduplicated by
  session id, the item keys passed through as plain keys);
* ``torch_unique`` (baseline of ``hash``/``sort``): per group of ``GROUPS``, the group's rows
  deduplicated by content with ``torch.unique(..., return_inverse=True)``: on the values for a
  group of one single-id key, else ``dim=0`` on the group's ``[B, W]`` row matrix (a
  fixed-length list as is, e.g. the 20-id history; a variable-length one padded with 0 after a
  length column; several keys side by side). The matrices are built before timing, in the
  baseline's favour;
* ``torch_unique_request`` (baseline of ``request``): the same over ``REQUEST_GROUPS`` (the
  user-side keys' ``[B, 22]`` matrix; the item keys pass through, untouched).

Rates are honest about what is deduplicated: ``dedup_values_per_s`` counts the values of the
dedup groups only (each read once per unique row), ``pass_through_values`` (plain keys, copied
as they are) are reported apart and never counted as throughput. ``ratio_vs_baseline`` is the
spread of the per-round ``baseline seconds / ours seconds`` (ours/baseline throughput; rounds are
paired). The expand (IKJT -> KJT) rate and the dedup factors are recorded too.

Usage: python benchmarks/ikjt_conversion.py [--batch 4096] [--repeats 20]
       [--out benchmarks/results/ikjt_conversion.json]
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence

import numpy as np
import torch

from workbench.sparse.dedup import to_ikjt, to_ikjt_by_request
from workbench.sparse.jagged_tensor import KeyedJaggedTensor
from workbench.utils.io import write_json
from workbench.utils.timing import bench_parser, paired_ratio, pin_one_core, repeat_seconds, spread

HISTORY_LENGTH = 20
GROUPS = [["user_id", "user_country"], ["user_history"], ["item_id"], ["item_category"]]
REQUEST_GROUPS = [["user_id", "user_country", "user_history"]]
PLAIN = ["item_id", "item_category"]


def session_batch(batch: int, seed: int = 0) -> tuple[KeyedJaggedTensor, np.ndarray]:
    """A ``batch``-sample KJT whose user-side keys repeat within sessions of 4..12 samples, and
    the session id of every sample."""
    rng = np.random.default_rng(seed)
    runs = rng.integers(4, 13, size=batch)  # more sessions than needed; cut at `batch`
    session = np.repeat(np.arange(batch), runs)[:batch]
    n_sessions = int(session[-1]) + 1
    user_id = rng.permutation(10_000_000)[:n_sessions][session]
    user_country = rng.integers(0, 200, size=n_sessions)[session]
    history = rng.integers(0, 1_000_000, size=(n_sessions, HISTORY_LENGTH))[session].ravel()
    item_id = rng.permutation(50_000_000)[:batch]
    cat_lengths = rng.integers(1, 4, size=batch)
    cat_values = rng.integers(0, 5_000, size=int(cat_lengths.sum()))
    ones = np.ones(batch, dtype=np.int64)
    lengths = np.concatenate([ones, ones, np.full(batch, HISTORY_LENGTH), ones, cat_lengths])
    values = np.concatenate([user_id, user_country, history, item_id, cat_values])
    keys = ["user_id", "user_country", "user_history", "item_id", "item_category"]
    return (KeyedJaggedTensor(keys, values.astype(np.int64), lengths.astype(np.int64)),
            session.astype(np.int64))


def group_rows(kjt: KeyedJaggedTensor, group: Sequence[str]) -> torch.Tensor:
    """The rows of a dedup group as a tensor torch.unique can deduplicate: the values (1-D) for
    one key of single ids, else a ``[B, W]`` int64 matrix with the keys' blocks side by side
    (a fixed-length list as is, a variable-length one as ``[length, ids..., 0 padding]``)."""
    blocks = []
    for key in group:
        jt = kjt[key]
        lengths, values = jt.lengths(), jt.values()
        width = int(lengths.max(initial=0))
        if np.all(lengths == width):
            blocks.append(values.reshape(jt.batch_size, width))
            continue
        block = np.zeros((jt.batch_size, 1 + width), dtype=np.int64)
        block[:, 0] = lengths
        block[np.repeat(np.arange(jt.batch_size), lengths),
              1 + np.arange(values.size) - np.repeat(jt.offsets()[:-1], lengths)] = values
        blocks.append(block)
    rows = torch.from_numpy(np.concatenate(blocks, axis=1))
    return rows[:, 0].contiguous() if rows.shape[1] == 1 else rows


def torch_unique(rows: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The baseline: ``torch.unique(..., return_inverse=True)`` of every group's rows."""
    return [torch.unique(r, return_inverse=True) if r.dim() == 1
            else torch.unique(r, dim=0, return_inverse=True) for r in rows]


def key_values(kjt: KeyedJaggedTensor, groups: Sequence[Sequence[str]]) -> int:
    """Number of values of the keys of ``groups``."""
    return int(sum(kjt[k].values().size for g in groups for k in g))


def main() -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    pin_one_core()
    torch.set_num_threads(1)
    kjt, session = session_batch(args.batch)
    ikjt = to_ikjt(kjt, GROUPS)
    assert ikjt.expand() == kjt
    by_request = to_ikjt_by_request(kjt, REQUEST_GROUPS, session, plain=PLAIN, verify=True)
    assert by_request.expand() == kjt
    rows = {"all": [group_rows(kjt, g) for g in GROUPS],
            "request": [group_rows(kjt, g) for g in REQUEST_GROUPS]}
    for (_, inverse), group in zip(torch_unique(rows["all"]), GROUPS):  # same grouping
        assert int(inverse.max()) + 1 == ikjt.num_unique(group)
    times = repeat_seconds({
        "hash": lambda: to_ikjt(kjt, GROUPS, method="hash"),
        "sort": lambda: to_ikjt(kjt, GROUPS, method="sort"),
        "torch_unique": lambda: torch_unique(rows["all"]),
        "request": lambda: to_ikjt_by_request(kjt, REQUEST_GROUPS, session, plain=PLAIN),
        "torch_unique_request": lambda: torch_unique(rows["request"]),
        "expand": ikjt.expand}, args.repeats, warmup=True)
    expand_s = times.pop("expand")
    dedup_values = {"all": key_values(kjt, GROUPS), "request": key_values(kjt, REQUEST_GROUPS)}
    scope = {"hash": "all", "sort": "all", "torch_unique": "all", "request": "request",
             "torch_unique_request": "request"}
    baseline = {"hash": "torch_unique", "sort": "torch_unique", "request": "torch_unique_request"}
    results = {}
    for name, sec in times.items():
        n = dedup_values[scope[name]]
        results[name] = {
            "groups": GROUPS if scope[name] == "all" else REQUEST_GROUPS,
            "dedup_values": n, "pass_through_values": kjt.num_values() - n,
            "seconds": spread(sec), "dedup_values_per_s": spread([n / t for t in sec]),
            "samples_per_s": spread([kjt.batch_size / t for t in sec])}
        if name in baseline:
            results[name]["baseline"] = baseline[name]
            results[name]["ratio_vs_baseline"] = paired_ratio(times, baseline[name], name)
    summary = {
        "batch_size": kjt.batch_size,
        "kjt_values": kjt.num_values(),
        "ikjt_values": ikjt.num_values(),
        "value_reduction": kjt.num_values() / ikjt.num_values(),
        "dedup_factor": {"+".join(g): ikjt.dedup_factor(g) for g in GROUPS},
    }
    for name, res in results.items():
        rate = res["dedup_values_per_s"]
        line = (f"{name:>20}: {rate['median'] / 1e6:6.1f} M dedup-group values/s "
                f"[{rate['min'] / 1e6:.1f}, {rate['max'] / 1e6:.1f}] ({res['dedup_values']} "
                f"values deduplicated, {res['pass_through_values']} passed through)")
        if "baseline" in res:
            line += f"; vs {res['baseline']} {res['ratio_vs_baseline']['median']:.2f}x"
        print(line)
    print(f"IKJT -> KJT expand: {kjt.num_values() / spread(expand_s)['median'] / 1e6:.1f} "
          f"M values/s; values {kjt.num_values()} -> {ikjt.num_values()} "
          f"({summary['value_reduction']:.2f}x); dedup factors {summary['dedup_factor']}")
    write_json(args.out, {
        "benchmark": "ikjt_conversion",
        "setting": {"batch": args.batch, "session_length": [4, 12],
                    "history_length": HISTORY_LENGTH, "groups": GROUPS,
                    "request_groups": REQUEST_GROUPS, "request_plain": PLAIN,
                    "repeats": args.repeats, "cores": 1, "torch_threads": 1,
                    "timing": "median/min/max of alternating rounds after one warm-up round",
                    "metric": "dedup_values_per_s: values of the dedup groups per second "
                              "(pass-through values of plain keys not counted)",
                    "baseline": "torch.unique(return_inverse=True) per dedup group: 1-D on a "
                                "single-id key's values, dim=0 on the group's [B, W] row "
                                "matrix (built before timing)"},
        "machine": {"python": platform.python_version(), "numpy": np.__version__,
                    "torch": torch.__version__, "processor": platform.processor(),
                    "cpus": os.cpu_count()},
        "to_ikjt": results,
        "dedup_values_per_s": results["hash"]["dedup_values_per_s"],
        "expand": {"seconds": spread(expand_s),
                   "values_per_s": spread([kjt.num_values() / t for t in expand_s])},
        "batch": summary,
    })


if __name__ == "__main__":
    main()
