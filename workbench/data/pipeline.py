"""The data stages of the pipeline: acquire raw files, then preprocess them into the schema.

::

    download@<ds>:   synthetic -> generate          data/raw/<ds>/synthetic.parquet
                     url       -> fetch + verify    data/downloads/<source>/<files, members>
                     local     -> check + checksum  (files stay where they are)
                     every source                   data/raw/<ds>/manifest.json
    preprocess@<ds>: manifest -> parse -> encode    data/processed/<ds>/{train,test}.parquet,
                                                    meta.json, status.json

``manifest.json`` lists every raw file (relative to its ``root``) with its size and sha256, so a
changed input changes the stage's output and DVC reruns what depends on it. Downloads live in
``data/downloads/<source>/``, outside every DVC output: DVC deletes a stage's outputs before
rerunning it, and a multi-GB archive, or a file a user placed there by hand, must survive that.
An ``optional`` local source whose files are absent (the real samples in ``../shared/data``) is
recorded with ``available: false`` and a reason; the later stages carry that through and the
report says where to put the files.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench.data.config import DatasetConfig
from workbench.data.schema import META_FILE, DatasetMeta, ParseReport
from workbench.utils.errors import MissingInputError, UserError
from workbench.utils.io import atomic_dir, write_json, write_text
from workbench.utils.paths import check_name, inside, repo_relative, resolve

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
STATUS = "status.json"
SYNTHETIC_FILE = "synthetic.parquet"
#: Formats whose parser takes the directory holding the dataset's files, with the files it reads.
DIRECTORY_FORMATS: dict[str, list[str]] = {
    "movielens_100k": ["u.data", "u.user", "u.item"],
    "movielens_1m": ["ratings.dat", "users.dat", "movies.dat"],
    "movielens_20m": ["ratings.csv", "movies.csv"],
    "movielens_csv": ["ratings.csv", "movies.csv"],
}


class DatasetUnavailable(UserError, RuntimeError):
    """A dataset's raw files are absent (and the dataset is not optional)."""


def raw_dir(data_root: Path, name: str) -> Path:
    """``<data>/raw/<dataset>`` (``name`` a plain name, the path inside ``<data>/raw``)."""
    return inside(data_root / "raw", check_name("dataset.name", name), key="dataset.name")


def downloads_dir(data_root: Path, source_name: str) -> Path:
    """``<data>/downloads/<source>``: where registry files are fetched or placed by hand."""
    return data_root / "downloads" / source_name


def processed_dir(data_root: Path, name: str) -> Path:
    """``<data>/processed/<dataset>`` (``name`` a plain name, the path inside
    ``<data>/processed``)."""
    return inside(data_root / "processed", check_name("dataset.name", name), key="dataset.name")


def is_preprocessed(data_root: Path, name: str) -> bool:
    """Whether dataset ``name`` has been preprocessed under ``data_root`` (its train split is
    there)."""
    return (processed_dir(data_root, name) / "train.parquet").is_file()


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """The sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _file_entries(paths: list[Path], base: Path) -> list[dict[str, Any]]:
    entries = []
    for p in paths:
        try:
            shown = str(p.relative_to(base))
        except ValueError:
            shown = p.name
        entries.append({"file": shown, "bytes": p.stat().st_size, "sha256": sha256_file(p)})
    return entries


def _local_paths(ds: DatasetConfig) -> tuple[Path, list[Path]]:
    if not ds.path:
        raise DatasetUnavailable(f"datasets.{ds.name}.path is not set: a local source needs the "
                                 "directory holding its files")
    root = resolve(ds.path)
    if ds.format in DIRECTORY_FORMATS:
        names = list(ds.files) or DIRECTORY_FORMATS[ds.format]
    else:
        names = list(ds.files) or [p.name for p in sorted(root.glob("*")) if p.is_file()]
    paths = [inside(root, n, key=f"datasets.{ds.name}.files") for n in names]
    missing = [str(p) for p in paths if not p.is_file()]
    if not root.is_dir() or missing or not paths:
        raise DatasetUnavailable(
            f"dataset {ds.name}: expected files {missing or names} under {root.resolve()}; "
            f"put them there (or set datasets.{ds.name}.path / files)")
    return root, paths


def download(ds: DatasetConfig, data_root: Path, *, seed: int, progress: bool = False,
             offline: bool = False) -> Path:
    """Acquire the raw files of ``ds`` and write ``<data>/raw/<ds>/manifest.json``.

    Args:
        ds: the dataset.
        data_root: the data directory (``paths.data``).
        seed: seeds the synthetic generator.
        progress: show download progress bars.
        offline: never use the network (files already in place only).

    Returns:
        The raw directory.

    Raises:
        DatasetUnavailable: a non-optional local source is missing its files.
        workbench.data.download.DownloadError: a download failed (the message says which URL
            and where to place the file by hand).
    """
    out = raw_dir(data_root, ds.name)
    manifest: dict[str, Any] = {"dataset": ds.name, "source": ds.source, "format": ds.format}
    if ds.source == "synthetic":
        from workbench.data.preprocess import write_split
        from workbench.data.synthetic import CATEGORICAL_NAMES, DENSE_NAMES, SyntheticGenerator

        if ds.synthetic is None:
            raise DatasetUnavailable(f"datasets.{ds.name}.synthetic is missing: a synthetic "
                                     "source needs its generator settings")
        generator = SyntheticGenerator(ds.synthetic, seed)
        with atomic_dir(out) as tmp:
            # One chunk in memory at a time, each written as whole row groups of chunk_rows.
            write_split(generator.chunks(ds.synthetic.chunk_rows), tmp / SYNTHETIC_FILE,
                        ds.synthetic.chunk_rows, progress=progress)
            manifest.update(available=True, root=None,
                            files=_file_entries([tmp / SYNTHETIC_FILE], tmp),
                            dense=list(DENSE_NAMES), categorical=list(CATEGORICAL_NAMES),
                            cardinalities=generator.cards, user_side=generator.user_side,
                            sequences=generator.sequences,
                            has_session=ds.synthetic.sessions.enabled)
            write_json(tmp / MANIFEST, manifest)
        return out
    if ds.source == "local":
        try:
            root, paths = _local_paths(ds)
            manifest.update(available=True, root=repo_relative(root),
                            files=_file_entries(paths, root))
        except DatasetUnavailable as err:
            if not ds.optional:
                raise
            log.warning("%s", err)
            manifest.update(available=False, reason=str(err), root=ds.path)
        with atomic_dir(out) as tmp:
            write_json(tmp / MANIFEST, manifest)
        return out
    # A registry download. Files already in data/downloads/<source> that verify are used as is.
    from workbench.data.download import acquire
    from workbench.data.registry import criteo_1tb_files, get_source

    source = get_source(ds.registry or ds.name)
    files = criteo_1tb_files(list(ds.days)) if ds.days else None
    root = downloads_dir(data_root, source.name)
    try:
        paths = acquire(source, root, files=files, progress=progress, offline=offline,
                        timeout=ds.download_timeout_s,
                        min_rate=ds.download_min_rate_kbps * 1000)
    finally:
        if root.is_dir() and not any(root.iterdir()):
            root.rmdir()  # a failed first attempt leaves nothing behind
    manifest.update(available=True, registry=source.name, root=repo_relative(root),
                    files=_file_entries([Path(p) for p in paths], root))
    with atomic_dir(out) as tmp:
        write_json(tmp / MANIFEST, manifest)
    return out


def read_manifest(ds: DatasetConfig, data_root: Path) -> dict[str, Any]:
    """The manifest written by :func:`download` (error if the download stage has not run)."""
    import json

    path = raw_dir(data_root, ds.name) / MANIFEST
    if not path.exists():
        raise MissingInputError(f"{path} not found: run the download stage for {ds.name} first "
                                f"(python -m workbench.stages download dataset={ds.name})")
    return json.loads(path.read_text())


def unavailable_result(processed: Path, out_file: Path) -> bool:
    """For an experiment stage: if ``processed`` is an unavailable dataset, write ``out_file``
    saying so (with the reason) and return True; otherwise return False."""
    import json

    if not (processed / STATUS).exists():
        raise MissingInputError(f"{processed / STATUS} not found: run the preprocess stage for "
                                f"{processed.name} first (python -m workbench.stages prepare "
                                f"--dataset {processed.name})")
    status = json.loads((processed / STATUS).read_text())
    if status["available"]:
        return False
    write_json(out_file, {"dataset": processed.name, "available": False,
                          "reason": status["reason"]})
    return True


def preprocess(ds: DatasetConfig, data_root: Path, *, seed: int, progress: bool = False
               ) -> Path:
    """Parse and encode the raw files of ``ds`` into ``<data>/processed/<ds>``.

    The streaming engine (:mod:`workbench.data.streaming`, out of core, memory bounded by
    ``dataset.memory_limit_mb``) runs the synthetic source and every format with one sample per
    line; the in-memory engine (:func:`workbench.data.preprocess.encode`) runs the rest
    (MovieLens' directories) or any format with ``dataset.engine=memory``. Both write the same
    bytes.

    Args:
        ds: the dataset.
        data_root: the data directory (``paths.data``).
        seed: recorded in the provenance (the run's seed).
        progress: show a counter of parsed rows (streaming engine).

    Returns:
        The processed directory (holding ``status.json``, and when available the splits and
        ``meta.json``).

    Raises:
        ValueError: ``dataset.engine=streaming`` with a format it cannot stream.
    """
    from workbench.data.formats import ROW_FORMATS, SESSION_LOG_FORMATS

    manifest = read_manifest(ds, data_root)
    out = processed_dir(data_root, ds.name)
    streams = ds.source == "synthetic" or ds.format in ROW_FORMATS or \
        ds.format in SESSION_LOG_FORMATS
    if ds.engine == "streaming" and not streams:
        raise ValueError(f"datasets.{ds.name}.engine = streaming: format {ds.format!r} needs the "
                         "whole table (its files are joined); use engine: memory or auto")
    engine = "memory" if ds.engine == "memory" or not streams else "streaming"
    with atomic_dir(out) as tmp:
        if not manifest.get("available", False):
            write_json(tmp / STATUS, {"available": False, "reason": manifest.get("reason", "")})
            return out
        if engine == "streaming":
            meta, report = _preprocess_streaming(ds, data_root, manifest, tmp, progress)
        else:
            meta, report = _preprocess_in_memory(ds, data_root, manifest, tmp)
        meta.provenance.update({
            "raw_files": manifest["files"], "format": ds.format,
            "parse": {"rows": report.rows, "malformed": report.malformed,
                      "examples": report.examples},
            "min_count": ds.min_count, "test_fraction": ds.test_fraction, "seed": seed})
        write_text(tmp / META_FILE, meta.to_json())
        write_json(tmp / STATUS, {"available": True, "reason": "",
                                  "malformed_rows": report.malformed})
    log.info("%s: preprocessed with the %s engine", ds.name, engine)
    return out


def _raw_target(ds: DatasetConfig, manifest: dict[str, Any]) -> Path | list[Path]:
    """What a parser reads: the files, or the directory of a directory format."""
    root = resolve(manifest["root"])
    files = [root / f["file"] for f in manifest["files"]]
    # A directory format reads its files by name, or the user's files in role order.
    by_name = ds.format in DIRECTORY_FORMATS and not (ds.source == "local" and ds.files)
    return files[0].parent if by_name else files


def _preprocess_in_memory(ds: DatasetConfig, data_root: Path, manifest: dict[str, Any],
                          tmp: Path) -> tuple[DatasetMeta, ParseReport]:
    from workbench.data.preprocess import encode, write_processed

    if ds.source == "synthetic":
        import pyarrow.parquet as pq

        from workbench.data.schema import RawTable

        frame = pq.read_table(raw_dir(data_root, ds.name) / SYNTHETIC_FILE).to_pandas()
        raw = RawTable(frame=frame, dense=manifest["dense"], categorical=manifest["categorical"],
                       user_side=manifest.get("user_side", []),
                       sequences=manifest.get("sequences", {}),
                       has_session=manifest.get("has_session", False),
                       report=ParseReport(files=[SYNTHETIC_FILE], rows=len(frame)))
        encoded = encode(raw, test_fraction=ds.test_fraction,
                         cardinalities=manifest["cardinalities"])
    else:
        from workbench.data.formats import parse

        kwargs: dict[str, Any] = {"strict": ds.strict, "max_rows": ds.max_rows,
                                  "max_malformed_fraction": ds.max_malformed_fraction}
        if ds.history_length:
            kwargs["history_length"] = _checked_history(ds)
        raw = parse(ds.format, _raw_target(ds, manifest), **kwargs)
        encoded = encode(raw, test_fraction=ds.test_fraction, min_count=ds.min_count)
    write_processed(tmp, encoded, ds.row_group_rows)
    meta = DatasetMeta(
        name=ds.name, source=ds.source,
        rows={"train": len(encoded.train), "test": len(encoded.test)},
        dense=list(raw.dense), categorical=list(raw.categorical),
        cardinalities=encoded.cardinalities, user_side=list(raw.user_side),
        sequences=dict(raw.sequences), has_session=raw.has_session,
        has_timestamp=raw.has_timestamp, provenance={"split": encoded.split})
    return meta, raw.report


def _checked_history(ds: DatasetConfig) -> int:
    """``ds.history_length`` where the format builds a history, else 0 (ignored)."""
    from workbench.data.formats import ROW_FORMATS, SESSION_LOG_FORMATS

    fmt = ROW_FORMATS.get(ds.format)
    builds = ds.format in DIRECTORY_FORMATS or ds.format in SESSION_LOG_FORMATS or (
        fmt is not None and fmt.history_item is not None)
    return ds.history_length if builds else 0


def _preprocess_streaming(ds: DatasetConfig, data_root: Path, manifest: dict[str, Any],
                          tmp: Path, progress: bool) -> tuple[DatasetMeta, ParseReport]:
    from workbench.data.streaming import TableLayout, encode_streaming

    options: dict[str, Any] = dict(
        test_fraction=ds.test_fraction, memory_limit_mb=ds.memory_limit_mb,
        row_group_rows=ds.row_group_rows, work_dir=data_root / "processed", progress=progress)
    if ds.source == "synthetic":
        import pyarrow.parquet as pq

        sequences = manifest.get("sequences", {})
        layout = TableLayout(dense=tuple(manifest["dense"]),
                             categorical=tuple(manifest["categorical"]),
                             has_session=manifest.get("has_session", False), sequences=sequences)
        raw_file = pq.ParquetFile(raw_dir(data_root, ds.name) / SYNTHETIC_FILE)
        report = ParseReport(files=[SYNTHETIC_FILE], rows=raw_file.metadata.num_rows)
        result = encode_streaming(raw_file.iter_batches(batch_size=65536), layout, tmp,
                                  cardinalities=manifest["cardinalities"], **options)
        user_side = manifest.get("user_side", [])
    else:
        from workbench.data.formats import HIST_ITEM, check_report, row_format_for

        report = ParseReport()
        fmt, paths = row_format_for(ds.format, _raw_target(ds, manifest), strict=ds.strict,
                                    report=report)
        history = _checked_history(ds)

        def checked() -> Iterator[dict[str, Any]]:
            for block in fmt.batches(paths, report, strict=ds.strict, max_rows=ds.max_rows):
                report.rows += len(next(iter(block.values())))
                yield block
            check_report(ds.format, report, paths, strict=ds.strict,
                         max_malformed_fraction=ds.max_malformed_fraction)

        sequences = {HIST_ITEM: fmt.history_item} if history and fmt.history_item else {}
        layout = TableLayout(dense=fmt.dense, categorical=fmt.categorical,
                             has_session=fmt.has_session, has_timestamp=fmt.has_timestamp,
                             order_by=fmt.order_by,
                             history=((HIST_ITEM, fmt.history_item)
                                      if sequences and fmt.history_item else None))
        result = encode_streaming(checked(), layout, tmp, min_count=ds.min_count,
                                  history_length=history, **options)
        user_side = list(fmt.user_side)
    meta = DatasetMeta(
        name=ds.name, source=ds.source, rows=result.rows, dense=list(layout.dense),
        categorical=list(layout.categorical), cardinalities=result.cardinalities,
        user_side=list(user_side), sequences=sequences, has_session=layout.has_session,
        has_timestamp=layout.has_timestamp, provenance={"split": result.split})
    return meta, report
