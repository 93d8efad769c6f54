"""RecD's claims (training and preprocessing throughput, storage) from ``dedup`` and ``recd``.

Reads ``results/dedup/<ds>/`` (partitions' dedup factors and Parquet bytes) and
``results/recd/<ds>/timing_rounds.csv`` (alternating wall-clock rounds, KJT and IKJT back to
back: each round's IKJT / KJT throughput is one paired sample).

* ``recd.train``: IKJT / KJT training throughput per round on the register's committed dataset,
  clustered partitions; the other datasets are the condition.
* ``recd.preprocess``: the same for the reader at the committed reader batch (512); the reader
  batch and the dataset are the conditions.
* ``recd.storage``: shuffled / clustered zstd Parquet bytes at the committed window.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from workbench.claims.measurement import EntryLike, Measurement, Results, estimate_text
from workbench.sparse import reader

READER_BATCH = 512  # the committed reader batch of the preprocessing claim (assumed parameter)


def runs(res: Results) -> dict[str, Any]:
    """The ``dedup`` stage's available datasets: summaries, dedup factors and storage bytes."""
    def build() -> dict[str, Any]:
        found, notes = res.available("dedup", res.cfg.experiments.recd.datasets)
        summaries = {name: {"dedup": info} for name, info in found.items()}
        frames = {kind: [res.csv("dedup", name, f"{kind}.csv").assign(dataset=name)
                         for name in summaries] for kind in ("dedup", "storage")}
        if not summaries:
            raise FileNotFoundError(f"{res.path('dedup')}: none of the datasets "
                                    f"{list(res.cfg.experiments.recd.datasets)} was available")
        return {"summaries": summaries, "unavailable": notes,
                **{k: pd.concat(v, ignore_index=True) for k, v in frames.items()}}
    return res.memo("recd", build)


def dataset_setting(res: Results, name: str) -> str:
    """One dataset's rows, sessions and dedup group."""
    s = runs(res)["summaries"][name]["dedup"]
    return (f"{name}: {s['rows']:,} train rows, {s['sessions']:,} sessions "
            f"({s['mean_session_rows']:.1f} rows each), group {'+'.join(s['groups'][0])}")


def transforms_text(res: Results) -> str:
    """The reader's transforms in words."""
    exp = res.cfg.experiments.recd
    return ("configured transforms" if exp.transforms else
            f"truncate histories to {exp.max_history}, hash every id into its table")


def middle_batch(res: Results) -> int:
    """The batch size the dedup factors are shown at (the training batch when swept)."""
    exp = res.cfg.experiments.recd
    return exp.train_batch_size if exp.train_batch_size in exp.batch_sizes else exp.batch_sizes[-1]


def storage_ratios(res: Results) -> pd.DataFrame:
    """Shuffled / clustered and shuffled / session-layout bytes per dataset and window
    (``storage_ratio``, ``session_ratio``; the latter NaN for results written before the
    session layout)."""
    storage = runs(res)["storage"]
    totals = storage[storage["column_class"] == "total"]
    ratio = totals.pivot_table(index=["dataset", "window"], columns="layout",
                               values="bytes").reset_index()
    ratio["storage_ratio"] = ratio["shuffled"] / ratio["clustered"]
    ratio["session_ratio"] = (ratio["shuffled"] / ratio["sessions"] if "sessions" in ratio
                              else float("nan"))
    return ratio


#: the preprocessing claim's IKJT path: read from the session layout RecD's data generation
#: writes
SESSION_PATH = reader.SESSION_PATH


def round_ratios(frame: pd.DataFrame, path: str = "ikjt", base: str = "kjt") -> list[float]:
    """IKJT (``path``) / KJT (``base``) throughput per round."""
    wide = frame.pivot_table(index="round", columns="path", values="samples_per_s")
    return (wide[path] / wide[base]).tolist() if {path, base} <= set(wide) else []


def track_points(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The training path condition: IKJT / KJT per round on each track the stage measured
    (the workbench's model, TorchRec's EmbeddingBagCollection with its dense and with sparse
    table gradients, fbgemm's fused TBE; [`workbench.experiments.recd.TRACKS`][])."""
    from workbench.experiments.recd import TRACKS

    return [{"value": track, "values": ratios} for track, (kjt, ikjt) in TRACKS.items()
            if (ratios := round_ratios(frame, ikjt, kjt))]


def timing_rounds(res: Results) -> pd.DataFrame:
    """The ``recd`` stage's alternating rounds of every available dataset."""
    return res.memo("recd_rounds", lambda: pd.concat(
        [res.csv("recd", n, "timing_rounds.csv").assign(dataset=n)
         for n in runs(res)["summaries"]], ignore_index=True))


def _rounds(res: Results, phase: str) -> pd.DataFrame:
    rounds = timing_rounds(res)
    rounds = rounds[rounds["layout"] == "clustered"]
    return rounds[rounds["phase"] == phase]


def _fmt(values: list[float]) -> str:
    return estimate_text(values, lambda x: f"{x:.2f}x")


def train(res: Results, entry: EntryLike) -> Measurement:
    """RecD's training speedup (IKJT over KJT) on the committed dataset."""
    exp, committed = res.cfg.experiments.recd, str(entry.ours["dataset"])
    train_r = _rounds(res, "train")
    at = train_r[train_r["dataset"] == committed]
    mine = round_ratios(at)
    tracks = track_points(at)
    dedup = runs(res)["dedup"]
    user = dedup[(dedup["group"] != "all") & (dedup["window"] == exp.window)]
    factors = user[(user["layout"] == "clustered")
                   & (user["batch_size"] == middle_batch(res))].set_index("dataset")[
        "dedup_factor"]
    return Measurement(
        entry.key, _fmt(mine),
        f"{committed}, clustered partitions, batch {exp.train_batch_size}, user-group dedup "
        f"factor {factors.get(committed, float('nan')):.1f}; DLRM + self-attention history "
        f"tower, D = {exp.embedding_dim}; one thread",
        {"values": mine or None, "missing": f"{committed} was not available in this run"},
        {"dataset": [{"value": n, "values": round_ratios(g)}
                     for n, g in train_r.groupby("dataset")],
         "path": tracks},
        f"{exp.repeats} alternating rounds (wall clock on this machine); the gain follows the "
        "dedup factor and the share of compute in the deduplicated group (the history tower "
        "here); the paper's 'up to' is its best model, ours the committed dataset; "
        + ("TorchRec's own paths (its EmbeddingBagCollection on its KJT and on the IKJT as its "
           "variable-batch KJT, pooled bags; fbgemm's fused TBE, SGD in the backward, on the KJT "
           "and on the IKJT variable-batch or padded): " + "; ".join(
               f"{p['value']} {_fmt(p['values'])}" for p in tracks[1:])
           if len(tracks) > 1 else "TorchRec's path was not measured (TorchRec did not load "
           "in the recd stage: make torchrec)"))


def preprocess(res: Results, entry: EntryLike) -> Measurement:
    """RecD's preprocessing speedup (IKJT reader over KJT) at the committed reader batch."""
    exp, committed = res.cfg.experiments.recd, str(entry.ours["dataset"])
    pre_r = _rounds(res, "preprocess")
    mine = pre_r[pre_r["dataset"] == committed]
    at = round_ratios(mine[mine["batch_size"] == READER_BATCH], SESSION_PATH)
    from_rows = round_ratios(mine[mine["batch_size"] == READER_BATCH])
    rows_text = (f"; the reader that finds each request's first row in the clustered rows: "
                 f"{_fmt(from_rows)}" if from_rows else "")
    return Measurement(
        entry.key, _fmt(at),
        f"{committed}, reader batch {READER_BATCH}: the IKJT read from the session layout, the "
        f"KJT from the clustered rows; {transforms_text(res)}",
        {"values": at or None,
         "missing": f"{committed} was not available in this run, reader batch "
                    f"{READER_BATCH} was not measured, or its partitions have no session layout "
                    "(rerun the dedup stage)"},
        {"reader batch": [{"value": int(b), "values": round_ratios(g, SESSION_PATH)}
                          for b, g in mine.groupby("batch_size")],
         "dataset": [{"value": n, "values": round_ratios(g, SESSION_PATH)}
                     for n, g in pre_r[pre_r["batch_size"] == READER_BATCH].groupby("dataset")]},
        f"{exp.repeats} alternating rounds (wall clock){rows_text}; at small reader batches "
        "per-key overheads dominate; the reader batch is an assumed parameter (the paper's is "
        "unknown)")


def storage(res: Results, entry: EntryLike) -> Measurement:
    """RecD's storage saving: shuffled Parquet bytes / the session layout's (the clustered
    partitions with the request-level features written once per session)."""
    exp, committed = res.cfg.experiments.recd, str(entry.ours["dataset"])
    ratio = storage_ratios(res)
    at = ratio[ratio["window"] == exp.window].set_index("dataset")
    store = at["session_ratio"].dropna()
    clustered = (f"; clustered rows alone {at.loc[committed, 'storage_ratio']:.2f}x"
                 if committed in at.index else "")
    dedup = runs(res)["summaries"].get(committed, {}).get("dedup", {})
    once = ", ".join(dedup.get("session_columns", [])) or "none"
    return Measurement(
        entry.key, f"{store[committed]:.2f}x" if committed in store else "-",
        f"zstd Parquet, window {exp.window:,} rows, history {exp.history}, session layout "
        f"({once} once per session){clustered}; "
        + (dataset_setting(res, committed) if committed in runs(res)["summaries"] else "-"),
        {"values": [store[committed]] if committed in store else None,
         "missing": f"{committed} has no session layout in this run (rerun the dedup stage)"},
        {"dataset": [{"value": n, "values": [v]} for n, v in store.items()]},
        "our formalisation; byte counts (deterministic); the saving grows with the share of "
        "bytes in request-level features (see the storage figure's column classes)")
