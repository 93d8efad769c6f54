r"""Which configuration a stage reads, from its ``dvc.yaml`` entry: an override of anything
else is refused.

``dvc.yaml`` lists each stage's ``params`` (the keys of ``params.yaml`` whose change reruns it),
some written through the configuration (``models.${experiments.het_train.model}``) or the
matrix item (``datasets.${item.dataset}``). Resolved against the run's own configuration, they
are what the stage reads. An override whose top-level section some stage reads (``cache``,
``experiments``, ``models``, ``seed``, ...), or of ``model`` (which only the notebooks' live
explorers read), must name a key at, above or below one of them:

    het-long models.wdl.lr_dense=0.1    read   (models.wdl)
    het-long model.optimizer=sgd        refused: the stage reads models.wdl
    flexshard experiments.esd.workers=4 refused: the stage reads experiments.flexshard, topology
    esd cache=lfu                       refused: ESD builds its own LRU caches (no cache key)

Global settings (``paths``, ``profile``, ``log_level``, ``dataset`` and ``datasets`` of your
own data, ``pipeline``; ``fanout``, where configurations run, which never changes a result, by
the stages that fan out, [`FANOUT_STAGES`][]) and the stages that compose the whole
configuration (``notebook``, ``report``) are not checked; nor is anything outside a checkout
with its ``dvc.yaml``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from workbench.utils.validation import ConfigError

__all__ = ["stage_params", "check_overrides_read"]

#: Sections read by every stage that needs them, whatever dvc.yaml lists.
GLOBAL = frozenset({"paths", "profile", "log_level", "dataset", "datasets", "pipeline", "hydra",
                    "fanout"})
#: Stages that read the whole configuration.
WHOLE = frozenset({"notebook", "report"})
#: The stages that run independent configurations side by side through
#: [`fan_out`][workbench.utils.fanout.fan_out]: the only ones that read ``fanout``.
FANOUT_STAGES = frozenset({"het_long", "het_epoch"})
_REF = re.compile(r"\$\{([^}]+)\}")


@lru_cache(maxsize=2)
def _dvc_stages(path: Path) -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load(path.read_text()).get("stages", {}))


def stage_params(dvc_yaml: Path, dvc_name: str, cfg: Any, item: str | None) -> list[str] | None:
    """The configuration keys ``dvc_name`` reads, resolved against ``cfg`` (and the matrix
    ``item``); None when ``dvc.yaml`` has no such stage."""
    from workbench.stages.registry import config_value

    entry = _dvc_stages(dvc_yaml).get(dvc_name)
    if entry is None:
        return None
    keys = []
    for param in entry.get("params", []):
        if not isinstance(param, str):  # another params file: not the configuration
            continue

        def value(match: re.Match[str]) -> str:
            ref = match.group(1)
            if ref.startswith("item."):
                return str(item)
            return str(config_value(cfg, ref))

        keys.append(_REF.sub(value, param))
    return keys


def check_overrides_read(dvc_yaml: Path, stage: Any, cfg: Any, item: str | None,
                         overrides: tuple[str, ...] | list[str]) -> None:
    """Refuse, in one line, an override ``stage`` never reads (see the module docstring).

    Raises:
        ConfigError: the override, the stage and the keys it does read.
    """
    if stage.name in WHOLE or not stage.in_dvc or not dvc_yaml.is_file():
        return
    keys = stage_params(dvc_yaml, stage.dvc_name, cfg, item)
    if keys is None:
        return
    sections = _sections(dvc_yaml) | {"model"}
    for override in overrides:
        if "=" not in override:
            continue
        key = override.split("=", 1)[0].lstrip("+~")
        top = key.split(".")[0]
        if top == "fanout" and stage.dvc_name not in FANOUT_STAGES:
            raise ConfigError(f"override {override!r}: the {stage.dvc_name} stage runs no "
                              "configurations side by side, so it never reads fanout (read by "
                              f"{', '.join(sorted(FANOUT_STAGES))}); drop the override")
        if top in GLOBAL or top not in sections:
            continue  # a global setting (a preset, experiment=..., composes many: not checked)
        if any(key == k or key.startswith(f"{k}.") or k.startswith(f"{key}.") for k in keys):
            continue
        shown = ", ".join(sorted(keys)) or "none of the configuration's sections"
        raise ConfigError(f"override {override!r}: the {stage.dvc_name} stage never reads "
                          f"{key} (it reads {shown}){_suggest(override, keys)}")


def _sections(dvc_yaml: Path) -> set[str]:
    """The top-level configuration sections some stage of ``dvc_yaml`` reads."""
    return {p.split(".")[0] for entry in _dvc_stages(dvc_yaml).values()
            for p in entry.get("params", []) if isinstance(p, str)}


def _suggest(override: str, keys: list[str]) -> str:
    """``model.<x>=v`` (the explorers' model) as the stage's own model: ``models.<m>.<x>=v``."""
    key, value = override.split("=", 1)
    models = [k for k in keys if k.startswith("models.") and k.count(".") == 1]
    if key.lstrip("+~").startswith("model.") and models:
        return f"; the model it trains is {models[0]}: {models[0]}.{key.split('.', 1)[1]}={value}"
    return ""
