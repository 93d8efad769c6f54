"""The explorers that train: HET, ESD, the distributed run and the mechanisms together, each a
few iterations of [`workbench.api.train`][] on the edge cluster, AUC against emulated time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import pandas as pd

from workbench import api
from workbench.config import WorkbenchConfig
from workbench.explorers.parts import (
    _choice,
    _combination,
    _first,
    _fit,
    _log,
    _or,
    check_knobs,
)
from workbench.report import palette
from workbench.report.explore import Explorer


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
