"""An override a stage never reads is refused (workbench/stages/reads.py): its dvc.yaml params,
resolved against the run's own configuration, are what it reads."""

from __future__ import annotations

import pytest

from workbench.config import load
from workbench.stages.reads import check_overrides_read, stage_params
from workbench.stages.registry import STAGES
from workbench.utils.paths import REPO_ROOT
from workbench.utils.validation import ConfigError

DVC_YAML = REPO_ROOT / "dvc.yaml"


def _check(stage: str, overrides: list[str], item: str | None = None) -> None:
    cfg = load(overrides)
    check_overrides_read(DVC_YAML, STAGES[stage], cfg, item, overrides)


@pytest.mark.parametrize("stage,overrides,item", [
    ("het-long", ["models.wdl.lr_dense=0.1"], None),
    ("het-long", ["experiments.het_train.dense_mode=ps"], None),  # inside a key it reads
    ("het-train", ["experiments.het_train.model=dcn", "models.dcn.lr_dense=0.01"], None),
    ("esd", ["seed=3", "cluster.workers=8", "paths.results=/tmp/x"], None),
    ("flexshard", ["topology=skewed", "topology.nodes=4", "log_level=DEBUG"], "taobao_sample"),
    ("het-train", ["dataset=local", "dataset.name=mine", "dataset.path=/tmp"], None),
    ("het-train", ["cache=lfu", "experiment=hetu", "profile=ci"], None),
    ("report", ["models.wdl.lr_dense=0.1"], None),  # composes the whole configuration
    ("het-epoch", ["fanout.backend=dask"], None),  # the stages that fan out read fanout
    ("het-long", ["fanout.backend=dask", "fanout.scheduler=tcp://127.0.0.1:8786"], None),
])
def test_an_override_the_stage_reads_is_accepted(stage: str, overrides: list[str],
                                                 item: str | None) -> None:
    _check(stage, overrides, item)


@pytest.mark.parametrize("stage,overrides,item,says", [
    ("het-long", ["model.optimizer=sgd"], None,
     "het_long stage never reads model.optimizer .* models.wdl.optimizer=sgd"),
    ("flexshard", ["experiments.esd.workers=4"], "taobao_sample",
     r"flexshard stage never reads experiments.esd.workers \(it reads experiments.flexshard, "
     r"topology\)$"),
    ("flexshard", ["seed=3"], "taobao_sample", "never reads seed"),
    ("het-train", ["models.dcn.lr_dense=0.01"], None, "never reads models.dcn.lr_dense"),
    ("recd", ["cache.ratio=0.2"], "taobao_sample", "the recd stage never reads cache.ratio"),
    ("esd", ["cache=lfu"], None, "the esd stage never reads cache"),  # a group's selection
    ("esd", ["fanout.backend=dask"], None,
     r"the esd stage runs no configurations side by side, so it never reads fanout \(read by "
     r"het_epoch, het_long\); drop the override$"),
])
def test_an_override_the_stage_never_reads_is_one_line(stage: str, overrides: list[str],
                                                       item: str | None, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as info:
        _check(stage, overrides, item)
    assert "\n" not in str(info.value)


def test_the_params_resolve_against_the_runs_configuration() -> None:
    cfg = load(["experiments.het_train.model=deepfm"])
    keys = stage_params(DVC_YAML, "het_train", cfg, None)
    assert keys is not None and "models.deepfm" in keys and "models.wdl" not in keys
    assert "datasets.taobao_sample" in (stage_params(DVC_YAML, "preprocess", cfg,
                                                     "taobao_sample") or [])
    assert stage_params(DVC_YAML, "no_such_stage", cfg, None) is None
