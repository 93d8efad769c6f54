"""Config schemas of the experiments, one section per experiment stage module of this package
(``het``, ``esd``, ``recd``, ``hotline``, ``flexshard``, ``distributed``, ``combined``: one
module per paper or study; every name is importable from here).

| schema | stage module |
| --- | --- |
| ``DatasetStatsConfig`` | [`workbench.experiments.dataset_stats`][] |
| ``HetCacheConfig`` | [`workbench.experiments.het_cache`][] |
| ``HetTrainConfig`` | [`workbench.experiments.het_train`][] |
| ``HetTimeConfig`` | [`workbench.experiments.het_time`][] |
| ``HetScaleConfig`` | [`workbench.experiments.het_scale`][] |
| ``HetEpochConfig`` | [`workbench.experiments.het_epoch`][] |
| ``HetLongConfig`` | [`workbench.experiments.het_long`][] |
| ``EsdConfig`` | [`workbench.experiments.esd`][] |
| ``RecdConfig`` | [`workbench.experiments.dedup`][], [`workbench.experiments.recd`][] |
| ``HotlineConfig`` | [`workbench.experiments.hotline`][] |
| ``FlexShardConfig`` | [`workbench.experiments.flexshard`][] |
| ``DistributedCheckConfig`` | [`workbench.experiments.distributed_check`][] |
| ``CalibrationConfig`` | [`workbench.experiments.calibrate`][] |
| ``CombinedConfig`` | [`workbench.experiments.combined`][] |

Each schema is mounted at ``experiments.<stage module>`` (``RecdConfig`` at
``experiments.recd``).

The schemas sit in this light package, not in the stage modules, so that composing and validating
the configuration (every stage's first step, ``make params``) does not import torch, numba and
scipy: 0.3 s instead of about 4 s per process on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.experiments.config.combined import (
    MECHANISMS,
    CombinedConfig,
)
from workbench.experiments.config.distributed import (
    DistributedCheckConfig,
)
from workbench.experiments.config.esd import (
    EsdConfig,
)
from workbench.experiments.config.flexshard import (
    FlexShardConfig,
)
from workbench.experiments.config.het import (
    HET_CLOCK,
    CalibrationConfig,
    DatasetStatsConfig,
    HetCacheConfig,
    HetEpochConfig,
    HetLongConfig,
    HetScaleConfig,
    HetTimeConfig,
    HetTrainConfig,
    check_dense_modes,
)
from workbench.experiments.config.hotline import (
    HotlineConfig,
)
from workbench.experiments.config.recd import (
    RecdConfig,
    TransformStepConfig,
)

__all__ = [
    "HET_CLOCK", "CalibrationConfig", "CombinedConfig", "DatasetStatsConfig",
    "DistributedCheckConfig", "EsdConfig", "FlexShardConfig", "HetCacheConfig", "HetEpochConfig",
    "HetLongConfig", "HetScaleConfig", "HetTimeConfig", "HetTrainConfig", "HotlineConfig",
    "MECHANISMS", "RecdConfig", "TransformStepConfig", "check_dense_modes", "ExperimentsConfig"]


@dataclass(frozen=True)
class ExperimentsConfig:
    """Settings of every experiment the pipeline runs."""

    dataset_stats: DatasetStatsConfig = field(default_factory=DatasetStatsConfig)
    het_cache: HetCacheConfig = field(default_factory=HetCacheConfig)
    het_train: HetTrainConfig = field(default_factory=HetTrainConfig)
    het_time: HetTimeConfig = field(default_factory=HetTimeConfig)
    het_scale: HetScaleConfig = field(default_factory=HetScaleConfig)
    het_epoch: HetEpochConfig = field(default_factory=HetEpochConfig)
    het_long: HetLongConfig = field(default_factory=HetLongConfig)
    esd: EsdConfig = field(default_factory=EsdConfig)
    recd: RecdConfig = field(default_factory=RecdConfig)
    hotline: HotlineConfig = field(default_factory=HotlineConfig)
    flexshard: FlexShardConfig = field(default_factory=FlexShardConfig)
    distributed_check: DistributedCheckConfig = field(default_factory=DistributedCheckConfig)
    calibrate: CalibrationConfig = field(default_factory=CalibrationConfig)
    combined: CombinedConfig = field(default_factory=CombinedConfig)
