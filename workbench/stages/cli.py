"""The stages' command line: ``python -m workbench.stages <stage> [options] [overrides]``
(also ``workbench stage ...``).

The stage list and each stage's help line come from [`workbench.stages.registry.STAGES`][].
A user error ([`UserError`][workbench.utils.errors.UserError]: a bad config value, a missing
dataset, a malformed input row, ...) prints one line, ``<Class>: <message>``, and exits non-zero; so
does a full disk that a stage did not name itself (``DiskFullError: disk full: ...``). Anything else
is a bug and keeps its traceback. Ctrl-C, SIGTERM and SIGHUP unwind the stage (its temporary files
removed, its previous output untouched) and exit 130, 143 and 129 with one line.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import textwrap
from pathlib import Path
from typing import NoReturn

from workbench.config import WorkbenchConfig, load
from workbench.stages.costs import Meter
from workbench.stages.reads import check_overrides_read
from workbench.stages.registry import STAGES, Stage, StageRun
from workbench.utils.errors import UserError, one_line
from workbench.utils.io import DiskFullError, is_disk_full
from workbench.utils.paths import REPO_ROOT, cli_path
from workbench.utils.signals import exit_on_signals, wraps_interrupt

log = logging.getLogger("workbench.stages")

_OPTIONS = """\
Common options: ``--params params.yaml`` reads the composed config DVC tracks (dvc.yaml passes
it); without it ``workbench/conf/`` is composed. ``--dataset NAME`` picks ``datasets.NAME``; a
Hydra override ``dataset=<name>`` (``criteo_kaggle``, or ``local`` with ``dataset.path=...``)
picks that dataset, for every stage alike. Without either, a stage with its own dataset key
(het-train, het-time, esd, combined, hotline, distributed-check) runs on it and the others on
the ``dataset`` group's default. ``--offline`` (download) never touches the network.
Everything after the options is a Hydra override, e.g.
``python -m workbench.stages prepare dataset=movielens_1m dataset.max_rows=1000``."""


def _description() -> str:
    width = max(len(name) for name in STAGES)
    lines = []
    for stage in STAGES.values():
        lines += textwrap.wrap(f"{stage.summary} -> {stage.output}", 96,
                               initial_indent=f"  {stage.name:<{width}}  ",
                               subsequent_indent=" " * (width + 6))
    return "Run one pipeline stage.\n\nStages:\n" + "\n".join(lines) + "\n\n" + _OPTIONS


def stage_name(text: str) -> str:
    """The registry's name of stage ``text``, which may be spelt with ``_`` (as its results,
    notebooks and config keys are: ``het_cache``) or ``-`` (``het-cache``).

    Raises:
        argparse.ArgumentTypeError: no such stage (the closest name and every name).
    """
    import difflib

    name = text.replace("_", "-")
    if name in STAGES:
        return name
    close = difflib.get_close_matches(name, list(STAGES), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise argparse.ArgumentTypeError(f"no stage {text!r}: {hint}the stages are "
                                     + ", ".join(STAGES))


def _field_rows(cls: type, value: object, prefix: str) -> list[tuple[str, str, str]]:
    """``(key, value, allowed)`` for every setting of the config section ``value`` (a
    dataclass of type ``cls``), nested sections flattened."""
    import dataclasses
    import typing

    from workbench.utils.validation import range_text

    rows = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key, current = f"{prefix}.{f.name}", getattr(value, f.name)
        if dataclasses.is_dataclass(current):
            rows += _field_rows(type(current), current, key)
            continue
        tp = hints[f.name]
        allowed = ("one of " + ", ".join(map(str, typing.get_args(tp)))
                   if typing.get_origin(tp) is typing.Literal
                   else range_text(dict(f.metadata)).strip())
        if "nonempty" in f.metadata:
            allowed = ("non-empty; " + allowed).strip("; ")
        rows.append((key, str(current), allowed))
    return rows


def stage_help(stage: Stage, cfg: WorkbenchConfig, prog: str) -> str:
    """``<prog> <stage> --help``: what the stage does and writes, and its own settings with their
    values (from the config given: ``--params`` or ``workbench/conf/``) and allowed ranges."""
    lines = [f"usage: {prog} {stage.name} [--params FILE] [--dataset NAME] [key=value ...]", "",
             f"{stage.summary} -> {stage.output}", ""]
    if stage.config is None:
        lines.append("It has no settings of its own: the dataset's (dataset.*, or --dataset "
                     "NAME for datasets.NAME) and paths.* apply.")
        return "\n".join(lines)
    section = getattr(cfg.experiments, stage.config)
    rows = _field_rows(type(section), section, f"experiments.{stage.config}")
    width = max(len(k) for k, _, _ in rows)
    lines.append("Its settings (override any with key=value; the values shown are this "
                 "config's):")
    for key, value, allowed in rows:
        shown = value if len(value) <= 60 else value[:57] + "..."
        lines.append(f"  {key:<{width}}  {shown}" + (f"   ({allowed})" if allowed else ""))
    lines += ["", _OPTIONS.replace("``", "`")]
    return "\n".join(lines)


def parser(prog: str = "python -m workbench.stages") -> argparse.ArgumentParser:
    """The argument parser (its help lists every stage of the registry)."""
    p = argparse.ArgumentParser(prog=prog, description=_description(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stage", type=stage_name, choices=list(STAGES), metavar="stage",
                   help="one of: " + ", ".join(STAGES) + " (or with _ for -)")
    p.add_argument("name", nargs="?", default=None,
                   help="notebook name (for the notebook stage)")
    p.add_argument("--params", type=cli_path, default=None,
                   help="read this composed params file instead of composing workbench/conf/")
    p.add_argument("--dataset", default=None, help="use datasets.<NAME> from the config")
    p.add_argument("--offline", action="store_true",
                   help="download: never use the network (use files already in place)")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. dataset=avazu")
    return p


def _picked(args: argparse.Namespace) -> bool:
    """Whether the command line picked a dataset (``--dataset`` or a ``dataset=`` override)."""
    return args.dataset is not None or any(
        o.split("=", 1)[0].lstrip("+~") == "dataset" for o in args.overrides)


def run(argv: list[str] | None = None, prog: str = "python -m workbench.stages") -> Path:
    """Parse ``argv``, validate the config, run the stage; return its output path.

    Raises:
        UserError: the config, the dataset or the input is wrong (shown as one line by
            [`main`][]).
    """
    from workbench.utils.logs import setup

    argv = list(sys.argv[1:] if argv is None else argv)
    asked = [a for a in argv if not a.startswith("-") and "=" not in a]
    if asked and {"-h", "--help"} & set(argv):  # the stage's own help, not the global one
        known, _ = parser(prog).parse_known_args([asked[0]])
        params = argv[argv.index("--params") + 1] if "--params" in argv[:-1] else None
        print(stage_help(STAGES[known.stage], load([], cli_path(params) if params else None),
                         prog))
        raise SystemExit(0)
    args = parser(prog).parse_intermixed_args(argv)
    if args.name is not None and "=" in args.name:  # an override, not a notebook name
        args.overrides.insert(0, args.name)
        args.name = None
    stage = STAGES[args.stage]
    if args.name is not None and stage.name != "notebook":
        raise UserError(f"{args.name!r}: an override is key=value (e.g. {args.name}=...); "
                        "only the notebook stage takes a name")
    cfg = load(args.overrides, args.params)
    picked = _picked(args)
    ds = stage.dataset_of(cfg, args.dataset, picked)
    check_overrides_read(REPO_ROOT / "dvc.yaml", stage, cfg,
                         ds.name if stage.datasets else None, args.overrides)
    setup(cfg.log_level, role=stage.name + (f"@{ds.name}" if stage.per_dataset else ""))
    bars = cfg.profile.progress and sys.stderr.isatty()  # a log file or a pipe gets log lines
    if not bars:
        os.environ["TQDM_DISABLE"] = "1"
    # the pipeline's own run (no --dataset, no override of its dataset) keeps the dvc.yaml id;
    # a run on another dataset records under <stage>@<dataset>, never over the committed record
    own = (None if stage.datasets or (not picked and not args.overrides) else
           stage.dataset_of(load([], args.params) if args.overrides else cfg, None, False).name)
    meter = Meter(stage_id(stage, ds.name, args.name, own))
    out = stage.run(StageRun(cfg, ds, picked=picked, params=args.params, name=args.name,
                             offline=args.offline, overrides=tuple(args.overrides),
                             progress_bars=bars))
    if stage.in_dvc and stage.costed:
        meter.record(costs_root(cfg, stage), out)
    return out


def costs_root(cfg: WorkbenchConfig, stage: Stage) -> Path:
    """Where a run's cost record goes: the data root for a stage with an output under ``data/``
    (``download``, ``preprocess``, ``dedup``: those outputs are not committed, so a fresh clone
    reruns the stage, and its record must not be committed either), else the results root
    (committed with the results)."""
    return cfg.paths.resolve("data" if stage.writes_data else "results")


def stage_id(stage: Stage, dataset: str, name: str | None, own: str | None = None) -> str:
    """The stage's name in ``dvc.yaml``: ``<stage>@<item>`` for a matrix stage (per dataset, or
    per notebook), else ``<stage>``; a single-dataset stage run on another dataset than its own
    (``own``: the dataset the pipeline runs it on) is ``<stage>@<dataset>``, so its cost record
    never replaces the pipeline run's."""
    if stage.name == "notebook" and name:
        return f"notebook@{name}"
    if stage.datasets or (own is not None and dataset != own):
        return f"{stage.dvc_name}@{dataset}"
    return stage.dvc_name


def _previous_output() -> str:
    """What is true of a stopped stage's previous output: untouched when run by itself; under
    DVC, which deletes it before the command runs, put back by the runner (``make repro``) or
    by git."""
    if not os.environ.get("DVC_STAGE"):
        return "its previous output is untouched"
    if os.environ.get("WORKBENCH_REPRO"):  # workbench.repro.RUNNER_ENV (a higher layer)
        return ("DVC removed its previous output before it started, and the runner (make "
                "repro) puts it back")
    return ("DVC removed its previous output before it started (git checkout brings a "
            "committed one back; make repro keeps it)")


def _interrupted() -> NoReturn:
    """Exit 130 with one line that says what is true of the stage's previous output."""
    print(f"interrupted: the stage stopped; its temporary files are removed and "
          f"{_previous_output()} (run it again to finish)", file=sys.stderr)
    sys.exit(130)


def main(argv: list[str] | None = None, prog: str = "python -m workbench.stages") -> None:
    """Entry point: a user error prints one line and exits with status 2 (no traceback)."""
    try:
        with exit_on_signals():  # SIGTERM/SIGHUP unwind as Ctrl-C does: temporaries removed
            out = run(argv, prog)
    except KeyboardInterrupt:
        _interrupted()
    except UserError as err:
        if wraps_interrupt(err):  # Hydra turned a Ctrl-C while composing into "bad override"
            _interrupted()
        print(one_line(err), file=sys.stderr)
        sys.exit(2)
    except SystemExit as stop:  # a signal (exit_on_signals), or argparse's own exit
        if stop.code in (143, 129):
            print(f"stopped by {'SIGTERM' if stop.code == 143 else 'SIGHUP'}: the stage's "
                  f"temporary files are removed and {_previous_output()}", file=sys.stderr)
        raise
    except Exception as err:  # a full disk is the user's to fix; anything else keeps its trace
        if wraps_interrupt(err):  # a Ctrl-C while a module loads (RuntimeError: __set_name__)
            _interrupted()
        if not is_disk_full(err):
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(one_line(DiskFullError(f"disk full: {first}; free space or set paths.data / "
                                     "paths.results elsewhere")), file=sys.stderr)
        sys.exit(2)
    try:
        shown: Path | str = out.relative_to(REPO_ROOT)
    except ValueError:
        shown = out
    log.info("done: %s", shown)
