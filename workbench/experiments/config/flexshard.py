"""Config schemas of flexShard's stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from workbench.utils.validation import ConfigError, check_each, in_range, nonempty


@dataclass(frozen=True)
class FlexShardConfig:
    """FlexShard experiments: sharding plans of a sequence embedding table on a two-level topology.

    Attributes:
        datasets: datasets with a sequence feature (the ``flexshard`` stage runs on each).
        claims_dataset: the dataset whose results the claims rows report (one of ``datasets``).
        sequence_feature: the sequence (list) column sharded; null = the dataset's first.
        embedding_dim: D (a row is 4 D bytes).
        per_device_batch: samples each device trains per iteration (data parallel).
        profile_batches: iterations (of the base topology's global batch) whose lookups estimate
            the rows' access probabilities, counted per occurrence.
        replay_batches: the iterations after them, replayed through every plan.
        stream_profile_batches: the streamed claims run (``flexshard-stream``): iterations of
            the base topology's global batch drawn from ``claims_dataset``'s generator that
            every plan is profiled on (one of ``profile_sweep``); the replay follows the
            longest profile of the sweep, so it is held out at every length.
        profile_sweep: the profile lengths (iterations, as ``stream_profile_batches``) of the
            streamed run's coverage sweep: each length's coverage of the replayed lookups and
            every plan made from it.
        probability_estimator: ``good_turing`` (the profile's unseen rows share the
            Good-Turing missing mass, counted per iteration: the lookups on rows seen in only
            one profiled iteration / all lookups, so a row the profile missed is not free for
            the planner; the seen rows' frequencies are scaled by the rest) or
            ``frequency`` (raw frequencies: unseen rows have probability 0).
        plans: the plans compared (``tw``, ``rw``, ``cw``, ``twrw``, ``hot_dp``, ``flexshard``,
            and TorchRec's planner's own: ``torchrec`` within RW's memory per device,
            ``torchrec_hbm`` with ``device_hbm_gib`` per device; ``make torchrec``).
        device_hbm_gib: the accelerator memory per device ``torchrec_hbm`` is planned with.
        cw_shards: column shards of ``cw`` (must divide ``embedding_dim``).
        memory_limit: ``rw`` (FlexShard and hot_dp may use at most RW's memory per device,
            weights + buffers) or ``none``.
        candidate_cuts: cut positions the planner evaluates (every pair of them).
        replicated_fractions: fractions of the rows replicated on every device for the
            memory-against-savings curve (the authors' figure: 0.1% .. 1.1%).
        device_sweep: device counts of the scaling sweep (multiples of the topology's
            ``devices_per_node``).
        skew_sweep: slow-node NIC speeds of the skew sweep (1 = no skew).
        link_ratio_sweep: intra-node / inter-node bandwidth per device of the link sweep
            (NVLink over NIC; the NICs keep the topology's ``inter_gbps``, NVLink is this
            times it).
    """

    datasets: list[str] = field(default_factory=lambda: ["synthetic_sessions"],
                                metadata=nonempty())
    claims_dataset: str = "synthetic_sessions"
    sequence_feature: str | None = None
    embedding_dim: int = field(default=64, metadata=in_range(1, 65_536))
    per_device_batch: int = field(default=512, metadata=in_range(1, None))
    profile_batches: int = field(default=4, metadata=in_range(1, None))
    replay_batches: int = field(default=4, metadata=in_range(1, None))
    stream_profile_batches: int = field(default=512, metadata=in_range(1, None))
    profile_sweep: list[int] = field(default_factory=lambda: [2, 16, 64, 256, 512, 768],
                                     metadata=nonempty(in_range(1, None)))
    probability_estimator: Literal["good_turing", "frequency"] = "good_turing"
    plans: list[str] = field(default_factory=lambda: ["tw", "rw", "cw", "twrw", "hot_dp",
                                                      "flexshard"], metadata=nonempty())
    device_hbm_gib: float = field(default=80.0, metadata=in_range(0.001, 1e6))
    cw_shards: int = field(default=4, metadata=in_range(1, 4096))
    memory_limit: Literal["rw", "none"] = "rw"
    candidate_cuts: int = field(default=256, metadata=in_range(2, 100_000))
    replicated_fractions: list[float] = field(
        default_factory=lambda: [0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009,
                                 0.010, 0.011], metadata=nonempty())
    device_sweep: list[int] = field(default_factory=lambda: [8, 16, 32, 64],
                                    metadata=nonempty(in_range(1, 65_536)))
    skew_sweep: list[float] = field(default_factory=lambda: [1.0, 0.5, 0.25, 0.1],
                                    metadata=nonempty())
    link_ratio_sweep: list[float] = field(default_factory=lambda: [2.0, 4.0, 9.0, 12.0, 24.0,
                                                                   48.0],
                                          metadata=nonempty())

    def __post_init__(self) -> None:
        if self.claims_dataset not in self.datasets:
            raise ConfigError(f"claims_dataset = {self.claims_dataset!r}: must be one of "
                              f"datasets {self.datasets}")
        if self.stream_profile_batches not in self.profile_sweep:
            raise ConfigError(f"stream_profile_batches = {self.stream_profile_batches}: must be "
                              f"one of profile_sweep {self.profile_sweep} (add it there)")
        allowed = ("tw", "rw", "cw", "twrw", "hot_dp", "flexshard", "torchrec", "torchrec_hbm")
        check_each("plans", self.plans, lambda p: p in allowed, f"one of {allowed}")
        for need in ("rw", "flexshard"):
            if need not in self.plans:
                raise ConfigError(f"plans = {self.plans}: must include '{need}' (the claims "
                                  "compare FlexShard with row-wise)")
        if self.embedding_dim % self.cw_shards:
            raise ConfigError(f"cw_shards = {self.cw_shards}: must divide embedding_dim = "
                              f"{self.embedding_dim}")
        check_each("replicated_fractions", self.replicated_fractions, lambda f: 0 <= f <= 1,
                   "in [0, 1]")
        check_each("skew_sweep", self.skew_sweep, lambda f: 0 < f <= 1, "in (0, 1]")
        check_each("link_ratio_sweep", self.link_ratio_sweep, lambda r: 0 < r <= 1000,
                   "in (0, 1000]")
