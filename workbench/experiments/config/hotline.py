"""Config schemas of hotline's stages (hotline-popularity, hotline)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from workbench.utils.validation import ConfigError, check_each, in_range, nonempty


@dataclass(frozen=True)
class HotlineConfig:
    """Hotline experiments: popular / non-popular micro-batches against the hybrid and FAE.

    Attributes:
        dataset: the dataset trained (a key of ``datasets``).
        model: the model trained (a key of ``models``; FAE and Hotline use DLRM).
        popularity_datasets: datasets of the popular-fraction figure (the ``hotline_popularity``
            stage).
        profile_rate: fraction of the train inputs profiled, drawn with replacement (FAE: 5%).
        budget_mb_full: hot-memory budgets in MiB for the FULL Criteo Kaggle tables (FAE: 128,
            256, 512), scaled to the tables here by their fraction of the table bytes.
        budget_mb: the base setting's budget (one of ``budget_mb_full``).
        full_scale_rows: rows of the full tables the budgets are given for (Criteo Kaggle).
        full_scale_dim: embedding width of the full tables (FAE's Criteo Kaggle: 16).
        popularity_fractions: hot-memory budgets of the popular-fraction curve, as fractions of
            the table bytes.
        schemes: schemes trained end to end (AUC against time).
        batch_size: mini-batch of the training runs.
        batch_sweep: mini-batches of the speedup sweep.
        sweep_steps: timed mini-batches per sweep point and scheme (after ``sweep_warmup``).
        sweep_warmup: untimed mini-batches per sweep point and scheme.
        fae_phase_batches: FAE's mini-batches per round of hot and normal phases.
        online_every: also train Hotline with the hot set re-profiled from the mini-batches seen
            every this many mini-batches (null: offline profile only).
        eval_every: evaluate test AUC every this many mini-batches.
        max_train_samples: train samples of the training runs (null = all).
        max_test_samples: test samples (null = all).
        hardware: servers of the time model (keys of ``hardware``).
        rows_unit: how the servers' time model counts the rows a mini-batch moves: ``lookups``
            (one per lookup: the Intel-optimised hybrid's ``EmbeddingBag`` path gathers, sends
            pooled vectors and updates per lookup) or ``unique`` (each distinct row once, as
            the measured implementation here does). This machine's model always uses
            ``unique`` (it is fitted on that implementation).
        link: the host-accelerator link of the measured CPU runs: ``off`` (copies at memory
            speed: a CPU has no link), ``scaled`` (shaped so that link time / compute time is the
            first ``hardware`` server's: its link bandwidth x this machine's measured compute
            seconds per sample / the server's modelled ones) or ``fixed`` (``link_gbps``).
            Ignored on CUDA, where the link is real.
        link_gbps: the shaped link's bandwidth in GB/s with ``link = fixed``.
        device: ``cpu`` (the accelerator tier is a separate tensor store), ``cuda`` (device
            memory; fails without a GPU) or ``auto`` (cuda when available).
        threads: torch intra-op threads of the compute (Hotline's gather thread is one more).
        capture: how each micro-batch's forward and backward runs
            ([`workbench.training.capture`][]): ``eager`` (the reference), ``compile``
            (``torch.compile``), ``cuda_graphs`` (``torch.compile`` replaying CUDA graphs: a
            CUDA device only).
        timeline_step: the mini-batch (1-based, after the first evaluation) whose phases the
            timeline figure shows.
        host_rate_sweep: host gather + update rates (GB/s) at which every server's time model
            is re-evaluated, in both ``rows_unit`` (``conditions.csv``): the claims' assumed
            parameter.
    """

    dataset: str = "synthetic"
    model: str = "dlrm"
    popularity_datasets: list[str] = field(default_factory=lambda: ["synthetic"],
                                           metadata=nonempty())
    profile_rate: float = field(default=0.05, metadata=in_range(0.0, 1.0, lo_open=True))
    budget_mb_full: list[float] = field(default_factory=lambda: [128.0, 256.0, 512.0],
                                        metadata=nonempty(in_range(0.0, None, lo_open=True)))
    budget_mb: float = field(default=256.0, metadata=in_range(0.0, None, lo_open=True))
    full_scale_rows: int = field(default=33_762_577, metadata=in_range(1, None))
    full_scale_dim: int = field(default=16, metadata=in_range(1, 65_536))
    popularity_fractions: list[float] = field(
        default_factory=lambda: [0.001, 0.003, 0.01, 0.03, 0.06, 0.12, 0.24, 0.5, 1.0],
        metadata=nonempty())
    schemes: list[str] = field(default_factory=lambda: ["hybrid", "hotline", "fae",
                                                        "accel_only"], metadata=nonempty())
    batch_size: int = field(default=1024, metadata=in_range(1, None))
    batch_sweep: list[int] = field(default_factory=lambda: [256, 1024, 4096],
                                   metadata=nonempty(in_range(1, None)))
    sweep_steps: int = field(default=12, metadata=in_range(1, None))
    sweep_warmup: int = field(default=2, metadata=in_range(0, None))
    fae_phase_batches: int = field(default=16, metadata=in_range(1, None))
    online_every: int | None = field(default=50, metadata=in_range(1, None))
    eval_every: int = field(default=25, metadata=in_range(1, None))
    max_train_samples: int | None = field(default=None, metadata=in_range(1, None))
    max_test_samples: int | None = field(default=None, metadata=in_range(1, None))
    hardware: list[str] = field(default_factory=lambda: ["v100_pcie3", "a100_pcie4"],
                                metadata=nonempty())
    rows_unit: Literal["lookups", "unique"] = "lookups"
    link: Literal["off", "scaled", "fixed"] = "scaled"
    link_gbps: float = field(default=0.25, metadata=in_range(0.0, None, lo_open=True))
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    threads: int = field(default=1, metadata=in_range(1, 1024))
    capture: Literal["eager", "compile", "cuda_graphs"] = "eager"
    timeline_step: int = field(default=60, metadata=in_range(1, None))
    host_rate_sweep: list[float] = field(
        default_factory=lambda: [0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0],
        metadata=nonempty(in_range(0.0, None, lo_open=True)))

    def __post_init__(self) -> None:
        check_each("popularity_fractions", self.popularity_fractions, lambda f: 0 < f <= 1,
                   "in (0, 1]")
        check_each("schemes", self.schemes, lambda s: s in ("hybrid", "hotline", "fae",
                                                            "accel_only"),
                   "one of 'hybrid', 'hotline', 'fae', 'accel_only'")
        if "hybrid" not in self.schemes or "hotline" not in self.schemes:
            raise ConfigError(f"schemes = {self.schemes}: must include 'hybrid' and 'hotline' "
                              "(the speedups are Hotline's against the hybrid)")
        if self.budget_mb not in self.budget_mb_full:
            raise ConfigError(f"budget_mb = {self.budget_mb}: must be one of budget_mb_full "
                              f"{self.budget_mb_full}")
