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
rerunning it, and a multi-GB archive, or a file a user placed there by hand, must survive that. An ``optional`` local source whose files are
absent (the real samples in ``../shared/data``) is recorded with ``available: false`` and a reason;
the later stages carry that through and the report says where to put the files.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

from workbench.data.config import DatasetConfig
from workbench.data.schema import DatasetMeta
from workbench.utils.io import atomic_dir, write_json
from workbench.utils.paths import repo_relative, resolve

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
STATUS = "status.json"
SYNTHETIC_FILE = "synthetic.parquet"
#: Formats whose parser takes the directory holding the dataset's files, with the files it reads.
DIRECTORY_FORMATS: dict[str, list[str]] = {
    "movielens_100k": ["u.data", "u.user", "u.item"],
    "movielens_1m": ["ratings.dat", "users.dat", "movies.dat"],
    "movielens_20m": ["ratings.csv", "movies.csv"],
}


class DatasetUnavailable(RuntimeError):
    """A dataset's raw files are absent (and the dataset is not optional)."""


def raw_dir(data_root: Path, name: str) -> Path:
    """``<data>/raw/<dataset>``."""
    return data_root / "raw" / name


def downloads_dir(data_root: Path, source_name: str) -> Path:
    """``<data>/downloads/<source>``: where registry files are fetched or placed by hand."""
    return data_root / "downloads" / source_name


def processed_dir(data_root: Path, name: str) -> Path:
    """``<data>/processed/<dataset>``."""
    return data_root / "processed" / name


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
    paths = [root / n for n in names]
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
        from workbench.data.synthetic import generate

        if ds.synthetic is None:
            raise DatasetUnavailable(f"datasets.{ds.name}.synthetic is missing: a synthetic "
                                     "source needs its generator settings")
        table, cards = generate(ds.synthetic, seed)
        with atomic_dir(out) as tmp:
            write_split(table.frame, tmp / SYNTHETIC_FILE)
            manifest.update(available=True, root=None,
                            files=_file_entries([tmp / SYNTHETIC_FILE], tmp),
                            dense=table.dense, categorical=table.categorical,
                            cardinalities=cards, user_side=table.user_side,
                            sequences=table.sequences, has_session=table.has_session)
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
        raise FileNotFoundError(f"{path} not found: run the download stage for {ds.name} first "
                                f"(python -m workbench.stages download dataset={ds.name})")
    return json.loads(path.read_text())


def unavailable_result(processed: Path, out_file: Path) -> bool:
    """For an experiment stage: if ``processed`` is an unavailable dataset, write ``out_file``
    saying so (with the reason) and return True; otherwise return False."""
    import json

    if not (processed / STATUS).exists():
        raise FileNotFoundError(f"{processed / STATUS} not found: run the preprocess stage for "
                                f"{processed.name} first (python -m workbench.stages prepare "
                                f"--dataset {processed.name})")
    status = json.loads((processed / STATUS).read_text())
    if status["available"]:
        return False
    write_json(out_file, {"dataset": processed.name, "available": False,
                          "reason": status["reason"]})
    return True


def preprocess(ds: DatasetConfig, data_root: Path, *, seed: int) -> Path:
    """Parse and encode the raw files of ``ds`` into ``<data>/processed/<ds>``.

    Args:
        ds: the dataset.
        data_root: the data directory (``paths.data``).
        seed: recorded in the provenance (the run's seed).

    Returns:
        The processed directory (holding ``status.json``, and when available the splits and
        ``meta.json``).
    """
    from workbench.data.preprocess import encode, write_processed

    manifest = read_manifest(ds, data_root)
    out = processed_dir(data_root, ds.name)
    with atomic_dir(out) as tmp:
        if not manifest.get("available", False):
            write_json(tmp / STATUS, {"available": False, "reason": manifest.get("reason", "")})
            return out
        base = raw_dir(data_root, ds.name)
        if ds.source == "synthetic":
            import pyarrow.parquet as pq

            from workbench.data.schema import ParseReport, RawTable

            frame = pq.read_table(base / SYNTHETIC_FILE).to_pandas()
            cards = manifest["cardinalities"]
            sequences = manifest.get("sequences", {})
            raw = RawTable(frame=frame, dense=manifest["dense"],
                           categorical=manifest["categorical"],
                           user_side=manifest.get("user_side", []), sequences=sequences,
                           has_session=manifest.get("has_session", False),
                           report=ParseReport(files=[SYNTHETIC_FILE], rows=len(frame)))
            encoded = encode(raw, test_fraction=ds.test_fraction, cardinalities=cards)
        else:
            from workbench.data.parsers import parse

            root = resolve(manifest["root"])
            files = [root / f["file"] for f in manifest["files"]]
            # A directory format reads its files by name, or the user's files in role order.
            by_name = ds.format in DIRECTORY_FORMATS and not (ds.source == "local" and ds.files)
            target: Path | list[Path] = files[0].parent if by_name else files
            kwargs: dict[str, Any] = {"strict": ds.strict, "max_rows": ds.max_rows,
                                      "max_malformed_fraction": ds.max_malformed_fraction}
            if ds.history_length and ds.format in (*DIRECTORY_FORMATS, "taobao_user_behavior"):
                kwargs["history_length"] = ds.history_length
            raw = parse(ds.format, target, **kwargs)
            encoded = encode(raw, test_fraction=ds.test_fraction, min_count=ds.min_count)
        meta = DatasetMeta(
            name=ds.name, source=ds.source,
            rows={"train": len(encoded.train), "test": len(encoded.test)},
            dense=list(raw.dense), categorical=list(raw.categorical),
            cardinalities=encoded.cardinalities, user_side=list(raw.user_side),
            sequences=dict(raw.sequences), has_session=raw.has_session,
            has_timestamp=raw.has_timestamp,
            provenance={"raw_files": manifest["files"], "format": ds.format,
                        "parse": {"rows": raw.report.rows, "malformed": raw.report.malformed,
                                  "examples": raw.report.examples},
                        "min_count": ds.min_count, "test_fraction": ds.test_fraction,
                        "split": encoded.split,
                        "seed": seed})
        write_processed(tmp, encoded, meta)
        write_json(tmp / STATUS, {"available": True, "reason": "",
                                  "malformed_rows": raw.report.malformed})
    return out
