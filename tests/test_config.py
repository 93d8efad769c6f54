"""Hydra composition, validation of every value, and params.yaml parity."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from workbench.config import compose, load, to_yaml, validate
from workbench.utils.paths import CONF_DIR, PARAMS_FILE, REPO_ROOT
from workbench.utils.validation import ConfigError


def test_default_config_validates() -> None:
    cfg = load()
    assert cfg.dataset.name == "synthetic"
    assert cfg.dataset.synthetic is not None and cfg.dataset.synthetic.rows == 400_000
    assert set(cfg.pipeline.datasets) <= set(cfg.datasets)
    assert cfg.cluster.per_worker("bandwidth_gbps") == [1.0] * cfg.cluster.workers


def test_ci_profile_shrinks_the_synthetic_dataset() -> None:
    cfg = load(["profile=ci"])
    assert cfg.profile.name == "ci"
    full = load([])
    assert (cfg.datasets["synthetic"].synthetic.rows < 100_000
            < full.datasets["synthetic"].synthetic.rows)
    assert cfg.dataset.synthetic.rows == cfg.datasets["synthetic"].synthetic.rows
    assert cfg.datasets["criteo_sample"].max_rows == 5000
    assert full.datasets["criteo_sample"].max_rows is None
    assert cfg.experiments.het_cache.batch_size < full.experiments.het_cache.batch_size
    assert cfg.models["wdl"].embedding_dim < full.models["wdl"].embedding_dim


def test_every_size_lives_in_its_own_config() -> None:
    """No config file but the profiles defines a size for another: no ``${profile.`` anywhere,
    and the ci profile overrides only keys that exist in the default composition."""
    import yaml
    from omegaconf import OmegaConf

    for path in CONF_DIR.rglob("*.yaml"):
        assert "${profile." not in path.read_text(), path
    full = OmegaConf.to_container(compose([]), resolve=True)
    overrides = yaml.safe_load((CONF_DIR / "profile" / "ci.yaml").read_text())

    def leaves(node, prefix=()):
        for key, value in node.items():
            if isinstance(value, dict):
                yield from leaves(value, prefix + (key,))
            else:
                yield prefix + (key,)

    for key in leaves(overrides):
        node = full
        for part in key:
            assert isinstance(node, dict) and part in node, \
                f"ci overrides unknown key {'.'.join(key)}"
            node = node[part]


@pytest.mark.parametrize("group", ["dataset", "model", "cluster", "cache", "dispatch",
                                   "experiment", "profile"])
def test_every_group_option_validates(group: str) -> None:
    for option in sorted((CONF_DIR / group).glob("*.yaml")):
        if option.stem == "local":  # needs a path from the user
            with pytest.raises(ConfigError, match="dataset.path"):
                load([f"{group}={option.stem}"])
            continue
        load([f"{group}={option.stem}"])


def test_a_preset_points_its_stages_at_its_dataset() -> None:
    base = load([])
    cfg = load(["experiment=criteo_kaggle"])
    assert cfg.dataset.name == "criteo_kaggle" and "criteo_kaggle" in cfg.datasets
    assert cfg.pipeline.datasets == base.pipeline.datasets + ["criteo_kaggle"]
    for exp in (cfg.experiments.het_train, cfg.experiments.esd, cfg.experiments.combined,
                cfg.experiments.hotline):
        assert exp.dataset == "criteo_kaggle"
    # every other key is the stage's own: the preset overrides only what it names
    assert cfg.experiments.esd.per_worker == base.experiments.esd.per_worker
    small = load(["experiment=criteo_kaggle", "profile=ci"])
    assert small.experiments.esd.per_worker < cfg.experiments.esd.per_worker


def test_one_cache_size_per_paper() -> None:
    """HET's cache size is set once (experiments.het_cache.cache_ratio), ESD's once."""
    cfg = load(["experiments.het_cache.cache_ratio=0.2", "experiments.esd.cache_ratio=0.07"])
    assert cfg.cache.ratio == cfg.experiments.distributed_check.cache_ratio == 0.2
    assert cfg.experiments.combined.cache_ratio == 0.07
    assert cfg.experiments.distributed_check.esd_cache_ratio == 0.07


@pytest.mark.parametrize(("override", "message"), [
    ("cluster.bandwidth_gbps=[-1]",
     r"cluster.bandwidth_gbps\[0\] = -1.0: must be a finite number > 0"),
    ("cluster.bandwidth_gbps=[1,2,3]", r"cluster.bandwidth_gbps has 3 values"),
    ("cluster.workers=0", r"cluster.workers = 0: must be an integer >= 1"),
    ("cache.ratio=1.5", r"cache.ratio = 1.5: must be a number > 0.0 and <= 1.0"),
    ("cache.ratio=0", r"cache.ratio = 0.0?: must be a number > 0.0"),
    ("cache.policy=fifo", r"cache.policy = 'fifo': must be one of 'lru', 'lfu'"),
    ("dataset.synthetic.rows=-5", r"dataset.synthetic.rows = -5: must be an integer >= 10"),
    ("dataset.test_fraction=1.0", r"dataset.test_fraction = 1.0: must be a number > 0.0 and < 1.0"),
    ("dataset.source=ftp", r"dataset.source = 'ftp': must be one of 'synthetic', 'url', 'local'"),
    ("model.embedding_dim=abc", r"model.embedding_dim = 'abc': must be an integer"),
    ("experiments.dataset_stats.top_fractions=[0.1,2]",
     r"experiments.dataset_stats.top_fractions\[1\] = 2.0: must be in \(0, 1\]"),
    ("pipeline.datasets=[synthetic,nope]", r"pipeline.datasets names 'nope'"),
    ("+cache.typo=1", r"unknown key cache.typo: allowed keys"),
])
def test_bad_values_name_the_key_and_the_allowed_range(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load([override])


def test_unknown_dataset_name_is_rejected() -> None:
    with pytest.raises(ConfigError, match="dataset"):
        load(["dataset=no_such_dataset"])


def test_params_overrides_and_errors(tmp_path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(to_yaml(compose(["profile=ci"])))
    cfg = load(["cache.ratio=0.5"], params=params)
    assert cfg.cache.ratio == 0.5 and cfg.profile.name == "ci"
    with pytest.raises(ConfigError, match="is not key=value"):
        load(["dataset"], params=params)
    # a group's choice on a composed file: refused, never dropped for a later dataset.x=...
    with pytest.raises(ConfigError, match="dataset=local: a config group's choice.*leave "
                       "--params out.*--dataset NAME"):
        load(["dataset=local", "dataset.name=mine"], params=params)
    with pytest.raises(ConfigError, match="cache=lfu: a config group's choice"):
        load(["cache=lfu"], params=params)
    with pytest.raises(ConfigError, match="experiments.esd is a section of params.yaml, not a "
                       "value; set its keys"):
        load(["experiments.esd=3"], params=params)
    assert load(["cache={ratio: 0.25}"], params=params).cache.ratio == 0.25
    with pytest.raises(ConfigError, match="not found"):
        load(params=tmp_path / "missing.yaml")


def test_params_file_is_read_from_the_repository_root_wherever_the_process_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """JupyterLab starts kernels in notebooks/: "params.yaml" still means the repository's."""
    for cwd in (REPO_ROOT / "notebooks", tmp_path):
        monkeypatch.chdir(cwd)
        assert load(params="params.yaml") == load(params=PARAMS_FILE)
    with pytest.raises(ConfigError) as err:
        load(params="no_such_params.yaml")
    assert str(REPO_ROOT / "no_such_params.yaml") in str(err.value)  # names the path it tried
    assert "make params" not in str(err.value)  # the advice fits the file asked for


def test_committed_params_yaml_matches_conf() -> None:
    """dvc repro reads params.yaml, which DVC cannot tell is stale: it must equal compose(conf)."""
    composed = OmegaConf.to_container(compose(), resolve=True)
    assert yaml.safe_load(PARAMS_FILE.read_text()) == composed, \
        "params.yaml is stale: run `make params` and commit it"


def test_stage_cli_reports_config_errors_without_traceback() -> None:
    proc = subprocess.run([sys.executable, "-m", "workbench.stages", "download",
                           "cache.ratio=7"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 2
    assert "ConfigError: cache.ratio = 7.0: must be a number > 0.0 and <= 1.0" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_validate_accepts_plain_dicts() -> None:
    data = OmegaConf.to_container(compose(), resolve=True)
    data["seed"] = -1
    with pytest.raises(ConfigError, match="seed = -1"):
        validate(data)


def test_a_field_an_entry_lacks_is_that_fields_error_not_the_entrys() -> None:
    """``models.wdl.lr=0.1`` said "models has no entry 'wdl'" although wdl exists: the field
    lr is what is unknown."""
    from workbench.utils.validation import ConfigError

    with pytest.raises(ConfigError, match=r"unknown key models.wdl.lr: allowed keys of "
                                          r"models.wdl are \[.*'lr_dense'"):
        load(["models.wdl.lr=0.1"])
    with pytest.raises(ConfigError, match="models has no entry 'mine'.*write "
                                          r"\+models.mine.lr_dense"):
        load(["models.mine.lr_dense=0.1"])
