"""The data stages of the pipeline: acquire raw files, then preprocess them into the schema.


    download@<ds>:   synthetic -> generate          data/raw/<ds>/synthetic.parquet
                     url       -> mirror | fetch    data/downloads/<source>/<files, members>
                                  + verify
                     local     -> check + checksum  (files stay where they are)
                     every source                   data/raw/<ds>/manifest.json
    preprocess@<ds>: manifest -> parse -> encode    data/processed/<ds>/{train,test}.parquet,
                                                    meta.json, status.json

``manifest.json`` lists every raw file (relative to its ``root``) with its size and sha256, so a
changed input changes the stage's output and DVC reruns what depends on it. Downloads live in
``data/downloads/<source>/``, outside every DVC output: DVC deletes a stage's outputs before
rerunning it, and a multi-GB archive, or a file a user placed there by hand, must survive that.
A ``url`` source (the real samples included) that cannot be had fails its stage: nothing
downstream of it runs, so nothing committed is rewritten. Only an ``optional`` local source (a
user's own files) whose files are absent is recorded with ``available: false`` and a reason; the
later stages carry that through and the report says where to put the files.

``preprocess`` refuses a train split of one label class (AUC, which every experiment reports, is
undefined on it; the session logs without purchases are key-only on purpose), and says a full
disk or a too small ``dataset.memory_limit_mb`` in one line; nothing half-written is left.
Advice that names a command ([`stage_command`][]) names one that works as printed: the
dataset's own options (``dataset=local dataset.path=...``) and ``paths.data`` where they are not
the defaults.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from workbench.data.config import DatasetConfig
from workbench.data.schema import META_FILE, DatasetMeta, ParseReport
from workbench.utils.errors import MissingInputError, UserError
from workbench.utils.io import atomic_dir, disk_full_reported, write_json, write_text
from workbench.utils.paths import CONF_DIR, check_name, inside, repo_relative, resolve
from workbench.utils.validation import ConfigError

log = logging.getLogger(__name__)
T = TypeVar("T")

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


class SingleClassError(UserError, ValueError):
    """The train split holds one label class: AUC, the metric every experiment reports, is
    undefined, so the dataset is refused before any stage trains on it."""


def raw_dir(data_root: Path, name: str) -> Path:
    """``<data>/raw/<dataset>`` (``name`` a plain name, the path inside ``<data>/raw``)."""
    return inside(data_root / "raw", check_name("dataset.name", name), key="dataset.name",
                  guard=data_root)


def downloads_dir(data_root: Path, source_name: str) -> Path:
    """``<data>/downloads/<source>``: where registry files are fetched or placed by hand (a link
    at ``<data>/downloads`` or at the source's folder out of ``<data>`` is refused)."""
    return inside(data_root / "downloads", source_name, key="dataset.registry", guard=data_root)


def processed_dir(data_root: Path, name: str) -> Path:
    """``<data>/processed/<dataset>`` (``name`` a plain name, the path inside
    ``<data>/processed``)."""
    return inside(data_root / "processed", check_name("dataset.name", name),
                  key="dataset.name", guard=data_root)


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
    if root.is_file():
        raise DatasetUnavailable(
            f"dataset.path = {ds.path!r} is a file: give the directory holding it, "
            f"dataset.path={shlex.quote(str(root.parent))} dataset.files=[{root.name}]")
    if ds.format in DIRECTORY_FORMATS:
        names = list(ds.files) or DIRECTORY_FORMATS[ds.format]
    else:
        names = list(ds.files) or [p.name for p in sorted(root.glob("*")) if p.is_file()]
    paths = [inside(root, n, key=f"datasets.{ds.name}.files") for n in names]
    missing = [str(p) for p in paths if not p.is_file()]
    if not root.is_dir() or missing or not paths:
        raise DatasetUnavailable(
            f"dataset {ds.name}: expected files {missing or names} under {root.resolve()}; "
            "put them there (or set dataset.path / dataset.files)")
    if not ds.files and ds.format not in DIRECTORY_FORMATS and len(paths) > 1:
        shown = ", ".join(p.name for p in paths[:4]) + (", ..." if len(paths) > 4 else "")
        log.warning("dataset %s: reading the %d files of %s as one dataset (%s), in name order; "
                    "to read some of them set dataset.files=[...]", ds.name, len(paths), root,
                    shown)
    return root, paths


def _portable_root(configured: str, root: Path) -> str:
    """The root a manifest records: as configured when relative (``../shared/data/avazu``).

    A relative ``dataset.path`` is resolved against the project root, so it names the same files
    from any clone; recording it unresolved keeps ``manifest.json`` (a DVC output) and
    ``dvc.lock`` identical wherever the project and ``shared/`` sit, links included. An absolute
    path (one's own data) is recorded as is, made relative when it lies inside the project.
    """
    if not Path(configured).is_absolute():
        return Path(configured).as_posix()
    return repo_relative(root)


def download(ds: DatasetConfig, data_root: Path, *, seed: int, progress: bool = False,
             offline: bool = False, mirrors: Sequence[Path] = ()) -> Path:
    """Acquire the raw files of ``ds`` and write ``<data>/raw/<ds>/manifest.json``.

    Args:
        ds: the dataset.
        data_root: the data directory (``paths.data``).
        seed: seeds the synthetic generator.
        progress: show download progress bars.
        offline: never use the network (files already in place or in a mirror only).
        mirrors: folders holding already-downloaded files, tried before any URL
            ([`workbench.data.download.mirror_folders`][]).

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
        with disk_full_reported(out, "paths.data"), atomic_dir(out) as tmp:
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
            manifest.update(available=True, root=_portable_root(str(ds.path), root),
                            files=_file_entries(paths, root))
        except DatasetUnavailable as err:
            if not ds.optional:
                raise
            log.warning("%s", err)
            manifest.update(available=False, reason=str(err), root=ds.path)
        with disk_full_reported(out, "paths.data"), atomic_dir(out) as tmp:
            write_json(tmp / MANIFEST, manifest)
        return out
    # A registry download. Files already in data/downloads/<source> that verify are used as is.
    from workbench.data.download import acquire
    from workbench.data.registry import criteo_1tb_files, get_source

    source = get_source(ds.registry or ds.name)
    files = criteo_1tb_files(list(ds.days)) if ds.days else None
    root = downloads_dir(data_root, source.name)
    try:
        with disk_full_reported(root, "paths.data"):
            paths = acquire(source, root, files=files, progress=progress, offline=offline,
                            timeout=ds.download_timeout_s,
                            min_rate=ds.download_min_rate_kbps * 1000, mirrors=mirrors)
    finally:
        if root.is_dir() and not any(root.iterdir()):
            root.rmdir()  # a failed first attempt leaves nothing behind
    manifest.update(available=True, registry=source.name, root=repo_relative(root),
                    files=_file_entries([Path(p) for p in paths], root))
    with disk_full_reported(out, "paths.data"), atomic_dir(out) as tmp:
        write_json(tmp / MANIFEST, manifest)
    return out


def read_manifest(ds: DatasetConfig, data_root: Path) -> dict[str, Any]:
    """The manifest written by [`download`][] (error if the download stage has not run)."""
    import json

    path = raw_dir(data_root, ds.name) / MANIFEST
    if not path.exists():
        raise MissingInputError(f"{path} not found: run the download stage for {ds.name} first "
                                f"({stage_command('download', ds.name, data_root, _facts(ds))})")
    return json.loads(path.read_text())


# ------------------------------------------------------------ advice: commands that work as printed


def _group_source(name: str) -> str | None:
    """The ``source`` of ``workbench/conf/dataset/<name>.yaml`` (None: no such option)."""
    option = CONF_DIR / "dataset" / f"{name}.yaml"
    if not option.is_file():
        return None
    found = re.search(r"^source:\s*(\w+)", option.read_text(), flags=re.MULTILINE)
    return found.group(1) if found else "synthetic"


def _facts(ds: DatasetConfig) -> dict[str, Any]:
    """What a command needs to name ``ds`` (the fields a manifest records too)."""
    return {"source": ds.source, "format": ds.format, "root": ds.path, "files": list(ds.files)}


def _hydra_value(value: str) -> str:
    """``value`` as a Hydra override value: quoted when it has characters Hydra parses."""
    if re.fullmatch(r"[\w./\-+:@~%]+", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _override(key: str, value: str) -> str:
    """``key=value`` as a Hydra override."""
    return f"{key}={_hydra_value(value)}"


def _default_files(facts: dict[str, Any]) -> list[str]:
    """The files a local dataset reads when ``dataset.files`` is not given."""
    if facts["format"] in DIRECTORY_FORMATS:
        return DIRECTORY_FORMATS[facts["format"]]
    root = resolve(facts["root"]) if facts.get("root") else None
    return [p.name for p in sorted(root.glob("*")) if p.is_file()] if root else []


def stage_command(stage: str, name: str, data_root: Path,
                  facts: dict[str, Any] | None = None) -> str | None:
    """The command that runs ``stage`` on dataset ``name`` writing under ``data_root``, as it
    can be pasted into a shell; None when ``facts`` are unknown for a dataset the config lacks.

    A dataset that ``workbench/conf/dataset/<name>.yaml`` defines is picked with
    ``dataset=<name>``; a user's local data with ``dataset=local`` and its name, path, format
    (and files, where they are not the default); ``paths.data`` is added when it is not the
    default ``data``.

    Args:
        stage: the stage (``prepare``, ``download``).
        name: the dataset's name.
        data_root: ``paths.data``, resolved.
        facts: ``source``, ``format``, ``root`` (``dataset.path``) and ``files`` (from the
            dataset's config or its manifest); None: unknown.
    """
    group = _group_source(name)
    source = (facts or {}).get("source")
    if group is not None and (source is None or source == group):
        words = [f"dataset={name}"]
    elif facts is not None and source == "local" and facts.get("root"):
        words = ["dataset=local", *([_override("dataset.name", name)] if name != "local" else []),
                 _override("dataset.path", str(facts["root"])),
                 _override("dataset.format", facts["format"])]
        files = [str(f) for f in facts.get("files") or []]
        if files and files != _default_files(facts):
            words.append(f"dataset.files=[{','.join(map(_hydra_value, files))}]")
    elif group is None and source is None:
        return None
    else:
        words = ["--dataset", name]
    if data_root.resolve() != resolve("data").resolve():
        words.append(_override("paths.data", str(data_root)))
    return " ".join(["python", "-m", "workbench.stages", stage, *map(shlex.quote, words)])


def prepare_advice(processed: Path) -> str:
    """How to make ``processed`` (``<data>/processed/<name>``): the ``prepare`` command, read
    from the dataset's raw manifest when the download stage ran."""
    import json

    name, data_root = processed.name, processed.parent.parent
    manifest = raw_dir(data_root, name) / MANIFEST
    facts = None
    if manifest.is_file():
        recorded = json.loads(manifest.read_text())
        facts = {"source": recorded.get("source"), "format": recorded.get("format"),
                 "root": recorded.get("root"),
                 "files": [f["file"] for f in recorded.get("files", [])]}
    command = stage_command("prepare", name, data_root, facts)
    if command is None:
        return (f"run the prepare stage for {name} first: python -m workbench.stages prepare "
                "with the dataset options of this command")
    return f"run the prepare stage for {name} first: {command}"


def unavailable_result(processed: Path, out_file: Path) -> bool:
    """For an experiment stage: if ``processed`` is an unavailable dataset, write ``out_file``
    saying so (with the reason) and return True; otherwise return False."""
    import json

    if not (processed / STATUS).exists():
        raise MissingInputError(f"{processed / STATUS} not found: {prepare_advice(processed)}")
    status = json.loads((processed / STATUS).read_text())
    if status["available"]:
        return False
    write_json(out_file, {"dataset": processed.name, "available": False,
                          "reason": status["reason"]})
    return True


def preprocess(ds: DatasetConfig, data_root: Path, *, seed: int, progress: bool = False
               ) -> Path:
    """Parse and encode the raw files of ``ds`` into ``<data>/processed/<ds>``.

    The streaming engine ([`workbench.data.streaming`][], out of core, memory bounded by
    ``dataset.memory_limit_mb``) runs the synthetic source and every format with one sample per
    line; the in-memory engine ([`workbench.data.preprocess.encode`][]) runs the rest
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
        ConfigError: ``dataset.engine=streaming`` with a format it cannot stream.
        SingleClassError: the train split holds one label class (nothing is written).
        ConfigError: ``dataset.memory_limit_mb`` is too small for the streaming engine.
        DiskFullError: the disk filled up (nothing half-written is left).
    """
    from workbench.data.formats import ROW_FORMATS, SESSION_LOG_FORMATS

    manifest = read_manifest(ds, data_root)
    out = processed_dir(data_root, ds.name)
    streams = ds.source == "synthetic" or ds.format in ROW_FORMATS or \
        ds.format in SESSION_LOG_FORMATS
    if ds.engine == "streaming" and not streams:
        raise ConfigError(f"dataset.engine = streaming: format {ds.format!r} needs the whole "
                          f"table of {ds.name} (its files are joined); set dataset.engine=memory "
                          "or auto")
    engine = "memory" if ds.engine == "memory" or not streams else "streaming"
    with disk_full_reported(out, "paths.data"), atomic_dir(out) as tmp:
        if not manifest.get("available", False):
            write_json(tmp / STATUS, {"available": False, "reason": manifest.get("reason", "")})
            return out
        if engine == "streaming":
            meta, report = _preprocess_streaming(ds, data_root, manifest, tmp, progress)
        else:
            meta, report = _preprocess_in_memory(ds, data_root, manifest, tmp)
        _check_two_classes(ds, data_root, manifest, tmp / "train.parquet")
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


def _label_range(train: Path) -> tuple[float, float] | None:
    """``(min, max)`` label of a written train split, from its row groups' statistics (read
    a row group's label column only where a group has none); None when it has no rows."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from workbench.data.schema import LABEL

    source = pq.ParquetFile(train)
    column = source.schema_arrow.get_field_index(LABEL)
    lows, highs = [], []
    for group in range(source.num_row_groups):
        meta = source.metadata.row_group(group)
        if meta.num_rows == 0:
            continue
        stats = meta.column(column).statistics
        if stats is not None and stats.has_min_max:
            lows.append(float(stats.min))
            highs.append(float(stats.max))
        else:
            both = pc.min_max(source.read_row_group(group, columns=[LABEL]).column(LABEL))
            lows.append(float(both["min"].as_py()))
            highs.append(float(both["max"].as_py()))
    return (min(lows), max(highs)) if lows else None


def _check_two_classes(ds: DatasetConfig, data_root: Path, manifest: dict[str, Any],
                       train: Path) -> None:
    """Refuse a train split whose labels are all one class (AUC is undefined on it).

    The session logs are exempt: their labels come from a purchases file, and without one they
    are all 0 on purpose (the key-based experiments only; their parser says so).
    """
    from workbench.data.formats import SESSION_LOG_FORMATS

    if ds.format in SESSION_LOG_FORMATS:
        return
    labels = _label_range(train)
    if labels is None or labels[0] != labels[1]:
        return
    both = _label_range(train.with_name("test.parquet"))
    if both is not None and (both[0] != labels[0] or both[1] != labels[0]):
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(train).metadata.num_rows
        total = rows + pq.ParquetFile(train.with_name("test.parquet")).metadata.num_rows
        raise SingleClassError(
            f"dataset.test_fraction = {ds.test_fraction:.12g} leaves {rows:,} of {total:,} rows "
            f"of {ds.name} for training, all of one label class (the test split has both): "
            "AUC is undefined; lower dataset.test_fraction (the default is 0.1; allowed: > 0 "
            "and < 1)")
    if ds.source == "synthetic":
        files = [str(raw_dir(data_root, ds.name) / SYNTHETIC_FILE)]
    else:
        root = resolve(manifest["root"])
        files = [str(root / f["file"]) for f in manifest["files"]]
    shown = files[0] + (f" (and {len(files) - 1} more)" if len(files) > 1 else "")
    label = labels[0] + 0.0  # Parquet records a zero minimum as -0.0
    raise SingleClassError(
        f"dataset {ds.name}: every train row of {shown} has label {label:g}, one class: AUC "
        "is undefined without both classes, so no stage could score a model; give files with "
        "both labels 0 and 1 (a test set without labels, like Criteo Kaggle's test.txt, cannot "
        "be trained on)")


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


def _within_memory(ds: DatasetConfig, encode: Callable[[], T]) -> T:
    """``encode()``, with DuckDB running out of ``dataset.memory_limit_mb`` said as that key's
    error: its value, what DuckDB was doing, a value to try and the allowed range."""
    import dataclasses

    from workbench.data.streaming import StreamingMemoryError

    try:
        return encode()
    except StreamingMemoryError as err:
        lowest = next(f.metadata["range"][0] for f in dataclasses.fields(DatasetConfig)
                      if f.name == "memory_limit_mb")
        raise ConfigError(
            f"dataset.memory_limit_mb = {ds.memory_limit_mb}: too small to preprocess {ds.name} "
            f"(DuckDB ran out of memory while {err.phase}"
            f"{f', {err.used}' if err.used else ''}); set dataset.memory_limit_mb="
            f"{2 * ds.memory_limit_mb} or more (allowed: an integer >= {lowest})") from err


def _preprocess_streaming(ds: DatasetConfig, data_root: Path, manifest: dict[str, Any],
                          tmp: Path, progress: bool) -> tuple[DatasetMeta, ParseReport]:
    from workbench.data.streaming import TableLayout, encode_streaming

    options: dict[str, Any] = dict(
        test_fraction=ds.test_fraction, memory_limit_mb=ds.memory_limit_mb,
        row_group_rows=ds.row_group_rows, progress=progress)
    if ds.source == "synthetic":
        import pyarrow.parquet as pq

        sequences = manifest.get("sequences", {})
        layout = TableLayout(dense=tuple(manifest["dense"]),
                             categorical=tuple(manifest["categorical"]),
                             has_session=manifest.get("has_session", False), sequences=sequences)
        raw_file = pq.ParquetFile(raw_dir(data_root, ds.name) / SYNTHETIC_FILE)
        report = ParseReport(files=[SYNTHETIC_FILE], rows=raw_file.metadata.num_rows)
        result = _within_memory(ds, lambda: encode_streaming(
            raw_file.iter_batches(batch_size=65536), layout, tmp,
            cardinalities=manifest["cardinalities"], **options))
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
        result = _within_memory(ds, lambda: encode_streaming(
            checked(), layout, tmp, min_count=ds.min_count, history_length=history, **options))
        user_side = list(fmt.user_side)
    meta = DatasetMeta(
        name=ds.name, source=ds.source, rows=result.rows, dense=list(layout.dense),
        categorical=list(layout.categorical), cardinalities=result.cardinalities,
        user_side=list(user_side), sequences=sequences, has_session=layout.has_session,
        has_timestamp=layout.has_timestamp, provenance={"split": result.split})
    return meta, report
