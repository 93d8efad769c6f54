"""Benchmark: KJT -> IKJT conversion throughput (KJT values per second, one core).

A session-like batch (RecD, DESIGN.md 3.6): samples come in user sessions of 4..12 consecutive
samples (mean ~8); user-side keys are identical within a session (``user_id`` + ``user_country``
deduplicated together, ``user_history`` a list of 20 ids on its own), item-side keys are unique per
sample (``item_id``, ``item_category`` with 1..3 ids). Throughput = KJT values / seconds of
``to_ikjt`` (best of ``--repeats``), for the default ``hash`` method and the exact ``sort`` one, and
of RecD's reader-side ``to_ikjt_by_request`` (the user-side keys deduplicated by session id, the
item keys plain); the expand (IKJT -> KJT) rate, dedup factors and value counts are recorded too.

Usage: python benchmarks/ikjt_conversion.py [--batch 4096] [--repeats 20]
       [--out benchmarks/results/ikjt_conversion.json]
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

import numpy as np

from workbench.sparse.jagged_tensor import KeyedJaggedTensor, to_ikjt, to_ikjt_by_request
from workbench.utils.io import write_json
from workbench.utils.timing import best_seconds, pin_one_core

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "ikjt_conversion.json")
    args = parser.parse_args()
    pin_one_core()
    kjt, session = session_batch(args.batch)
    ikjt = to_ikjt(kjt, GROUPS)
    assert ikjt.expand() == kjt
    by_request = to_ikjt_by_request(kjt, REQUEST_GROUPS, session, plain=PLAIN, verify=True)
    assert by_request.expand() == kjt
    seconds = best_seconds({
        "hash": lambda: to_ikjt(kjt, GROUPS, method="hash"),
        "sort": lambda: to_ikjt(kjt, GROUPS, method="sort"),
        "request": lambda: to_ikjt_by_request(kjt, REQUEST_GROUPS, session, plain=PLAIN),
        "expand": ikjt.expand}, args.repeats, warmup=True)
    expand_s = seconds.pop("expand")
    results = {name: {"seconds": sec, "values_per_s": kjt.num_values() / sec,
                      "samples_per_s": kjt.batch_size / sec} for name, sec in seconds.items()}
    summary = {
        "batch_size": kjt.batch_size,
        "kjt_values": kjt.num_values(),
        "ikjt_values": ikjt.num_values(),
        "value_reduction": kjt.num_values() / ikjt.num_values(),
        "dedup_factor": {"+".join(g): ikjt.dedup_factor(g) for g in GROUPS},
    }
    h = results["hash"]
    print(f"KJT -> IKJT (hash): {h['values_per_s'] / 1e6:.1f} M values/s "
          f"({h['seconds'] * 1e3:.2f} ms for {kjt.num_values()} values, batch {kjt.batch_size})")
    print(f"KJT -> IKJT (sort): {results['sort']['values_per_s'] / 1e6:.1f} M values/s")
    print(f"KJT -> IKJT (request ids): {results['request']['values_per_s'] / 1e6:.1f} M values/s")
    print(f"IKJT -> KJT expand: {kjt.num_values() / expand_s / 1e6:.1f} M values/s")
    print(f"values {kjt.num_values()} -> {ikjt.num_values()} "
          f"({summary['value_reduction']:.2f}x); dedup factors {summary['dedup_factor']}")
    write_json(args.out, {
        "benchmark": "ikjt_conversion",
        "setting": {"batch": args.batch, "session_length": [4, 12],
                    "history_length": HISTORY_LENGTH, "groups": GROUPS,
                    "request_groups": REQUEST_GROUPS, "request_plain": PLAIN,
                    "repeats": args.repeats, "timing": "best of alternating repeats", "cores": 1},
        "machine": {"python": platform.python_version(), "numpy": np.__version__,
                    "processor": platform.processor(), "cpus": os.cpu_count()},
        "to_ikjt": results,
        "values_per_s": h["values_per_s"],
        "expand": {"seconds": expand_s, "values_per_s": kjt.num_values() / expand_s},
        "batch": summary,
    })


if __name__ == "__main__":
    main()
