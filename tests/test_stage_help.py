"""Help that helps: a stage's own settings, stage names with _ or -, "did you mean" for a
misspelt stage or key (never Hydra's "+key", which would add the typo)."""

from __future__ import annotations

import argparse

import pytest

from workbench.config import load
from workbench.stages import cli
from workbench.utils.paths import REPO_ROOT
from workbench.utils.validation import ConfigError


def test_a_stage_is_named_with_underscores_or_dashes_and_a_typo_gets_the_closest() -> None:
    assert cli.stage_name("het_cache") == cli.stage_name("het-cache") == "het-cache"
    with pytest.raises(argparse.ArgumentTypeError, match="no stage 'het_cach': did you mean "
                                                          "het-cache\\? the stages are download"):
        cli.stage_name("het_cach")


def test_stage_help_lists_its_own_keys_with_values_and_ranges(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.run(["esd", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m workbench.stages esd ")
    assert "experiments.esd.batches" in out and "(>= 1)" in out
    assert "experiments.esd.exact_mode" in out and "(one of additive, dedup)" in out
    assert "experiments.het_train" not in out  # only its own
    with pytest.raises(SystemExit):
        cli.run(["het_cache", "--params", str(REPO_ROOT / "params.yaml"), "--help"])
    assert "experiments.het_cache.cache_ratio" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.run(["download", "-h"])
    assert "no settings of its own" in capsys.readouterr().out


@pytest.mark.parametrize("params", [None, REPO_ROOT / "params.yaml"])
def test_a_misspelt_key_gets_did_you_mean_never_plus_key(params) -> None:
    with pytest.raises(ConfigError) as err:
        load(["experiments.esd.batchs=3"], params)
    text = str(err.value)
    assert text.startswith("unknown key experiments.esd.batchs: did you mean "
                           "experiments.esd.batches? allowed keys of experiments.esd are [")
    assert "+experiments" not in text
    with pytest.raises(ConfigError, match="did you mean experiments.esd\\?"):
        load(["experiments.esdd.batches=3"])
    with pytest.raises(ConfigError, match="to add one, write \\+datasets.mine.path="):
        load(["datasets.mine.path=x"])  # a new entry of a named mapping is added with +
