"""Config schema of the data layer: a dataset (source, parsing, split) and the synthetic generator.

Composed by [`workbench.config`][] from ``workbench/conf/dataset/*.yaml`` (selected as
``dataset``, mounted under ``datasets.<name>``); validated by
[`workbench.utils.validation.from_dict`][].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from workbench.utils.paths import check_name
from workbench.utils.validation import ConfigError, in_range


@dataclass(frozen=True)
class SessionConfig:
    """Session structure of the synthetic data (RecD's dedup opportunity).

    Attributes:
        enabled: group consecutive samples into user sessions sharing the user-side features.
        mean_length: mean samples per session (geometric lengths).
        user_features: the categorical features that are user-side (constant in a session).
    """

    enabled: bool = False
    mean_length: float = field(default=8.0, metadata=in_range(1.0, None))
    user_features: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SequenceConfig:
    """An optional user-history sequence feature (list of item ids) for the synthetic data.

    Attributes:
        enabled: add the list column ``hist_<item_feature>``.
        length: maximum history length.
        item_feature: the categorical feature whose ids the history holds.
    """

    enabled: bool = False
    length: int = field(default=20, metadata=in_range(1, 10_000))
    item_feature: str = "C3"


@dataclass(frozen=True)
class SyntheticConfig:
    """The embedded default: a seeded generator calibrated to Criteo Kaggle.

    Attributes:
        rows: samples to generate (train + test).
        cardinality_scale: Criteo Kaggle's per-feature cardinalities are multiplied by this.
        min_cardinality: lower bound of a scaled cardinality.
        top1_share: target share of lookups taken by the top 1% of rows of each feature.
        dense_missing_rate: probability that a dense value is missing.
        ctr: target positive rate of the labels.
        label_noise: scale of the hidden model's logit noise (larger = harder to learn).
        sessions: session structure.
        sequence: optional user-history feature.
        chunk_rows: samples generated (and held in memory) at a time; a dataset of at most this
            many rows is one chunk (see [`workbench.data.synthetic.SyntheticGenerator`][]).
    """

    rows: int = field(default=400_000, metadata=in_range(10, 2_000_000_000))
    cardinality_scale: float = field(default=0.01, metadata=in_range(0.0, 1.0, lo_open=True))
    min_cardinality: int = field(default=2, metadata=in_range(2, None))
    top1_share: float = field(default=0.6,
                              metadata=in_range(0.01, 1.0, lo_open=False, hi_open=True))
    dense_missing_rate: float = field(default=0.2, metadata=in_range(0.0, 1.0, hi_open=True))
    ctr: float = field(default=0.25, metadata=in_range(0.0, 1.0, lo_open=True, hi_open=True))
    label_noise: float = field(default=1.0, metadata=in_range(0.0, None))
    sessions: SessionConfig = field(default_factory=SessionConfig)
    sequence: SequenceConfig = field(default_factory=SequenceConfig)
    chunk_rows: int = field(default=1_000_000, metadata=in_range(1_000, None))


@dataclass(frozen=True)
class DatasetConfig:
    """One dataset: where it comes from and how it is turned into the columnar schema.

    Attributes:
        name: the dataset's name (also its directory under ``data/``).
        source: ``synthetic`` (embedded generator), ``url`` (a registry download), or ``local``
            (files already on disk at ``path``).
        format: raw format of a ``url``/``local`` source (a format of
            [`workbench.data.formats`][]); ``parquet`` for the synthetic source.
        registry: registry entry for ``url`` sources (``workbench.data.registry``).
        path: the directory holding the raw files of a ``local`` source (name files in it with
            ``files``).
        files: file names inside ``path`` to read (empty = the registry's/format's defaults).
        days: Criteo 1TB days to download (``day_N.gz``).
        max_rows: keep at most this many rows (null = all).
        test_fraction: the last fraction of rows in time is the test split: by timestamp where
            the source has one (MovieLens, Taobao, Avazu), else in file order (Criteo's rows
            are chronological); ``meta.json`` records which (``split``).
        min_count: categorical values seen fewer times than this map to id 0 (missing/rare).
        history_length: length of the user-history sequence feature (0 = none), where supported.
        strict: fail on the first malformed row (with file and line) instead of counting it.
        max_malformed_fraction: a non-strict parse fails when more than this share of the rows
            read is malformed (a file in another format, or corrupt), naming the file, the first
            bad lines and the format the file looks like.
        download_timeout_s: seconds allowed for connecting and for each read of a download.
        download_min_rate_kbps: a download slower than this (kB/s, averaged over a minute)
            stops with a message; the partial file is kept and the next run resumes it
            (0 = no minimum).
        optional: a ``local`` source whose files are absent is recorded as unavailable (the
            pipeline goes on and the report says where to put the files) instead of failing.
        engine: how ``preprocess`` runs: ``streaming`` (out of core on DuckDB, memory bounded
            by ``memory_limit_mb``; the formats with one sample per line and the synthetic
            source), ``memory`` (the whole table in pandas; every format), ``auto`` (streaming
            where it can).
        memory_limit_mb: the streaming engine's working memory; DuckDB spills to disk beyond
            it. Peak RSS is about this plus one row group being written plus ~0.3 GB.
        row_group_rows: rows per row group of the processed Parquet (later stages read the
            splits a row group at a time).
        target_auc: the time-to-target AUC used by training experiments on this dataset.
        synthetic: generator settings (``source: synthetic`` only).
    """

    name: str = "synthetic"
    source: Literal["synthetic", "url", "local"] = "synthetic"
    format: Literal["parquet", "criteo_tsv", "criteo_csv", "avazu_csv", "movielens_100k",
                    "movielens_1m", "movielens_20m", "movielens_csv", "taobao_user_behavior",
                    "session_clicks", "diginetica_views"] = "parquet"
    registry: str | None = None
    path: str | None = None
    files: list[str] = field(default_factory=list)
    days: list[int] = field(default_factory=list, metadata=in_range(0, 23))
    max_rows: int | None = field(default=None, metadata=in_range(1, None))
    test_fraction: float = field(default=0.1,
                                 metadata=in_range(0.0, 1.0, lo_open=True, hi_open=True))
    min_count: int = field(default=1, metadata=in_range(1, None))
    history_length: int = field(default=0, metadata=in_range(0, 10_000))
    strict: bool = False
    max_malformed_fraction: float = field(default=0.05, metadata=in_range(0.0, 1.0))
    download_timeout_s: float = field(default=30.0, metadata=in_range(0.0, None, lo_open=True))
    download_min_rate_kbps: float = field(default=1.0, metadata=in_range(0.0, None))
    optional: bool = False
    engine: Literal["auto", "streaming", "memory"] = "auto"
    memory_limit_mb: int = field(default=2048, metadata=in_range(64, None))
    row_group_rows: int = field(default=1 << 20, metadata=in_range(1024, None))
    target_auc: float = field(default=0.75, metadata=in_range(0.5, 1.0, hi_open=True))
    synthetic: SyntheticConfig | None = None

    def __post_init__(self) -> None:
        check_name("name", self.name)
        for i, name in enumerate(self.files):
            if not name or Path(name).is_absolute() or ".." in Path(name).parts:
                raise ConfigError(f"files[{i}] = {name!r}: must be a file name inside path "
                                  "(no '..', no absolute path)")
            if Path(name) in [Path(n) for n in self.files[:i]]:
                raise ConfigError(f"files[{i}] = {name!r}: listed twice (its rows would be read "
                                  "twice, and test rows would leak into train); list each file "
                                  "once")
        if (self.source == "synthetic") != (self.format == "parquet"):
            raise ConfigError(f"format = {self.format!r} with source = {self.source!r}: the "
                              "synthetic source writes 'parquet'; url and local sources need the "
                              "raw format of their files")
        if self.source == "local" and not self.path:
            raise ConfigError("path = null: a local source needs the directory holding "
                              "its files, e.g. dataset.path=/data/criteo")
