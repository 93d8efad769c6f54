r"""The notebooks' exploration sections: one [`Explorer`][workbench.report.explore.Explorer] each.

Each notebook ends with ``explorers.show("<notebook>", cfg, <knob>=<parameter>, ...)``, below its
report and apart from it: the figures above read ``results/``; these rerun a small variant of the
experiment live through [`workbench.api`][], in seconds, whenever a widget moves. A knob given
as None starts at the configuration's value; a papermill parameter (``-p bandwidth_spread 100``)
starts it elsewhere, so a papermill run executes the live variant at that value.

The notebook registry ([`workbench.report.notebook_registry.NOTEBOOKS`][]) names each
explorer's knobs, their ranges and its live run; ``docs/notebooks.md`` shows them as a table
([`explorer_table`][workbench.report.notebook_registry.explorer_table]).

Every builder takes the configuration (``load(params=params_file)``: its paths are the data
read) and the knobs' initial values, and raises `FileNotFoundError` when the data it
needs is not there; [`show`][] turns that into a printed note. Sweeps (the het, hotline and
flexshard curves) run the configured grid plus the chosen value, which the plot marks.

A knob's initial value is checked before any work against [`KNOBS`][] (a config key's range,
written once in its schema): ``het(cfg, cache_ratio=5)`` stops with one line,
``ArgumentError: explorers.het: cache_ratio = 5.0: must be a number > 0.0 and <= 1.0 (as config
key experiments.het_cache.cache_ratio)``; a notebook checks its parameters (the same knobs) the
same way in its first cell ([`workbench.report.notebook.notebook_config`][]).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench import api
from workbench.arguments import Arg, ArgumentError, check
from workbench.cluster.config import CachePolicy
from workbench.config import WorkbenchConfig
from workbench.report import palette
from workbench.report.explore import Explorer, dropdown, log_slider
from workbench.report.notebook_registry import NOTEBOOKS
from workbench.utils.errors import UserError

__all__ = ["BUILDERS", "KNOBS", "check_knobs", "notebook_config", "show", "datasets", "het",
           "het_train", "esd", "recd", "hotline", "flexshard", "distributed", "combined"]

#: notebook -> its explorer's knobs that take a number or a fixed choice (the notebook's
#: parameters of the same names) -> what each accepts: a config key's type and range, or its
#: own (the notebook registry's, :data:`workbench.report.notebook_registry.NOTEBOOKS`). A knob
#: given as None starts at the configuration's value and is not checked.
KNOBS: dict[str, Mapping[str, Arg]] = {name: nb.knobs for name, nb in NOTEBOOKS.items()}


def check_knobs(name: str, where: str, **values: Any) -> None:
    """Check explorer ``name``'s knob values against [`KNOBS`][] (None: not checked).

    Args:
        name: the notebook.
        where: the messages' prefix (``"explorers.het"``; "" for none).
        values: knob -> value.

    Raises:
        ArgumentError: one line naming the knob, its value and the allowed range.
    """
    specs = KNOBS[name]
    check(where, **{k: (v, specs[k]) for k, v in values.items() if k in specs and v is not None})


def notebook_config(name: str, params_file: str | Path = "params.yaml",
                    dataset: str | None = None, **knobs: Any) -> WorkbenchConfig:
    """A notebook's first cell: its explorer's starting values checked, then its configuration.

    [`workbench.report.notebook.notebook_config`][] with the notebook's other parameters
    (its explorer's starting values; None: the configuration's) checked first, before any
    work, against their ranges.

    Raises:
        NotebookError: a knob is unknown or outside its range (naming the parameter, its value
            and the allowed range), or as [`workbench.report.notebook.notebook_config`][].
    """
    import inspect

    from workbench.report import notebook

    if knobs:
        if name not in BUILDERS:
            raise notebook.NotebookError(f"notebook {name!r} has no explorer, so no parameter "
                                         f"{sorted(knobs)}")
        accepted = [p for p in inspect.signature(BUILDERS[name]).parameters if p != "cfg"]
        unknown = sorted(set(knobs) - set(accepted))
        if unknown:
            raise notebook.NotebookError(
                f"notebook {name!r} has no parameter {unknown[0]!r}: its explorer's parameters "
                f"are {accepted} (and params_file, out_dir, dataset)")
        try:
            check_knobs(name, "", **knobs)
        except ArgumentError as err:
            raise notebook.NotebookError(
                f"notebook {name!r}: parameter {err}; set it in the parameters cell or with "
                "papermill -p, or None for the configuration's value") from None
    return notebook.notebook_config(name, params_file, dataset)


# -- helpers --------------------------------------------------------------------------------------
def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _log(value: float, lo_exp: float, hi_exp: float, label: str, step: float = 0.25):
    """A log slider over ``10 ** [lo_exp, hi_exp]``, widened to hold ``value``."""
    e = math.log10(value)
    return log_slider(value, min(lo_exp, math.floor(e)), max(hi_exp, math.ceil(e)), step, label)


def _choice(value: Any, options: Sequence[Any], label: str):
    """A dropdown over ``options`` and ``value`` (sorted, each once)."""
    return dropdown(value, sorted(set(options) | {value}), label)


def _combination(value: str, presets: Sequence[str], label: str):
    """A text box suggesting ``presets`` that takes any other value too (on Enter)."""
    import ipywidgets as w

    return w.Combobox(value=value, options=list(dict.fromkeys([value, *presets])),
                      ensure_option=False, continuous_update=False, description=label,
                      style={"description_width": "initial"})


def _grid(values: Iterable[float], chosen: float) -> list[float]:
    """The sweep: ``values`` and the chosen value, ascending, each once."""
    return sorted(set(values) | {chosen})


def _mark(ax, x: float, text: str) -> None:
    """A dashed vertical line at the chosen value of a sweep."""
    ax.axvline(x, color="0.3", ls="--", lw=0.8)
    ax.annotate(text, (x, 0.02), xycoords=("data", "axes fraction"), xytext=(3, 0),
                textcoords="offset points")


def _processed(cfg: WorkbenchConfig, names: Sequence[str]) -> list[str]:
    """The datasets among ``names`` that are preprocessed under the config's ``paths.data``."""
    return [n for n in names if api.preprocessed(cfg, n)]


def _first(cfg: WorkbenchConfig, names: Sequence[str]) -> str:
    """The first preprocessed dataset of ``names``.

    Raises:
        FileNotFoundError: none of them is.
    """
    found = _processed(cfg, names)
    if not found:
        raise FileNotFoundError(f"none of {list(names)} is preprocessed under "
                                f"{cfg.paths.resolve('data')} (dvc repro makes them)")
    return found[0]


# -- the builders ---------------------------------------------------------------------------------
def datasets(cfg: WorkbenchConfig, *, dataset: str | None = None, samples: int | None = None,
             top_fraction: float | None = None) -> Explorer:
    """HET Fig. 3 on the first samples of a dataset: the share of lookups by the top rows.

    Knobs: ``dataset`` (the preprocessed datasets of the pipeline), ``samples`` (train samples
    counted: a small sample understates the tail), ``top_fraction`` (marked on the curve;
    default: HET's claim, 10%).
    """
    check_knobs("datasets", "explorers.datasets", samples=samples, top_fraction=top_fraction)
    stats = cfg.experiments.dataset_stats
    names = _processed(cfg, cfg.pipeline.datasets)
    dataset = _or(dataset, names[0] if names else None)
    if dataset not in names:
        raise FileNotFoundError(f"dataset {dataset!r} is not preprocessed under "
                                f"{cfg.paths.resolve('data')} (preprocessed: {names})")
    sizes = [1024, 4096, 16384, 65536]
    samples = _or(samples, 16384)

    @cache
    def loaded(name: str) -> api.Data:
        return api.load(cfg, dataset=name, train_samples=max(*sizes, samples), test_samples=1)

    def run(dataset: str, samples: int, top_fraction: float) -> pd.DataFrame:
        data = loaded(dataset)
        grid = _grid(np.geomspace(1e-4, 1.0, 25).round(6), top_fraction)
        return api.access_skew(data.train.keys[:samples], data.rows, grid).assign(
            dataset=dataset, chosen=lambda f: f["fraction"] == top_fraction)

    def plot(frame: pd.DataFrame, ax) -> None:
        first = frame.iloc[0]
        ax.plot(frame["fraction"], frame["lookup_share"], marker=".",
                label=f"{first['dataset']}: {first['samples']:,} samples")
        ax.plot(frame["fraction"], frame["fraction"], color="grey", ls=":", label="uniform")
        ax.plot([stats.skew_claim_fraction], [stats.skew_claim_share], "k*", ms=8,
                label=f"HET: top {stats.skew_claim_fraction:.0%} -> "
                      f"{stats.skew_claim_share:.0%} (Criteo)")
        pick = frame[frame["chosen"]].iloc[0]
        _mark(ax, pick["fraction"], f"top {pick['fraction']:.2%}: {pick['lookup_share']:.1%}")
        ax.set(xscale="log", ylim=(0, 1.02), xlabel="fraction of embedding rows (most "
               "accessed first)", ylabel="share of lookups")
        ax.legend(loc="upper left")

    return Explorer(run, plot, {
        "dataset": _choice(dataset, names, "dataset"),
        "samples": _choice(samples, sizes, "train samples"),
        "top_fraction": _log(_or(top_fraction, stats.skew_claim_fraction), -4, 0, "top rows")},
        title="Access skew of the first samples of a dataset (live)")


def het(cfg: WorkbenchConfig, *, policy: str | None = None, cache_ratio: float | None = None,
        bound: int | None = None) -> Explorer:
    """HET's cache replay over cache sizes for one policy and staleness bound.

    Knobs: ``policy``, ``bound`` (s), ``cache_ratio`` (marked on the sweep: the experiment's
    cache ratios and the chosen one). Plots rows moved per key read and the miss rate over every
    read (cold start included: the full-cache miss rate is undefined when small runs never fill
    the caches; the title says from which cache ratio on they never fill).
    """
    check_knobs("het", "explorers.het", policy=policy, cache_ratio=cache_ratio, bound=bound)
    exp = cfg.experiments.het_cache
    data = api.load(cfg, dataset=_first(cfg, exp.datasets),
                    train_samples=min(65536, exp.max_samples or 65536), test_samples=1)
    _fit(data.name, len(data.train), exp.workers * exp.batch_size, 1)

    def run(policy: CachePolicy, bound: int, cache_ratio: float) -> pd.DataFrame:
        frame = pd.concat([api.replay_cache(data.train.keys, data.rows, policy=policy,
                                            cache_ratio=r, bound=bound, workers=exp.workers,
                                            per_worker=exp.batch_size, warn_cold=False)
                           for r in _grid([0.003, 0.01, 0.03, 0.3, *exp.cache_ratios],
                                          cache_ratio)], ignore_index=True)
        return frame.assign(dataset=data.name, chosen=frame["cache_ratio"] == cache_ratio)

    def plot(frame: pd.DataFrame, ax) -> None:
        for col, label in (("rows_moved_per_key", "rows moved (pulled + pushed)"),
                           ("miss_rate_all", "misses (every read)")):
            ax.plot(frame["cache_ratio"], frame[col], marker="o", label=label)
        pick = frame[frame["chosen"]].iloc[0]
        _mark(ax, pick["cache_ratio"], f"{pick['rows_moved_per_key']:.3f} rows / key")
        cold = frame.loc[frame["miss_rate"].isna(), "cache_ratio"]
        ax.set(xscale="log", ylim=(0, None), xlabel="cache size (share of the table)",
               ylabel="per key read", title=f"{data.name}, {pick['policy']} s = "
               f"{pick['bound']}, {exp.workers} workers x {exp.batch_size}, "
               f"{len(data.train):,} samples" + (f"\ncaches never fill from cache ratio "
                                                 f"{cold.min():g} on: cold start only"
                                                 if len(cold) else ""))
        ax.legend()

    return Explorer(run, plot, {
        "policy": _choice(_or(policy, exp.policy), exp.policies, "policy"),
        "bound": _choice(_or(bound, exp.claim_bound), [0, 10, 100, 1000, *exp.system_bounds],
                         "staleness bound s"),
        "cache_ratio": _log(_or(cache_ratio, exp.cache_ratio), -3, 0, "cache ratio")},
        title="HET cache replay over cache sizes (live)")


class TooLittleData(UserError):
    """A dataset too small for one iteration of an explorer: [`show`][] skips the section
    with this line instead of failing the notebook."""


def _fit(name: str, train_samples: int, per_step: int, steps: int) -> tuple[int, str]:
    """The iterations of ``per_step`` samples that ``train_samples`` hold, at most ``steps``,
    and the words saying so when fewer ("" when all ``steps`` fit).

    Raises:
        TooLittleData: not even one iteration fits.
    """
    fit = train_samples // per_step
    if fit < 1:
        raise TooLittleData(f"{name} has {train_samples:,} train samples, fewer than one "
                            f"iteration's {per_step:,} (workers x samples per worker of this "
                            "notebook's configuration): the live section needs a larger "
                            "dataset")
    if fit >= steps:
        return steps, ""
    return fit, f" (all {fit * per_step:,} of {name}'s train samples)"


def _trainer(cfg: WorkbenchConfig, dataset: str, steps: int, per_step: int,
             evals: Callable[[int], int], **knobs: Any
             ) -> tuple[Callable[..., pd.DataFrame], int, str]:
    """``train(system, mechanisms, **values)``: [`workbench.api.train`][] of ``steps``
    iterations of ``per_step`` samples of ``dataset`` with ``knobs`` and ``values``, its rows
    labelled ``system``, evaluated every ``evals(iterations)``; each setting runs once (a run is
    deterministic), so a baseline that no knob changes is not rerun. A dataset with fewer train
    samples runs the iterations they hold (`_fit`): also returned, with the words that
    say so in the title.

    Raises:
        TooLittleData: the dataset holds not even one iteration.
    """
    data = api.load(cfg, dataset=_first(cfg, [dataset]), train_samples=steps * per_step,
                    test_samples=2048)
    steps, fewer = _fit(data.name, len(data.train), per_step, steps)
    knobs["eval_every"] = evals(steps)

    @cache
    def one(mechanisms: tuple[str, ...], **values: Any) -> pd.DataFrame:
        return api.train(data, cfg, steps=steps, mechanisms=mechanisms, **{**knobs, **values})

    def train(system: str, mechanisms: Sequence[str], **values: Any) -> pd.DataFrame:
        return one(tuple(mechanisms), **values).assign(system=system)

    return train, steps, fewer


def _auc_vs_time(frame: pd.DataFrame, ax, title: str) -> None:
    """Test AUC against emulated time, one line per system (its time and bytes in the legend)."""
    colours = palette.colors(frame["system"])  # each system's colour in every figure
    for system, part in frame.groupby("system", sort=False):
        last = part.iloc[-1]
        ax.plot(part["time_s"], part["test_auc"], marker="o", color=colours[system],
                label=f"{system}: "
                f"{last['time_s']:.2f} s, {last['bytes'] / 1e6:,.1f} MB")
    ax.set(xlabel="emulated time (s)", ylabel="test AUC", title=title)
    ax.legend()


def het_train(cfg: WorkbenchConfig, *, bound: int | None = None,
              cache_ratio: float | None = None, steps: int = 16) -> Explorer:
    """HET training through ESD's edge cluster: test AUC against emulated time, with the cache
    (at the chosen bound and size) and without.

    Knobs: ``bound`` (s), ``cache_ratio``. The policy is the configuration's cache policy.
    """
    check_knobs("het_train", "explorers.het_train", bound=bound, cache_ratio=cache_ratio,
                steps=steps)
    exp, comb = cfg.experiments.het_train, cfg.experiments.combined
    policy = cfg.cache.policy if cfg.cache.policy in ("lru", "lfu", "lfuopt") else "lru"
    train, steps, fewer = _trainer(cfg, exp.dataset, steps, comb.workers * comb.per_worker,
                                   lambda n: max(1, n // 8), cache_policy=policy)

    def run(bound: int, cache_ratio: float) -> pd.DataFrame:
        return pd.concat([train("no cache", []), train("HET cache", ["het"], bound=int(bound),
                                                        cache_ratio=float(cache_ratio))],
                         ignore_index=True)

    def plot(frame: pd.DataFrame, ax) -> None:
        _auc_vs_time(frame, ax, f"{steps} iterations of {comb.workers} x {comb.per_worker} "
                     f"samples{fewer}, {policy}, links "
                     f"{comb.max_bandwidth_gbps / comb.bandwidth_spread:g}"
                     f"..{comb.max_bandwidth_gbps:g} Gb/s")

    return Explorer(run, plot, {
        "bound": _choice(_or(bound, exp.cache_bounds[-1]), [0, 10, 100, 1000, *exp.cache_bounds],
                         "staleness bound s"),
        "cache_ratio": _log(_or(cache_ratio, cfg.cache.ratio), -3, 0, "cache ratio")},
        title="HET training: AUC against emulated time, with and without the cache (live)")


def esd(cfg: WorkbenchConfig, *, bandwidth_spread: float | None = None,
        cache_ratio: float | None = None, per_worker: int | None = None) -> Explorer:
    """ESD's dispatchers on the edge cluster: transmission cost per batch at steady state.

    Knobs: ``bandwidth_spread`` (fastest / slowest link), ``cache_ratio``, ``per_worker``
    (samples per worker per batch). Dispatchers: the experiment's ``train_dispatchers``.
    """
    check_knobs("esd", "explorers.esd", bandwidth_spread=bandwidth_spread,
                cache_ratio=cache_ratio, per_worker=per_worker)
    exp = cfg.experiments.esd
    data = api.load(cfg, dataset=_first(cfg, [exp.dataset]), train_samples=16384,
                    test_samples=1)

    def run(bandwidth_spread: float, cache_ratio: float, per_worker: int) -> pd.DataFrame:
        return api.dispatch(data, exp.train_dispatchers, cfg, batches=10,
                            warmup_max=min(40, exp.warmup_max),
                            bandwidth_spread=float(bandwidth_spread),
                            cache_ratio=float(cache_ratio), per_worker=int(per_worker))

    def plot(frame: pd.DataFrame, ax) -> None:
        bars = ax.bar(frame["dispatcher"], frame["transfer_s_per_batch"],
                      color=list(palette.colors(frame["dispatcher"]).values()))
        base = float(frame["transfer_s_per_batch"].iloc[0])
        ax.bar_label(bars, [f"{v:.3g} s" + (f" ({v / base - 1:+.0%})" if i else "")
                            for i, v in enumerate(frame["transfer_s_per_batch"])])
        ax.set(ylabel="transmission cost (s / batch)", xlabel="",
               title=f"{data.name}, {exp.workers} workers; change against "
                     f"{frame['dispatcher'].iloc[0]}")

    return Explorer(run, plot, {
        "bandwidth_spread": _log(_or(bandwidth_spread, exp.bandwidth_spread), 0, 3,
                                 "bandwidth spread"),
        "cache_ratio": _log(_or(cache_ratio, exp.cache_ratio), -3, 0, "cache ratio"),
        "per_worker": _choice(_or(per_worker, exp.per_worker), [16, 32, 64, 128],
                              "samples / worker")},
        title="ESD: transmission cost per dispatcher (live)")


def recd(cfg: WorkbenchConfig, *, dedup_group: str | None = None,
         batch_size: int | None = None, batches: int = 16) -> Explorer:
    """RecD's dedup factor per batch of the session-clustered and the shuffled partitions.

    Knobs: ``dedup_group`` (the configured group, or one of its features alone), ``batch_size``.
    Reads ``data/partitions/<dataset>`` (the ``dedup`` stage) of the first RecD dataset that
    has them.
    """
    import json

    from workbench.data.partition import PARTITIONS_META, read_partitions

    check_knobs("recd", "explorers.recd", batch_size=batch_size, batches=batches)
    exp = cfg.experiments.recd
    root = cfg.paths.resolve("data") / "partitions"
    metas = [json.loads((root / n / PARTITIONS_META).read_text()) for n in exp.datasets
             if (root / n / PARTITIONS_META).exists()]
    meta = next((m for m in metas if m.get("available") and m.get("groups")), None)
    if meta is None:
        raise FileNotFoundError(f"no RecD partitions under {root} for {exp.datasets} "
                                "(the dedup stage writes them)")
    groups = {"+".join(g): g for g in meta["groups"]}
    groups.update({k: [k] for g in meta["groups"] for k in g if len(g) > 1})
    columns = sorted({k for g in meta["groups"] for k in g})
    layouts = {layout: read_partitions(root / meta["dataset"] / layout, columns)
               for layout in ("clustered", "shuffled")}

    def run(dedup_group: str, batch_size: int) -> pd.DataFrame:
        group = groups[dedup_group]
        return pd.concat([api.ikjt(table, group, [group], batch_size=int(batch_size),
                                   batches=batches).assign(layout=layout)
                          for layout, table in layouts.items()], ignore_index=True)

    def plot(frame: pd.DataFrame, ax) -> None:
        for layout, part in frame.groupby("layout", sort=False):
            ax.plot(part["batch"], part["dedup_factor"], marker="o",
                    label=f"{layout}: mean {part['dedup_factor'].mean():.2f}x")
        ax.set(ylim=(0, None), xlabel="batch (partition order)",
               ylabel="dedup factor (rows / unique rows)",
               title=f"{meta['dataset']}, group {frame['group'].iloc[0]}\nbatch "
                     f"{int(frame['rows'].iloc[0]):,}, window {meta['window']:,}")  # 2 lines:
        # one was wider than the figure and clipped on both sides
        ax.legend()

    first = next(iter(groups))
    if dedup_group is not None and dedup_group not in groups:
        raise ArgumentError(f"explorers.recd: dedup_group = {dedup_group!r}: must be one of "
                            f"{list(groups)}")
    return Explorer(run, plot, {
        "dedup_group": dropdown(_or(dedup_group, first), list(groups), "dedup group"),
        "batch_size": _choice(_or(batch_size, exp.train_batch_size), exp.batch_sizes,
                              "batch size")},
        title="RecD: dedup factor per batch, clustered against shuffled partitions (live)")


def hotline(cfg: WorkbenchConfig, *, hot_fraction: float | None = None,
            profile_rate: float | None = None) -> Explorer:
    """Hotline's hot set against the hot-memory budget: popular inputs and lookups that hit.

    Knobs: ``hot_fraction`` (the budget as a fraction of the table's rows; default: the
    experiment's ``budget_mb`` at full Criteo scale, scaled), ``profile_rate``.
    """
    check_knobs("hotline", "explorers.hotline", hot_fraction=hot_fraction,
                profile_rate=profile_rate)
    exp = cfg.experiments.hotline
    data = api.load(cfg, dataset=_first(cfg, [exp.dataset]), train_samples=65536,
                    test_samples=1)
    budget = exp.budget_mb * 2**20 / (exp.full_scale_rows * exp.full_scale_dim * 4)

    def run(hot_fraction: float, profile_rate: float) -> pd.DataFrame:
        frame = api.hot_tier(data.train.keys, data.rows,
                             _grid(exp.popularity_fractions, hot_fraction),
                             profile_rate=profile_rate)
        return frame.assign(chosen=frame["hot_fraction"] == hot_fraction)

    def plot(frame: pd.DataFrame, ax) -> None:
        for (profile, part), colour in zip(frame.groupby("profile", sort=False), ("C0", "C1")):
            for col, ls, what in (("popular_fraction", "-", "popular inputs"),
                                  ("lookup_hit_share", "--", "lookups hot")):
                ax.plot(part["hot_fraction"], part[col], ls=ls, marker=".", color=colour,
                        label=f"{what} ({profile})")
        pick = frame[frame["chosen"] & (frame["profile"] == "profile")].iloc[0]
        _mark(ax, pick["hot_fraction"], f"{pick['popular_fraction']:.1%} popular")
        ax.set(xscale="log", ylim=(0, 1.02), xlabel="hot-memory budget (fraction of the rows)",
               ylabel="share", title=f"{data.name}, {len(data.train):,} inputs, profile "
               f"{pick['profile_rate']:g}")
        ax.legend(loc="upper left")

    return Explorer(run, plot, {
        "hot_fraction": _log(_or(hot_fraction, budget), -3.5, 0, "hot fraction"),
        "profile_rate": _choice(_or(profile_rate, exp.profile_rate), [0.01, 0.05, 0.2, 1.0],
                                "profile rate")},
        title="Hotline: popular inputs against the hot-memory budget (live)")


def flexshard(cfg: WorkbenchConfig, *, replicated_fraction: float | None = None,
              devices: int | None = None, per_device: int | None = None) -> Explorer:
    """FlexShard's replicated tier: memory against all-to-all savings relative to RW.

    Knobs: ``replicated_fraction`` (marked on the curve of the experiment's fractions;
    default: the combined experiment's), ``devices``, ``per_device`` (samples per device).
    """
    check_knobs("flexshard", "explorers.flexshard", replicated_fraction=replicated_fraction,
                devices=devices, per_device=per_device)
    exp = cfg.experiments.flexshard
    dataset = _first(cfg, [exp.claims_dataset, *exp.datasets])
    topo = cfg.topology

    def run(replicated_fraction: float, devices: int, per_device: int) -> pd.DataFrame:
        frame = api.flexshard(cfg, _grid(exp.replicated_fractions, replicated_fraction),
                              dataset=dataset, devices=int(devices),
                              per_device=int(per_device))
        return frame.assign(chosen=frame["replicated_fraction"] == replicated_fraction)

    def plot(frame: pd.DataFrame, ax) -> None:
        ax.plot(frame["savings_vs_rw_ms"], frame["memory_vs_rw_mib"], marker="o", ms=3,
                label="replicated tier only (t2 = 0)")
        for _, r in frame.iloc[::2].iterrows():
            ax.annotate(f"{100 * r['replicated_fraction']:.2g}%",
                        (r["savings_vs_rw_ms"], r["memory_vs_rw_mib"]),
                        xytext=(2, 2), textcoords="offset points")
        pick = frame[frame["chosen"]].iloc[0]
        ax.plot([pick["savings_vs_rw_ms"]], [pick["memory_vs_rw_mib"]], "r*", ms=10,
                label=f"{100 * pick['replicated_fraction']:.2g}% = {pick['t1']:,} rows: "
                      f"{pick['memory_vs_rw_mib']:+.2f} MiB, {pick['savings_vs_rw_ms']:.3g} ms")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set(xlabel="all-to-all savings vs RW (ms / iteration)",
               ylabel="memory vs RW (MiB, largest device)",
               title=f"{dataset}: {pick['devices']} devices x {pick['per_device']} samples")
        ax.legend()

    devices_now = topo.nodes * topo.devices_per_node
    return Explorer(run, plot, {
        "replicated_fraction": _log(_or(replicated_fraction,
                                        cfg.experiments.combined.replicated_fraction),
                                    -3.5, -1, "replicated fraction", step=0.1),
        "devices": _choice(_or(devices, devices_now), [*exp.device_sweep, devices_now],
                           "devices"),
        "per_device": _choice(_or(per_device, exp.per_device_batch), [32, 128, 512, 2048],
                              "samples / device")},
        title="FlexShard: memory against all-to-all savings over the replicated fraction (live)")


def distributed(cfg: WorkbenchConfig, *, bandwidth_gbps: float | None = None,
                latency_ms: float | None = None, steps: int = 4) -> Explorer:
    """The emulated clock of the distributed check's small cluster on one link setting.

    Knobs: ``bandwidth_gbps`` and ``latency_ms`` of every worker's link (default: the check's
    first link). Plots emulated milliseconds per iteration (compute, communication) without a
    cache and with HET's; no process is spawned.
    """
    check_knobs("distributed", "explorers.distributed", bandwidth_gbps=bandwidth_gbps,
                latency_ms=latency_ms, steps=steps)
    exp = cfg.experiments.distributed_check
    per_worker = exp.batch_size // exp.workers
    train, steps, fewer = _trainer(
        cfg, cfg.experiments.het_train.dataset, steps, exp.batch_size, lambda n: n,
        workers=exp.workers,
        per_worker=per_worker, bandwidth_spread=1.0, cache_policy=exp.cache_policy,
        cache_ratio=exp.cache_ratio, bound=exp.bounds[-1])

    def run(bandwidth_gbps: float, latency_ms: float) -> pd.DataFrame:
        link = {"max_bandwidth_gbps": float(bandwidth_gbps), "latency_ms": float(latency_ms)}
        last = pd.concat([train("no cache", [], **link), train("HET cache", ["het"], **link)]
                         ).groupby("system", sort=False).tail(1)
        return pd.DataFrame({"system": last["system"],
                             "compute_ms": 1e3 * last["compute_s"] / last["iteration"],
                             "comm_ms": 1e3 * last["comm_s"] / last["iteration"],
                             "iteration_ms": 1e3 * last["time_s"] / last["iteration"]})

    def plot(frame: pd.DataFrame, ax) -> None:
        ax.barh(frame["system"], frame["compute_ms"], label="compute")
        ax.barh(frame["system"], frame["comm_ms"], left=frame["compute_ms"],
                label="communication")
        for y, total in enumerate(frame["iteration_ms"]):
            ax.annotate(f"{total:.1f} ms / iteration", (total, y), xytext=(3, 0),
                        textcoords="offset points", va="center")
        ax.set(xlabel="emulated ms per iteration",
               title=f"{exp.workers} workers x {per_worker} samples, {steps} iterations"
                     f"{fewer}")
        ax.legend(loc="lower right")

    return Explorer(run, plot, {
        "bandwidth_gbps": _log(_or(bandwidth_gbps, exp.bandwidth_gbps[0]), -2, 1,
                               "link Gb/s"),
        "latency_ms": _log(_or(latency_ms, exp.latency_ms[0]), -1, 2, "latency ms")},
        title="The emulated clock on one link setting, without and with HET's cache (live)")


def combined(cfg: WorkbenchConfig, *, mechanisms: str | Sequence[str] | None = None,
             bandwidth_spread: float | None = None, cache_ratio: float | None = None,
             hot_fraction: float | None = None, steps: int = 16) -> Explorer:
    """The mechanisms in one training run through ESD's edge cluster, against none of them.

    Knobs: ``mechanisms`` (any comma-separated set: ``"esd,het"``, ``"none"``, ...; default:
    every one of ``experiments.combined.mechanisms``; the box suggests none, each alone, all and
    all but each), ``bandwidth_spread``, ``cache_ratio`` (HET's) and
    ``hot_fraction`` (Hotline's). Plots test AUC against emulated time, bytes in the legend.
    """
    check_knobs("combined", "explorers.combined", bandwidth_spread=bandwidth_spread,
                cache_ratio=cache_ratio, hot_fraction=hot_fraction, steps=steps)
    exp = cfg.experiments.combined
    every = ",".join(exp.mechanisms)
    if mechanisms is not None and not isinstance(mechanisms, str):
        mechanisms = ",".join(mechanisms) or "none"
    train, steps, fewer = _trainer(cfg, exp.dataset, steps, exp.workers * exp.per_worker,
                                   lambda n: max(1, n // 8))

    def run(mechanisms: str, bandwidth_spread: float, cache_ratio: float,
            hot_fraction: float) -> pd.DataFrame:
        spread = {"bandwidth_spread": float(bandwidth_spread)}
        on = [m.strip() for m in mechanisms.split(",") if m.strip() not in ("", "none")]
        runs = [train("none", [], **spread)]
        if on:
            runs.append(train("+".join(on), on, cache_ratio=float(cache_ratio),
                              hot_fraction=float(hot_fraction), **spread))
        return pd.concat(runs, ignore_index=True)

    def plot(frame: pd.DataFrame, ax) -> None:
        _auc_vs_time(frame, ax, f"{steps} iterations of {exp.workers} x {exp.per_worker} "
                     f"samples{fewer} on {exp.dataset}")

    return Explorer(run, plot, {
        "mechanisms": _combination(_or(mechanisms, every), [
            "none", *exp.mechanisms, every,
            *(",".join(n for n in exp.mechanisms if n != m) for m in exp.mechanisms)],
            "mechanisms"),
        "bandwidth_spread": _log(_or(bandwidth_spread, exp.bandwidth_spread), 0, 3,
                                 "bandwidth spread"),
        "cache_ratio": _log(_or(cache_ratio, exp.cache_ratio), -3, 0, "cache ratio"),
        "hot_fraction": _log(_or(hot_fraction, exp.hot_fraction), -3.5, 0, "hot fraction")},
        title="The mechanisms together: AUC against emulated time, against none (live)")


#: notebook -> its explorer's builder
BUILDERS: dict[str, Callable[..., Explorer]] = {
    "datasets": datasets, "het": het, "het_train": het_train, "esd": esd, "recd": recd,
    "hotline": hotline, "flexshard": flexshard, "distributed": distributed,
    "combined": combined}


def show(name: str, cfg: WorkbenchConfig, **initial: Any) -> Explorer | None:
    """Build notebook ``name``'s explorer at ``initial`` (None: the config's value) and display
    it (its plot, and under it the values it ran with, updated on every rerun); print a note
    instead when its data is missing.

    Returns:
        The explorer (``explorer.update(knob=value)`` reruns it), or None when skipped.

    Raises:
        ArgumentError: no explorer is named ``name`` (the message lists them), or a knob is
            outside its range.
    """
    from IPython.display import display

    if name not in BUILDERS:
        raise ArgumentError(f"explorers.show: no explorer named {name!r}: the known explorers "
                            f"are {', '.join(BUILDERS)} (one per notebook)")
    try:
        explorer = BUILDERS[name](cfg, **initial)
    except (FileNotFoundError, TooLittleData) as err:
        print(f"Explore section skipped: {err}")
        return None
    display(explorer)  # the line under its plot says what it ran with, updated on every run
    return explorer
