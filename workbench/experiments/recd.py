"""RecD's ``recd`` stage: preprocessing and training throughput on KJT vs IKJT batches.

**Our formalisation of RecD** (the paper's method section is unavailable); the whole pipeline,
from the processed split through the partitions to both paths' training, is drawn in
[`workbench.experiments.dedup`][]. Per layout, this stage reads the partitions in batches of b
rows and runs two paths on them:

    KJT --transforms--> KJT --model--> loss                      (every row)
    KJT --to_ikjt--> IKJT --transforms--> IKJT --model--> loss   (unique rows of the groups)
    session layout --session_ikjt--> IKJT  (the clustered layout's batches, read from the
                                            files that store a session once: the same IKJT)

* ``timing.csv`` (wall clock, machine-dependent): preprocessing seconds for the KJT path (the
  transforms on every row) and the IKJT path (``to_ikjt`` plus the transforms on the unique rows),
  and training seconds (forward, backward, optimizer step) on KJT and IKJT batches, per layout;
  the best of ``repeats`` alternating runs. The tables get row-indexed (sparse COO) gradients
  and Adagrad updates only the rows read ([`RecDModel`][workbench.models.recd.RecDModel]'s
  default), so a step's cost follows the ids it reads, which dedup reduces, not the table
  sizes, which are the same on both paths. The reader hands the trainer ready batches, as in
  RecD, so conversion is part of preprocessing, not of training.
* ``timing_rounds.csv``: every one of the ``repeats`` alternating rounds (``round``); a round
  times both paths back to back, so the per-round ratio IKJT/KJT is one paired sample of the
  speedup (the claims' mean and 95% interval).
* ``training.csv``: the loss of every step on both paths (the IKJT path trains the same model:
  equal up to float summation order).

Training runs on every track of [`TRACKS`][] (``summary.json``'s ``tracks``): the workbench's
model on its KJT and IKJT, and, where TorchRec loads (``make torchrec``), TorchRec's own
EmbeddingBagCollection on TorchRec's KJT and on RecD's IKJT as TorchRec's variable-batch KJT
([`workbench.models.torchrec_dlrm`][]), with its dense table gradients and with sparse ones,
and fbgemm's fused TBE (TorchRec's fused kernel) on the KJT and on the IKJT, variable-batch or
padded to a fixed batch; all paths alternate in every round.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from workbench.data import partition as part
from workbench.data.schema import LABEL
from workbench.experiments.config import RecdConfig
from workbench.experiments.sizing import require_samples
from workbench.models.recd import FeatureSpec, RecDModel
from workbench.sparse import reader
from workbench.sparse.dedup import to_ikjt
from workbench.sparse.transforms import FeatureTransforms
from workbench.training.recd_trainer import RecDTrainer
from workbench.utils.timing import repeat_seconds

log = logging.getLogger(__name__)

#: The models' tables get row-indexed (sparse COO) gradients (see :mod:`workbench.models.recd`).
SPARSE_GRADIENTS = True


@dataclass(frozen=True)
class Batch:
    """One batch of a layout: the decoded columnar rows, dense features and labels, and (the
    clustered layout) the same samples in the session layout: the rows file's slice and the
    whole sessions file of their partition."""

    rows: pa.Table
    dense: np.ndarray | None
    labels: np.ndarray
    session: tuple[pa.Table, pa.Table] | None = None  # (sessions file, rows-file slice)


def auto_transforms(meta: dict[str, Any], exp: RecdConfig) -> FeatureTransforms:
    """The preprocessing chains: the configured ones, else truncate sequences to
    ``max_history`` and hash every feature's ids into its table (sigrid-hash style)."""
    from workbench.sparse.transforms import from_spec

    if exp.transforms:
        return from_spec({key: [step.spec() for step in steps]
                          for key, steps in exp.transforms.items()})
    cards = meta["cardinalities"]
    spec: dict[str, list[dict[str, Any]]] = {}
    for i, key in enumerate(meta["keys"]):
        item = meta["sequences"].get(key)
        steps: list[dict[str, Any]] = []
        if item is not None:
            steps.append({"op": "truncate", "max_length": exp.max_history, "keep": "last"})
        steps.append({"op": "hash", "num_buckets": int(cards[item or key]), "salt": i})
        spec[key] = steps
    return from_spec(spec)


def read_batches(table: pa.Table, meta: dict[str, Any], batch_size: int,
                 count: int, sessions: Path | None = None) -> list[Batch]:
    """The first ``count`` full batches of a layout, in partition order; with ``sessions``
    (the session layout's directory, for the clustered layout) each batch also carries its
    samples in the session layout, when no batch crosses a partition (``meta["window"]`` a
    multiple of ``batch_size``)."""
    rows = table.num_rows
    n = min(count, rows // batch_size)
    if n < 1:
        raise ValueError(f"experiments.recd.train_batch_size = {batch_size}: larger than the "
                         f"{rows} rows of {meta['dataset']}'s partitions")
    dense_names = meta["dense"]
    window = int(meta.get("window") or 0)
    aligned = sessions is not None and window > 0 and window % batch_size == 0
    files: dict[int, tuple[pa.Table, pa.Table]] = {}
    out = []
    for b in range(n):
        chunk = table.slice(b * batch_size, batch_size).combine_chunks()
        dense = (np.stack([chunk.column(c).to_numpy() for c in dense_names], axis=1)
                 .astype(np.float32) if dense_names else None)
        session = None
        if aligned:
            assert sessions is not None
            p, start = divmod(b * batch_size, window)
            if p not in files:
                files[p] = part.read_session_partition(sessions, p)
            once, each = files[p]
            session = (once, each.slice(start, batch_size).combine_chunks())
        out.append(Batch(chunk, dense, chunk.column(LABEL).to_numpy().astype(np.float32),
                         session))
    return out


SESSION_PATH = reader.SESSION_PATH


def preprocessors(meta: dict[str, Any], transforms: FeatureTransforms):
    """The preprocessing paths, each ``batch -> transformed sparse batch``.

    * ``kjt``: build the KJT of every row, transform every row.
    * ``ikjt``: RecD's reader (`table_to_ikjt`: the
      grouped, request-level features read once per request), transform the unique rows.
    * ``ikjt (content hash)``: build the KJT, find duplicates by hashing every value
      ([`to_ikjt`][workbench.sparse.dedup.to_ikjt]), transform the unique rows.
    * ``ikjt (session layout)`` (batches that carry the session layout): the batch's sessions
      are a contiguous slice of its partition's sessions file, read as the unique rows, and
      ``session_row`` less the slice's start is the inverse lookup
      ([`session_ikjt`][workbench.sparse.reader.session_ikjt]): nothing is deduplicated at read
      time.
    """
    keys, groups, plain = meta["keys"], meta["groups"], meta["plain"]

    def from_sessions(batch: Batch):
        assert batch.session is not None  # only batches that carry the session layout
        once, rows = batch.session
        at = rows.column(part.SESSION_ROW).to_numpy()
        first = int(at.min())
        rows = rows.set_column(rows.schema.get_field_index(part.SESSION_ROW), part.SESSION_ROW,
                               pa.array(at - first))
        return transforms.apply_ikjt(reader.session_ikjt(
            once.slice(first, int(at.max()) + 1 - first), rows, keys, groups, plain))

    return {
        "kjt": lambda b: transforms.apply_kjt(reader.table_to_kjt(b.rows, keys)),
        "ikjt": lambda b: transforms.apply_ikjt(reader.table_to_ikjt(b.rows, keys, groups,
                                                                   plain)),
        "ikjt (content hash)": lambda b: transforms.apply_ikjt(
            to_ikjt(reader.table_to_kjt(b.rows, keys), groups, plain=plain)),
        SESSION_PATH: from_sessions,
    }


def preprocess_timing(batches: list[Batch], meta: dict[str, Any], transforms: FeatureTransforms,
                      repeats: int) -> dict[str, Any]:
    """Preprocessing seconds of each path of [`preprocessors`][] over the same batches (from
    the decoded columnar rows to the transformed sparse batch), and the values transformed."""
    paths = preprocessors(meta, transforms)
    if any(b.session is None for b in batches):
        paths.pop(SESSION_PATH)
    runs = {name: (lambda fn=fn: [fn(b) for b in batches]) for name, fn in paths.items()}
    rounds = repeat_seconds(runs, repeats)
    keys, groups, plain = meta["keys"], meta["groups"], meta["plain"]
    return {"seconds": {name: min(t) for name, t in rounds.items()}, "rounds": rounds,
            "values_kjt": sum(transforms.values_processed_kjt(reader.table_to_kjt(b.rows, keys))
                              for b in batches),
            "values_ikjt": sum(transforms.values_processed_ikjt(
                reader.table_to_ikjt(b.rows, keys, groups, plain)) for b in batches)}


def build_model(meta: dict[str, Any], exp: RecdConfig, seed: int) -> RecDModel:
    """The RecD model of a dataset: pooled features, sequence features sharing their item
    table, groups = the dedup groups plus every plain key alone."""
    cards, sequences, groups, plain = (meta["cardinalities"], meta["sequences"], meta["groups"],
                                       meta["plain"])
    features = [FeatureSpec(key, int(cards[sequences.get(key, key)]),
                            "sequence" if key in sequences else "pooled",
                            table=sequences.get(key))
                for key in meta["keys"]]
    return RecDModel(len(meta["dense"]), features, [*groups, *([k] for k in plain)],
                     exp.embedding_dim, exp.bottom_mlp, exp.top_mlp,
                     seq_heads=exp.seq_heads, seq_max_length=exp.max_history, seed=seed,
                     sparse_gradients=SPARSE_GRADIENTS)


#: The training paths, per track: its KJT path and its IKJT path. ``workbench``: the
#: [`RecDModel`][workbench.models.recd.RecDModel] on the workbench's KJT / IKJT; ``torchrec``:
#: [`TorchRecDLRM`][workbench.models.torchrec_dlrm.TorchRecDLRM], TorchRec's own
#: EmbeddingBagCollection on TorchRec's KJT / variable-batch KJT (its dense table gradients), and
#: the same with row-indexed sparse table gradients; ``torchrec fused``:
#: [`FusedTBEDLRM`][workbench.models.torchrec_dlrm.FusedTBEDLRM], fbgemm's fused TBE (TorchRec's
#: fused kernel), the IKJT through its variable-batch call and padded to a fixed batch (one KJT
#: path for both). TorchRec's tracks run where TorchRec loads.
TRACKS = {"workbench": ("kjt", "ikjt"),
          "torchrec": ("torchrec kjt", "torchrec ikjt"),
          "torchrec, sparse table gradients": ("torchrec sparse kjt", "torchrec sparse ikjt"),
          "torchrec fused, variable batch": ("torchrec fused kjt", "torchrec fused vbe ikjt"),
          "torchrec fused, padded": ("torchrec fused kjt", "torchrec fused padded ikjt")}


def torchrec_model(meta: dict[str, Any], exp: RecdConfig, seed: int, path: str):
    """The RecD dataset's DLRM for one of TorchRec's paths of [`TRACKS`][]: TorchRec's
    EmbeddingBagCollection, or fbgemm's fused TBE (raises ``TorchRecUnavailable`` where TorchRec
    does not load)."""
    from workbench.models.torchrec_dlrm import FusedTBEDLRM, TorchRecDLRM

    shape = (len(meta["dense"]), meta["keys"], meta["cardinalities"], meta["sequences"],
             exp.embedding_dim, exp.bottom_mlp, exp.top_mlp, seed)
    if "fused" in path:
        return FusedTBEDLRM(*shape, lr=exp.lr,
                            ikjt_call="variable batch" if "vbe" in path else "padded")
    return TorchRecDLRM(*shape, sparse_gradients="sparse" in path)


def training_timing(batches: list[Batch], meta: dict[str, Any], transforms: FeatureTransforms,
                    exp: RecdConfig,
                    seed: int) -> tuple[dict[str, list[float]], pd.DataFrame, dict[str, Any]]:
    """Train the same model (same seed) on the KJT and on the IKJT of the same batches, on every
    track of [`TRACKS`][] (TorchRec's where it loads; else logged and left out).

    Returns:
        ``(seconds of every round per path, losses of every step per path, work counts per
        path and why TorchRec's tracks are missing, if they are)``; the timed part is forward
        + backward + optimizer step of every batch.
    """
    import torch

    from workbench.utils.torchrec import TorchRecUnavailable

    groups = meta["groups"]
    paths = preprocessors(meta, transforms)
    inputs: dict[str, list[tuple[Any, Any, Any]]] = {"kjt": [], "ikjt": []}
    for b in batches:
        dense = None if b.dense is None else torch.from_numpy(b.dense)
        labels = torch.from_numpy(b.labels)
        kjt, ikjt = paths["kjt"](b), paths["ikjt"](b)
        if b.session is not None and paths[SESSION_PATH](b).expand() != ikjt.expand():
            raise AssertionError("the session layout's IKJT of a batch differs from the "
                                 "reader's: the dedup stage wrote another batch")
        if ikjt.expand() != kjt:
            raise AssertionError("the IKJT of a batch does not expand to its KJT: the dedup "
                                 f"groups {groups} are not constant within a request")
        inputs["kjt"].append((dense, kjt, labels))
        inputs["ikjt"].append((dense, ikjt, labels))
    models: dict[str, Callable[[], Any]] = {"kjt": lambda: build_model(meta, exp, seed),
                                            "ikjt": lambda: build_model(meta, exp, seed)}
    missing = None
    try:
        from workbench.models.torchrec_dlrm import TorchRecDLRM
        from workbench.utils.torchrec import load_torchrec

        load_torchrec()  # or says why TorchRec does not load
        for kjt_path, ikjt_path in list(TRACKS.values())[1:]:
            for path, source in ((kjt_path, "kjt"), (ikjt_path, "ikjt")):
                inputs[path] = [(d, TorchRecDLRM.batch(s), y) for d, s, y in inputs[source]]
                models[path] = functools.partial(torchrec_model, meta, exp, seed, path)
    except TorchRecUnavailable as err:
        missing = str(err)
        log.warning("RecD on TorchRec's path left out: %s", missing)
    losses: dict[str, list[float]] = {}

    def run(path: str, steps: int | None = None) -> None:
        trainer = RecDTrainer(models[path](), exp.lr)
        losses[path] = [trainer.step(d, s, y) for d, s, y in inputs[path][:steps]]

    for path in inputs:  # warm-up: allocator, lazy module loading (not timed)
        run(path, steps=2)
    seconds = repeat_seconds({path: functools.partial(run, path) for path in inputs},
                             exp.repeats)
    model = build_model(meta, exp, seed)
    work: dict[str, Any] = {path: {key: int(sum(model.work(s)[key] for _, s, _ in inputs[path]))
                                   for key in ("rows", "values", "sequence_positions")}
                            for path in ("kjt", "ikjt")}
    if missing:
        work["torchrec_missing"] = missing
    frame = pd.DataFrame({"step": np.tile(np.arange(len(batches)), len(losses)),
                          "path": np.repeat(list(losses), len(batches)),
                          "loss": [x for path in losses for x in losses[path]]})
    return seconds, frame, work


def check_request_level(table: pa.Table, meta: dict[str, Any], exp: RecdConfig) -> None:
    """Stop when a dedup group differs between the rows of one request in the training rows.

    RecD's reader ([`table_to_ikjt`][workbench.sparse.reader.table_to_ikjt]) reads a group once per
    request, so the group must be request-level: a per-sample history
    (``experiments.recd.history=per_sample``) or a per-sample feature in a configured group is
    not.

    Raises:
        ConfigError: naming the features that vary and the settings that fix it.
    """
    from workbench.utils.validation import ConfigError

    rows = table.slice(0, exp.train_batch_size * exp.train_batches).combine_chunks()
    keys, groups, plain = meta["keys"], meta["groups"], meta["plain"]
    kjt = reader.table_to_kjt(rows, keys)
    expanded = reader.table_to_ikjt(rows, keys, groups, plain).expand()
    varying = [k for g in groups for k in g if expanded[k] != kjt[k]]
    if varying:
        raise ConfigError(
            f"experiments.recd.dedup_groups: {varying} differ between the samples of one request "
            f"in {meta['dataset']}'s partitions (history = {meta.get('history')}), and RecD's "
            "reader reads a dedup group once per request: rerun the dedup stage with "
            "experiments.recd.history=snapshot, or leave those features out of "
            "experiments.recd.dedup_groups")


def read_partitions_meta(partitions: Path, exp: RecdConfig,
                         processed: Path | None = None,
                         dedup_out: Path | None = None) -> dict[str, Any]:
    """The dedup stage's ``partitions.json``, or why it is not there.

    Args:
        partitions: ``data/partitions/<ds>``.
        exp: the RecD settings (names the datasets that have sessions).
        processed: ``data/processed/<ds>``; default the ``processed`` directory beside
            ``partitions``' parent (where the stages put it).
        dedup_out: ``results/dedup/<ds>``, the dedup stage's other folder: a commit of both
            that a killed dedup stage left half done is completed first (None: none is).

    Raises:
        NoSessionsError: the dataset has no session column (the dedup stage cannot partition
            it).
        MissingInputError: the dedup stage has not run on the dataset, or its partitions come
            from another preprocessing than the processed data's (prepared again since).
    """
    import json

    from workbench.data.schema import DatasetMeta
    from workbench.utils.errors import MissingInputError
    from workbench.utils.io import finish_commit

    if dedup_out is not None:  # a dedup stage killed between its two renames: complete it
        finish_commit(partitions, dedup_out)
    path = partitions / part.PARTITIONS_META
    processed = processed or partitions.parent.parent / "processed" / partitions.name
    if path.is_file():
        found = dict(json.loads(path.read_text()))
        if found.get("available", True) and (processed / "meta.json").is_file():
            now = DatasetMeta.read(processed)
            if (found.get("cardinalities"), found.get("sequences"), found.get("rows")) != (
                    now.cardinalities, now.sequences, now.rows.get("train")):
                raise MissingInputError(
                    f"{partitions} was partitioned from another preprocessing of "
                    f"{partitions.name} than {processed}'s (their rows, features or "
                    "cardinalities differ: the data was prepared again since): rerun the dedup "
                    "stage for "
                    f"{partitions.name} (python -m workbench.stages dedup, with the same "
                    "dataset options)")
        return found
    if (processed / "meta.json").is_file():
        part.require_sessions(DatasetMeta.read(processed), exp.datasets)
    raise MissingInputError(f"{path} not found: run the dedup stage for {partitions.name} first "
                            "(python -m workbench.stages dedup, with the same dataset options)")


def warn_empty_partitions(meta: dict[str, Any]) -> None:
    """Warn when a dedup group is empty in most rows: the IKJT path then deduplicates nothing
    (the numbers come from the dedup stage, ``empty_group_rows`` of ``partitions.json``)."""
    for group, n in meta.get("empty_group_rows", {}).items():
        if n > part.EMPTY_WARN_FRACTION * meta["rows"]:
            log.warning("%s: dedup group %s is empty in %d of %d rows (%.0f%%): the IKJT path "
                        "deduplicates nothing there, so its speed against the KJT path measures "
                        "the other features and the reader, not RecD's saving", meta["dataset"],
                        group, n, meta["rows"], 100 * n / max(meta["rows"], 1))


def run(partitions: Path, out: Path, exp: RecdConfig, seed: int,
        progress: bool = False, processed: Path | None = None) -> None:
    """The ``recd`` stage for one dataset: preprocessing and training throughput per layout.

    Args:
        partitions: ``data/partitions/<ds>`` written by the dedup stage.
        out: ``results/recd/<ds>`` (replaced whole).
        exp: the RecD settings.
        seed: seeds the model.
        progress: show progress bars.
        processed: ``data/processed/<ds>`` (default: beside ``partitions``), read only to say
            why the partitions are missing.

    Raises:
        NoSessionsError: the dataset has no session column.
        MissingInputError: the dedup stage has not run.
    """
    import torch
    from tqdm.auto import tqdm

    from workbench.utils.io import atomic_dir, write_json

    meta = read_partitions_meta(partitions, exp, processed,
                                dedup_out=out.parent.parent / "dedup" / partitions.name)
    with atomic_dir(out) as tmp:
        if not meta.get("available", False):
            write_json(tmp / "summary.json", {"dataset": partitions.name, "available": False,
                                              "reason": "the dataset is unavailable"})
            return
        require_samples(meta["rows"], exp.train_batch_size, meta["dataset"],
                        f"one batch of experiments.recd.train_batch_size = "
                        f"{exp.train_batch_size}",
                        f"set experiments.recd.train_batch_size={meta['rows']} or less")
        warn_empty_partitions(meta)
        torch.set_num_threads(1)
        groups, plain = meta["groups"], meta["plain"]
        transforms = auto_transforms(meta, exp)
        rounds: list[dict[str, Any]] = []
        timing, losses, summary = [], [], {"dataset": meta["dataset"], "available": True,
                                           "groups": groups, "plain": plain, "layouts": {}}
        for layout in tqdm(part.LAYOUTS, desc="recd", disable=not progress):
            table = part.read_partitions(partitions / layout)
            check_request_level(table, meta, exp)
            values: dict[str, dict[str, int]] = {}
            sessions = (partitions / part.SESSION_LAYOUT
                        if layout == "clustered" and (partitions / part.SESSION_LAYOUT).is_dir()
                        else None)
            usable = min(exp.preprocess_rows, table.num_rows)
            require_samples(usable, min(exp.preprocess_batch_sizes), meta["dataset"],
                            "one batch of the smallest of experiments.recd."
                            f"preprocess_batch_sizes = {list(exp.preprocess_batch_sizes)}",
                            f"set experiments.recd.preprocess_batch_sizes=[{usable}] or "
                            "smaller sizes (experiments.recd.preprocess_rows = "
                            f"{exp.preprocess_rows} caps the rows read)")
            for size in exp.preprocess_batch_sizes:
                count = usable // size
                if count < 1:
                    log.warning("preprocess batch size %d skipped: more than the %d rows read "
                                "of %s's %d (experiments.recd.preprocess_rows = %d); the "
                                "notebook shows the sizes that fit", size, usable,
                                meta["dataset"], table.num_rows, exp.preprocess_rows)
                    continue
                pre = preprocess_timing(read_batches(table, meta, size, count, sessions), meta,
                                        transforms, exp.repeats)
                values[str(size)] = {"kjt": pre["values_kjt"], "ikjt": pre["values_ikjt"]}
                for path, secs in pre["rounds"].items():
                    timing.append({"layout": layout, "phase": "preprocess", "path": path,
                                   "batch_size": size, "samples": count * size,
                                   "seconds": min(secs)})
                    rounds += [{"layout": layout, "phase": "preprocess", "path": path,
                                "batch_size": size, "samples": count * size, "round": i,
                                "seconds": t} for i, t in enumerate(secs)]
            ready = read_batches(table, meta, exp.train_batch_size, exp.train_batches,
                                 sessions)
            seconds, loss_frame, work = training_timing(ready, meta, transforms, exp, seed)
            for path, secs in seconds.items():
                timing.append({"layout": layout, "phase": "train", "path": path,
                               "batch_size": exp.train_batch_size,
                               "samples": len(ready) * exp.train_batch_size,
                               "seconds": min(secs)})
                rounds += [{"layout": layout, "phase": "train", "path": path,
                            "batch_size": exp.train_batch_size,
                            "samples": len(ready) * exp.train_batch_size, "round": i,
                            "seconds": t} for i, t in enumerate(secs)]
            losses.append(loss_frame.assign(layout=layout))
            summary["layouts"][layout] = {
                "preprocess_values": values, "train_work": work, "train_batches": len(ready),
                "final_loss": {p: float(loss_frame[loss_frame.path == p].loss.iloc[-1])
                               for p in ("kjt", "ikjt")}}
        frame = pd.DataFrame.from_records(timing)
        frame["samples_per_s"] = frame["samples"] / frame["seconds"]
        frame.to_csv(tmp / "timing.csv", index=False, float_format="%.6g")
        every = pd.DataFrame.from_records(rounds)
        every["samples_per_s"] = every["samples"] / every["seconds"]
        every.to_csv(tmp / "timing_rounds.csv", index=False, float_format="%.6g")
        pd.concat(losses).to_csv(tmp / "training.csv", index=False, float_format="%.8g")
        measured = set(frame.loc[frame["phase"] == "train", "path"])
        summary["tracks"] = {track: list(pair) for track, pair in TRACKS.items()
                             if set(pair) <= measured}
        summary["settings"] = {"batch_size": exp.train_batch_size, "repeats": exp.repeats,
                               "embedding_dim": exp.embedding_dim,
                               "max_history": exp.max_history, "torch_threads": 1,
                               "table_gradients": "sparse" if SPARSE_GRADIENTS else "dense"}
        write_json(tmp / "summary.json", summary)
        for (layout, phase, size), sel in frame.groupby(["layout", "phase", "batch_size"]):
            rate = sel.set_index("path")["samples_per_s"]
            log.info("%s %s %s (batch %d): IKJT/KJT %.2fx", meta["dataset"], layout, phase, size,
                     rate["ikjt"] / rate["kjt"])
