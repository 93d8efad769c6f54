"""The explorers that replay or count without training: the datasets' skew, HET's cache,
RecD's dedup, Hotline's hot tier and FlexShard's plans, each live through [`workbench.api`][]."""

from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd

from workbench import api
from workbench.arguments import ArgumentError
from workbench.cluster.config import CachePolicy
from workbench.config import WorkbenchConfig
from workbench.explorers.parts import (
    _choice,
    _first,
    _fit,
    _grid,
    _log,
    _mark,
    _or,
    _processed,
    check_knobs,
)
from workbench.report.explore import Explorer, dropdown


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
