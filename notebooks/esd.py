# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # ESD: expected-transmission-cost sample dispatching (HybridDis)
#
# **The formalisation is ours**: the ESD paper's method section is not available, so the cost
# model (miss pulls, update pulls, expected dirty evictions, other workers' sync pushes, each
# weighted by the row cost of the worker's own link) and the solvers follow `DESIGN.md` §3.3 and
# `workbench/esd.py`. Reads `results/esd/<dataset>/` (the `esd` stage). Knobs:
# `conf/experiment/esd.yaml` (dispatchers, sweeps, cache, links, solver mode and budget).

# %% tags=["parameters"]
params_file = "params.yaml"  # the composed config of the run whose outputs are shown
out_dir = "reports/esd"  # where figures, tables and section.json go

# %%
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from workbench.config import load
from workbench.report import verdict
from workbench.report.plotting import set_theme
from workbench.report.sections import Claim, Section

set_theme()
cfg = load(params=params_file)
exp = cfg.experiments.esd
res = cfg.paths.resolve("results") / "esd" / exp.dataset
summary = json.loads((res / "summary.json").read_text())
cost = pd.read_csv(res / "cost.csv")
decision = pd.read_csv(res / "decision.csv")
train = pd.read_csv(res / "train.csv")
section = Section(
    name="esd", title="ESD: expected-transmission-cost sample dispatching", out_dir=out_dir,
    intro=("**Our formalisation** (the paper's method section is unavailable): the cost of "
           "sending a sample to a worker counts its keys that the worker's HET cache lacks "
           "(miss pull), holds staler than the bound (update pull), the expected dirty "
           "evictions the misses cause, and the pushes other workers must make for keys dirty "
           "there, each weighted by seconds per row on that worker's link. `esd_exact` solves "
           f"the {exp.exact_mode} problem exactly; `esd_heuristic` is greedy on marginal "
           "(deduplicated) costs; `hybriddis` runs the exact solver when the batch is small or "
           "its predicted time fits the budget, else the heuristic. Baselines: `random`, "
           "`contiguous`, and Herald's LAIA on its own LRU snapshots. Every dispatcher drives "
           f"the same HET caches (LRU, bound {exp.bound}). *Transmission cost* = seconds of "
           "row transfers over each worker's own link, summed over workers, per batch (first "
           f"{exp.warmup} batches left out)."))


def base_setting() -> str:
    return (f"{summary['dataset']} ({summary['table_rows']:,}-row table, D = "
            f"{summary['wire_dim']} on the wire), {exp.workers} workers x {exp.per_worker} "
            f"samples, cache {exp.cache_ratio:.0%} LRU s={exp.bound}, links "
            f"{exp.max_bandwidth_gbps / exp.bandwidth_spread:g}..{exp.max_bandwidth_gbps:g} "
            f"Gb/s (spread {exp.bandwidth_spread:g}x), {exp.batches} batches"
            + "".join(f"; {knob} {points} skipped (the data holds less than one batch for them)"
                      for knob, points in summary["skipped"].items()))


# %% [markdown]
# ## Transmission cost per dispatcher across settings

# %%
sweeps = [("workers", "workers"), ("cache_ratio", "cache ratio"),
          ("spread", "bandwidth spread (max/min)"), ("per_worker", "samples per worker")]
fig, axes = plt.subplots(1, 4, figsize=(13, 3.4))
for ax, (sweep, label) in zip(axes, sweeps):
    part = cost[cost["sweep"] == sweep]
    sns.lineplot(data=part, x=sweep, y="transfer_s_per_batch", hue="dispatcher", marker="o",
                 ax=ax, legend=ax is axes[-1])
    ax.set(xlabel=label, ylabel="transmission cost (s / batch)" if ax is axes[0] else "",
           xscale="log" if sweep in ("cache_ratio", "spread") else "linear")
axes[-1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1, 1))
section.figure(fig, "cost_sweeps",
               "Weighted embedding transmission cost per batch against workers, cache ratio, "
               "bandwidth heterogeneity and batch size",
               setting="each panel varies one knob of the base setting: " + base_setting())
pivot = cost[cost["sweep"] != "base"].pivot_table(
    index=["sweep", "workers", "cache_ratio", "spread", "per_worker"], columns="dispatcher",
    values="transfer_s_per_batch").reset_index()
section.table(pivot, "cost_sweeps", "Transmission cost (s per batch) per setting and dispatcher",
              floatfmt=".4g")

# %%
esd = "hybriddis" if "hybriddis" in exp.dispatchers else "esd_exact"
baselines = [d for d in ("random", "contiguous", "laia") if d in exp.dispatchers]
reductions = []
for _, row in pivot.iterrows():
    for base in baselines:
        reductions.append({"baseline": base, "reduction": 1 - row[esd] / row[base],
                           "setting": f"{row['sweep']}: W={row['workers']}, cache "
                                      f"{row['cache_ratio']:g}, spread {row['spread']:g}, "
                                      f"b={row['per_worker']}"})
reductions = pd.DataFrame(reductions)
best = reductions.loc[reductions["reduction"].idxmax()]
section.table(reductions.groupby("baseline")["reduction"].agg(["min", "mean", "max"])
              .reset_index(), "cost_reduction",
              f"Cost reduction of {esd} against each baseline over all sweep settings",
              floatfmt=".3f")
section.claim(Claim(
    paper="ESD", claim=f"lower embedding transmission cost than baselines ({esd})",
    paper_value="up to 36.76% [A]", measured=f"up to {best['reduction']:.1%} vs {best['baseline']}",
    setting=best["setting"] + f"; base: {base_setting()}",
    verdict=verdict.percent(best["reduction"], 0.3676),
    note="our formalisation of ESD; the largest reduction over every sweep setting and baseline "
         "(random, contiguous and Herald's LAIA on the same HET caches), as the paper's 'up to'",
    key="esd.cost"))

# %% [markdown]
# ## Decision time against cost quality (base setting)

# %%
dec = decision.groupby("dispatcher").agg(decision_ms=("decision_s", lambda s: 1e3 * s.mean()),
                                         transfer_s=("transfer_s", "mean")).reset_index()
methods = decision.groupby("dispatcher")["method"].agg(lambda m: ", ".join(
    f"{k} x{v}" for k, v in m.value_counts().items())).rename("solver runs")
dec = dec.merge(methods, on="dispatcher")
fig, ax = plt.subplots(figsize=(5, 3.4))
sns.scatterplot(data=dec, x="decision_ms", y="transfer_s", hue="dispatcher", s=60, ax=ax)
ax.set(xscale="symlog", xlabel="decision time per batch (ms, wall clock)",
       ylabel="transmission cost (s / batch)")
section.figure(fig, "decision_vs_cost", "Decision time against cost quality",
               setting=base_setting() + "; decision time is wall clock on this machine (not "
                       "part of the emulated clock: HybridDis overlaps it with compute)")
section.table(dec, "decision_vs_cost", "Decision time and cost per dispatcher", floatfmt=".4g")
dec

# %% [markdown]
# ## End to end: test AUC against emulated time

# %%
fig, ax = plt.subplots(figsize=(6, 3.6))
sns.lineplot(data=train, x="time_s", y="test_auc", hue="dispatcher", marker="o",
             markersize=3, ax=ax)
target = summary["train"]["target_auc"]
ax.axhline(target, color="grey", ls="--", lw=0.8)
ax.set(xlabel="emulated time (s)", ylabel="test AUC")
train_setting = (f"{exp.train_model.upper()} trained through the base edge cluster, "
                 f"global batch {exp.workers * exp.per_worker}; " + base_setting())
section.figure(fig, "auc_vs_time", "Test AUC against emulated time per dispatcher",
               setting=train_setting)
runs = pd.DataFrame(summary["train"]["runs"])
runs["time_to_target_s"] = pd.to_numeric(runs["time_to_target_s"])
reference = float(runs.loc[runs["dispatcher"] == esd, "time_to_target_s"].iloc[0]) \
    if esd in set(runs["dispatcher"]) else np.nan
runs[f"speedup of {esd}"] = runs["time_to_target_s"] / reference
section.table(runs, "time_to_target", f"Time to test AUC {target} per dispatcher",
              setting=train_setting, floatfmt=".4g")
others = runs[runs["dispatcher"] != esd]
speedup_claim = dict(paper="ESD", claim=f"end-to-end training speedup ({esd}, time to target "
                                        "AUC)", paper_value="up to 1.74x [A]",
                     setting=train_setting + f"; target AUC {target}", key="esd.speedup")
if len(others) and others[f"speedup of {esd}"].notna().any():
    top = others.loc[others[f"speedup of {esd}"].idxmax()]
    section.claim(Claim(
        **speedup_claim, measured=f"up to {top[f'speedup of {esd}']:.2f}x vs {top['dispatcher']}",
        verdict=verdict.factor(top[f"speedup of {esd}"], 1.74),
        note="our formalisation of ESD; the largest speedup over the baselines, as the paper's "
             "'up to'; emulated time, so run-to-run noise is nil"))
else:
    section.note(f"The target AUC {target} was not reached in this run, so no time-to-target "
                 "speedup is reported.")
    section.claim(Claim(**speedup_claim, measured="-", verdict=verdict.factor(
        None, 1.74, missing=f"{esd} or every baseline never reached the target AUC {target}")))
runs

# %%
section.save()
