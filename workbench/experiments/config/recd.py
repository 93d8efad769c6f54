"""Config schemas of recD's stages (dedup, recd) and the reader's transforms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from workbench.utils.validation import ConfigError, check_each, in_range, nonempty


@dataclass(frozen=True)
class TransformStepConfig:
    """One preprocessing transform of a sparse feature ([`workbench.sparse.transforms`][]).

    Attributes:
        op: ``hash`` (id -> splitmix64(id, salt) mod num_buckets), ``remap`` (id -> table[id]),
            ``bucketize`` (value -> bucket of ``boundaries``), ``truncate`` (keep ``max_length``
            elements, the ``last`` or ``first``).
        num_buckets: ``hash`` only.
        salt: ``hash`` only.
        table: ``remap`` only.
        boundaries: ``bucketize`` only, strictly increasing.
        max_length: ``truncate`` only.
        keep: ``truncate`` only.
    """

    op: Literal["hash", "remap", "bucketize", "truncate"] = "hash"
    num_buckets: int | None = field(default=None, metadata=in_range(1, None))
    salt: int = field(default=0, metadata=in_range(0, None))
    table: list[int] | None = None
    boundaries: list[float] | None = None
    max_length: int | None = field(default=None, metadata=in_range(0, None))
    keep: Literal["last", "first"] = "last"

    def spec(self) -> dict[str, Any]:
        """The step as [`from_spec`][workbench.sparse.transforms.from_spec] reads it (its own
        args)."""
        args = {"hash": ("num_buckets", "salt"), "remap": ("table",),
                "bucketize": ("boundaries",), "truncate": ("max_length", "keep")}[self.op]
        out: dict[str, Any] = {"op": self.op}
        for name in args:
            value = getattr(self, name)
            if value is None:
                raise ConfigError(f"op = {self.op!r} needs {name}")
            out[name] = value
        return out


@dataclass(frozen=True)
class RecdConfig:
    """RecD experiments: session-clustered partitions, batch dedup, IKJT preprocessing/training.

    Attributes:
        datasets: the datasets with users or sessions the RecD stages run on.
        session_gap_s: on timestamped sources a user's rows further apart than this start a new
            session (request); null = one session per user.
        history: ``snapshot`` (every sample of a session carries the history the session started
            with, as a feature store serves it per request) or ``per_sample`` (the preprocessed
            per-sample history, which changes every sample and so never deduplicates).
        window: rows per written partition, i.e. the clustering window (log order).
        window_sweep: windows of the storage and dedup sweeps.
        batch_sizes: batch sizes of the dedup-factor sweep.
        dedup_groups: RecD's ``dedup_sparse_features``; null = one group of the user-side
            features and the sequence features; the other features are not deduplicated.
        transforms: per sparse feature, its preprocessing chain; empty = ``hash`` every feature
            into its table size after truncating sequences to ``max_history``.
        max_history: sequence length after truncation (and the model's sequence length).
        preprocess_batch_sizes: reader batch sizes of the preprocessing-throughput sweep (sizes
            above the rows of a dataset's partitions are skipped).
        preprocess_rows: rows preprocessed per timed run (at most the partitions' rows).
        repeats: timing repeats (the best is kept, alternating KJT and IKJT).
        train_batch_size: batch size of the training runs.
        train_batches: batches of each training run.
        embedding_dim: embedding width of the RecD model.
        bottom_mlp: bottom MLP hidden widths (dense features -> ... -> D is appended, as in
            ``models.dlrm``).
        top_mlp: top MLP hidden widths (a final 1-unit layer is appended).
        seq_heads: attention heads of the sequence tower.
        lr: Adagrad learning rate.
    """

    datasets: list[str] = field(default_factory=lambda: ["synthetic_sessions"],
                                metadata=nonempty())
    session_gap_s: int | None = field(default=1800, metadata=in_range(1, None))
    history: Literal["snapshot", "per_sample"] = "snapshot"
    window: int = field(default=16384, metadata=in_range(1, None))
    window_sweep: list[int] = field(default_factory=lambda: [1024, 4096, 16384, 65536],
                                    metadata=nonempty())
    batch_sizes: list[int] = field(default_factory=lambda: [32, 128, 512, 2048],
                                   metadata=nonempty())
    dedup_groups: list[list[str]] | None = None
    transforms: dict[str, list[TransformStepConfig]] = field(default_factory=dict)
    max_history: int = field(default=20, metadata=in_range(1, 10_000))
    preprocess_batch_sizes: list[int] = field(default_factory=lambda: [512, 2048, 8192],
                                              metadata=nonempty())
    preprocess_rows: int = field(default=65536, metadata=in_range(1, None))
    repeats: int = field(default=3, metadata=in_range(1, 100))
    train_batch_size: int = field(default=512, metadata=in_range(1, None))
    train_batches: int = field(default=40, metadata=in_range(1, None))
    embedding_dim: int = field(default=32, metadata=in_range(1, 4096))
    bottom_mlp: list[int] = field(default_factory=lambda: [64])
    top_mlp: list[int] = field(default_factory=lambda: [64])
    seq_heads: int = field(default=2, metadata=in_range(1, 64))
    lr: float = field(default=0.05, metadata=in_range(0.0, None, lo_open=True))

    def __post_init__(self) -> None:
        for key in ("window_sweep", "batch_sizes", "preprocess_batch_sizes", "bottom_mlp",
                    "top_mlp"):
            check_each(key, getattr(self, key), lambda n: n >= 1, "an integer >= 1")
        if self.embedding_dim % self.seq_heads:
            raise ConfigError(f"seq_heads = {self.seq_heads}: must divide embedding_dim = "
                              f"{self.embedding_dim}")
        for key, steps in self.transforms.items():
            for i, step in enumerate(steps):
                try:
                    step.spec()
                except ConfigError as err:
                    raise ConfigError(f"transforms.{key}[{i}]: {err}") from None
