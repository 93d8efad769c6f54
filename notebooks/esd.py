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
# weighted by the row cost of the worker's own link) and the solvers follow
# `workbench/dispatch/cost_model.py` and `workbench/dispatch/hybriddis.py`. Reads `results/esd/<dataset>/` (the `esd` stage). Knobs:
# `workbench/conf/stages/esd.yaml` (dispatchers, sweeps, cache, links, solver mode and budget).

# %% tags=["parameters"]
params_file = "params.yaml"  # the composed config whose outputs are shown (from the repo root)
out_dir = None  # figures, tables, section.json; None: scratch/ (dvc repro: reports/)
dataset = None  # any preprocessed dataset (yours too); None: the pipeline's
# the live exploration at the end (not part of the report) starts at these; None: the config's
bandwidth_spread = None  # fastest / slowest edge link
cache_ratio = None  # cache rows per worker, share of the table
per_worker = None  # samples per worker per batch

# %%

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from workbench import claims
from workbench.claims import esd as esd_claims
from workbench.claims import register
from workbench.explorers import notebook_config
from workbench.report import palette
from workbench.report.plotting import THEME_MIN_PT, legend_below, set_theme
from workbench.report.sections import Section

set_theme()
cfg = notebook_config("esd", params_file, dataset, bandwidth_spread=bandwidth_spread,
                      cache_ratio=cache_ratio, per_worker=per_worker)
exp = cfg.experiments.esd
res = cfg.paths.resolve("results") / "esd" / exp.dataset
measured = claims.Results(cfg)  # the claims' measures and this notebook read the same files
claims_register = register.load()  # the paper's numbers: workbench/conf/claims.yaml
summary = esd_claims.runs(measured)["summary"]
cost = esd_claims.runs(measured)["cost"].copy()
decision = pd.read_csv(res / "decision.csv")
train = pd.read_csv(res / "train.csv")
section = Section(
    name="esd", title="ESD: expected-transmission-cost sample dispatching", out_dir=out_dir,
    config=cfg,
    intro=("**Our formalisation** (the paper's method section is unavailable): the cost of "
           "sending a sample to a worker counts its keys that the worker's HET cache lacks "
           "(miss pull), holds staler than the bound (update pull), the expected dirty "
           "evictions the misses cause, and the pushes other workers must make for keys dirty "
           "there, each weighted by seconds per row on that worker's link. Every ESD solver "
           f"optimises the **{exp.exact_mode}** model ("
           + ("each sample pays its own keys" if exp.exact_mode == "additive"
              else "a key shared by samples on one worker is paid once")
           + f"): `esd_exact` solves it exactly; `esd_heuristic` orders samples by regret "
           "(the gap between their cheapest and second-cheapest worker), places each greedily on "
           "its marginal cost, then swaps pairs of samples between workers while "
           f"that lowers the cost ({exp.heuristic_rounds} round(s)); `esd_greedy` is the plain "
           "greedy in batch order, kept to show how a cost-blind order fails; `hybriddis` runs "
           "the heuristic and, when the batch is small or the exact solver's predicted time "
           "fits the budget, the exact solver too, and keeps the cheaper plan. Baselines: "
           "`random`, `contiguous`, and Herald's LAIA on its own LRU snapshots. Every "
           f"dispatcher drives the same HET caches (LRU, bound {exp.bound}). Each run first "
           "warms its caches with its own dispatcher until every cache is full and the hit "
           f"rate of two {exp.warmup_window}-batch windows differs by at most "
           f"{exp.warmup_tolerance:g} (at most {exp.warmup_max} batches), then measures "
           f"{exp.batches} batches. *Transmission cost* = seconds of row transfers over each "
           "worker's own link, summed over workers, per batch; *makespan* = the slowest "
           "worker's communication seconds per batch (the BSP view)."))


def base_setting() -> str:
    return esd_claims.base_setting(measured)


# %% [markdown]
# ## Transmission cost per dispatcher across settings

# %%
sweeps = [("workers", "workers"), ("cache_ratio", "cache ratio"),
          ("spread", "bandwidth spread (max/min)"), ("per_worker", "samples per worker")]
# one style per dispatcher, the same in every panel: colour, marker and dash pattern all differ,
# and every other dispatcher has hollow markers, so lines that coincide (random and contiguous,
# esd_heuristic and hybriddis) stay visible on top of each other
DISPATCHERS = list(dict.fromkeys(cost["dispatcher"]))
# each dispatcher's colour is the report's (workbench.report.palette); (marker, line style,
# hollow) per known dispatcher, others cycle below
DISPATCH_COLOUR = palette.colors(DISPATCHERS)
_KNOWN_STYLE = {"random": ("o", "-", False), "contiguous": ("s", (0, (5, 2)), True),
                "laia": ("^", (0, (1, 1.5)), False), "esd_greedy": ("v", (0, (6, 2, 1, 2)), True),
                "esd_heuristic": ("D", "-", False), "esd_exact": ("P", (0, (5, 2)), True),
                "hybriddis": ("o", (0, (1, 1.5)), True)}
_CYCLE = [("h", (0, (3, 1, 1, 1)), False), ("<", (0, (8, 3)), True)]
DISPATCH_STYLE = {}
for i, disp in enumerate(DISPATCHERS):
    marker, dash, hollow = _KNOWN_STYLE.get(disp, _CYCLE[i % len(_CYCLE)])
    colour = DISPATCH_COLOUR[disp]
    DISPATCH_STYLE[disp] = {"color": colour, "marker": marker, "ls": dash,
                            "ms": 9 if hollow else 5, "mew": 1.4, "lw": 1.4,
                            "mfc": "none" if hollow else colour}
fig, axes = plt.subplots(2, 2, figsize=(10, 6.6))
for ax, (sweep, label) in zip(axes.flat, sweeps):
    part = cost[cost["sweep"] == sweep].sort_values(sweep)
    for disp in DISPATCHERS:
        line = part[part["dispatcher"] == disp]
        if len(line):
            ax.plot(line[sweep], line["transfer_s_per_batch"], label=disp,
                    **DISPATCH_STYLE[disp])
    ax.set(xlabel=label, ylabel="transmission cost (s / batch)",
           xscale="log" if sweep in ("cache_ratio", "spread") else "linear",
           title=f"sweep: {label}")
    if len(part):
        ticks = sorted(part[sweep].unique())
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
handles, labels = axes.flat[0].get_legend_handles_labels()
fig.legend(handles, labels, title="dispatcher",
           loc="outside right center")
section.figure(fig, "cost_sweeps",
               "Weighted embedding transmission cost per batch against workers, cache ratio, "
               "bandwidth heterogeneity and batch size (one knob per panel; one line style per "
               "dispatcher, the same in every panel)",
               setting="each panel varies one knob of the base setting: " + base_setting(),
               reads=[res / "cost.csv", res / "summary.json"])
# a sweep point: every knob; the budget sweep runs hybriddis alone (the budget changes no other
# dispatcher), so the comparisons across dispatchers leave it out
POINT = ["sweep", "workers", "cache_ratio", "spread", "per_worker", "capacity", "budget_fraction"]
compared = cost[cost["sweep"] != "budget"]
pivot = compared[compared["sweep"] != "base"].pivot_table(
    index=POINT, columns="dispatcher", values="transfer_s_per_batch").reset_index()
section.table(pivot, "cost_sweeps", "Transmission cost (s per batch) per setting and dispatcher",
              floatfmt=".4g",
              reads=[res / "cost.csv", res / "summary.json"])

# %% [markdown]
# ## Steady state and the base setting
#
# Costs are measured once the caches are full and their hit rate is stable; a point that did
# not get there within the warm-up cap is flagged (its costs still include cold-cache misses).

# %%
warm = cost.pivot_table(index=POINT, columns="dispatcher",
                        values="warmup_batches").reset_index()
section.table(warm, "warmup", "Warm-up batches until steady state per setting and dispatcher",
              floatfmt=".4g",
              reads=[res / "cost.csv"])
unsteady = cost[~cost["steady"].astype(bool)]
if len(unsteady):
    section.note("**Not at steady state** within the warm-up cap (" + str(exp.warmup_max)
                 + " batches): " + "; ".join(
                     f"{r.dispatcher} at {r.sweep} (W={r.workers}, cache {r.cache_ratio:g}, "
                     f"spread {r.spread:g}, b={r.per_worker}, {r.capacity} capacity, budget "
                     f"{r.budget_fraction:g}x)"
                     for r in unsteady.drop_duplicates(["dispatcher", *POINT]).itertuples()))
else:
    section.note("Every point reached steady state before it was measured.")
base_cost = cost[cost["sweep"] == "base"].set_index("dispatcher")
base_table = base_cost[["transfer_s_per_batch", "makespan_s_per_batch", "rows_per_batch",
                   "warmup_batches", "warm_hit_rate", "methods"]].reset_index()
section.table(base_table, "base_setting", "Base setting at steady state: cost, makespan and "
              "rows per batch per dispatcher", setting=base_setting(), floatfmt=".5g",
              reads=[res / "cost.csv", res / "summary.json"])
# the heuristic against the baselines wherever exact beats them, and its gap to exact
points = compared.pivot_table(index=POINT, columns="dispatcher",
                              values="transfer_s_per_batch")
quality = []
for idx, row in points.iterrows():
    for b in [d for d in ("random", "contiguous", "laia") if d in row]:
        if "esd_exact" in row and "esd_heuristic" in row and row["esd_exact"] < row[b]:
            quality.append({"point": " / ".join(map(str, idx)), "baseline": b,
                            "heuristic beats it": bool(row["esd_heuristic"] < row[b]),
                            "heuristic gap to exact": row["esd_heuristic"] / row["esd_exact"]
                            - 1})
quality = pd.DataFrame(quality)
if len(quality):
    section.table(quality, "heuristic_quality",
                  "esd_heuristic at every point where esd_exact beats a baseline: does the "
                  "heuristic beat it too, and its cost gap to exact", floatfmt=".3g",
                  reads=[res / "cost.csv"])

# %%
esd = esd_claims.dispatcher(measured)
baselines = [d for d in ("random", "contiguous", "laia") if d in exp.dispatchers]
reductions = []
for _, row in pivot.iterrows():
    for base_name in baselines:
        reductions.append({"baseline": base_name, "reduction": 1 - row[esd] / row[base_name],
                           "setting": f"{row['sweep']}: W={row['workers']}, cache "
                                      f"{row['cache_ratio']:g}, spread {row['spread']:g}, "
                                      f"b={row['per_worker']}, {row['capacity']} capacity"})
reductions = pd.DataFrame(reductions)
section.table(reductions.groupby("baseline")["reduction"].agg(["min", "mean", "max"])
              .reset_index(), "cost_reduction",
              f"Cost reduction of {esd} against each baseline over all sweep settings",
              floatfmt=".3f",
              reads=[res / "cost.csv"])
# The claim, in the committed setting (the base point) against LAIA, the strongest baseline;
# the link spread, cache size and worker count are its assumed parameters (their sweeps):
# workbench/claims/esd.py measures it
section.record(claims.measure(claims_register["esd.cost"], measured))
trend = reductions[reductions["baseline"] == (baselines[-1] if baselines else "random")]
section.note("**What makes ESD's gain grow or vanish** (reduction of " + esd + " against "
             + (baselines[-1] if baselines else "random") + " per sweep point): "
             + "; ".join(f"{r.setting}: {r.reduction:.1%}" for r in trend.itertuples())
             + ". The gain comes from sending each sample where its rows already are and the "
               "link is fast: it grows with the spread of link speeds (a 1x spread leaves only "
               "the cache term) and shrinks as caches grow (fewer misses to place) or as the "
               "batch per worker grows (each worker must take more of everything).")

# %% [markdown]
# ## Decision time against cost quality (base setting)

# %%
base_decision = decision[decision["sweep"] == "base"]
dec = base_decision.groupby("dispatcher").agg(decision_ms=("decision_s", lambda s: 1e3 * s.mean()),
                                         transfer_s=("transfer_s", "mean")).reset_index()
methods = base_decision.groupby("dispatcher")["method"].agg(lambda m: ", ".join(
    f"{k} x{v}" for k, v in m.value_counts().items())).rename("solver runs")
dec = dec.merge(methods, on="dispatcher")
fig, ax = plt.subplots(figsize=(5, 3.4))
sns.scatterplot(data=dec, x="decision_ms", y="transfer_s", hue="dispatcher", s=60,
                palette=DISPATCH_COLOUR, ax=ax)
ax.set(xscale="symlog", xlabel="decision time per batch (ms, wall clock)",
       ylabel="transmission cost (s / batch)")
legend_below(fig, ncol=3)
section.figure(fig, "decision_vs_cost", "Decision time against cost quality",
               setting=base_setting() + "; decision time is wall clock on this machine (not "
                       "part of the emulated clock: HybridDis overlaps it with compute)",
               reads=[res / "decision.csv", res / "cost.csv"])
section.table(dec, "decision_vs_cost", "Decision time and cost per dispatcher", floatfmt=".4g",
              reads=[res / "decision.csv", res / "cost.csv"])

# %% [markdown]
# ## HybridDis per batch: which solver ran, its time, the cost it gained
#
# The budget is the time a decision can hide behind: one iteration's compute of the train model
# on the calibrated clock, times a fraction (the budget sweep runs HybridDis at each fraction of
# `budget_sweep` on the base setting). HybridDis decides up to `hybrid_lookahead` batches ahead
# of the training, so the budget of the batches the heuristic decides is saved (up to that many
# budgets); the exact solver runs when the batch is small (N x W <= `small_instance`) or its
# predicted time fits the saved budget, so both solvers decide batches when the exact solver
# takes longer than one budget; the part of its time beyond the saving is charged to the
# emulated clock (`charged_s`). *Cost gained*: the realised cost against `esd_heuristic`'s on
# its own run, same batch index.

# %%
hyb = decision[(decision["dispatcher"] == "hybriddis")
               & decision["sweep"].isin(["base", "budget"])].copy()
if len(hyb):
    heur = base_decision[base_decision["dispatcher"] == "esd_heuristic"].set_index(
        "batch")["transfer_s"]
    hyb["solver"] = hyb["method"].str.split(">").str[0].str.split(":").str[0]
    hyb["budget"] = [f"{f:g}x = {1e3 * b:.2f} ms" for f, b in
                     zip(hyb["budget_fraction"], hyb["budget_s"])]
    grid = sns.relplot(data=hyb, x="batch", y=1e3 * hyb["decision_s"], hue="solver",
                       col="budget", kind="scatter", s=20, height=2.8, aspect=1.1)
    for ax, (_, part) in zip(grid.axes.flat, hyb.groupby("budget", sort=False)):
        ax.axhline(1e3 * float(part["budget_s"].iloc[0]), color="grey", ls="--", lw=0.8)
    grid.set_axis_labels("measured batch", "decision time (ms, wall)")
    section.figure(grid.figure, "hybriddis_per_batch", "HybridDis per batch at each budget: "
                   "the solver that ran and its wall time against the budget (dashed)",
                   setting=base_setting(),
                   reads=[res / "decision.csv"])
    per_budget = hyb.groupby(["budget_fraction", "budget_s"]).agg(
        exact_batches=("solver", lambda m: int((m == "exact").sum())),
        batches=("solver", "size"), decision_ms=("decision_s", lambda t: 1e3 * t.mean()),
        charged_ms=("charged_s", lambda t: 1e3 * t.mean()),
        transfer_s=("transfer_s", "mean")).reset_index()
    # what each solver's batches cost: decision wall time and realised transmission cost
    per_solver = hyb.groupby(["budget_fraction", "solver"]).agg(
        batches=("batch", "size"), decision_ms=("decision_s", lambda t: 1e3 * t.mean()),
        transfer_s=("transfer_s", "mean")).reset_index()
    section.table(per_solver, "hybriddis_solvers", "HybridDis per budget and solver: the "
                  "batches each decided, its mean decision time (wall) and the mean "
                  "transmission cost of its batches", setting=base_setting(), floatfmt=".4g",
                  reads=[res / "decision.csv"])
    per_budget["transfer + charged (s)"] = per_budget["transfer_s"] + \
        per_budget["charged_ms"] / 1e3
    if len(heur):
        per_budget["cost gained vs esd_heuristic"] = 1 - per_budget["transfer_s"] / heur.mean()
    section.table(per_budget, "hybriddis_budget", "HybridDis per budget: how often the exact "
                  "solver ran, the time charged to the clock, and the cost it gained",
                  setting=base_setting(), floatfmt=".4g",
                  reads=[res / "decision.csv"])
    per_batch = hyb[["budget_fraction", "batch", "method", "decision_s", "charged_s",
                     "transfer_s"]].copy()
    if len(heur):
        per_batch["cost gained vs esd_heuristic"] = 1 - per_batch["transfer_s"] / \
            per_batch["batch"].map(heur)
    section.table(per_batch, "hybriddis_per_batch", "HybridDis per batch and budget",
                  floatfmt=".4g",
                  reads=[res / "decision.csv"])

# %% [markdown]
# ## HybridDis' predictor of the exact solver's time
#
# HybridDis runs the exact solver on a batch when its *predicted* time fits the budget it has
# saved. The committed predictor is `a + b V` (V = N x W sample-worker variables), fitted by
# least squares to the exact solver's measured solves on this stage's sweeps
# (`benchmarks/exact_time_fit.py`, committed as `experiments.esd.exact_time_fit` so that the
# runs stay deterministic); the fixed prior of `exact_seconds_per_variable` per variable is the
# swept point. Below: this run's own solves (`exact_times.csv`, wall clock on this machine),
# both predictors and the fit's residuals on them, and what each predictor made HybridDis do.

# %%
solves = pd.read_csv(res / "exact_times.csv")
if len(solves) and exp.exact_time_fit is not None:
    fit_a, fit_b = exp.exact_time_fit
    solves["fitted_s"] = fit_a + fit_b * solves["variables"]
    solves["fixed_s"] = exp.exact_seconds_per_variable * solves["variables"]
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.9))
    axes[0].scatter(solves["variables"], 1e3 * solves["exact_s"], s=10, alpha=0.35,
                    color=palette.COLORS.get("esd_exact", "C0"),
                    label="the exact solver's solves (this run, wall)")
    grid_v = np.linspace(0, float(solves["variables"].max()) * 1.05, 64)
    axes[0].plot(grid_v, 1e3 * (fit_a + fit_b * grid_v), color="k",
                 label=f"fitted: {1e3 * fit_a:.2f} ms + {1e6 * fit_b:.3f} us x V (committed)")
    axes[0].plot(grid_v, 1e3 * exp.exact_seconds_per_variable * grid_v, color="grey",
                 ls="--", label=f"fixed prior: {1e6 * exp.exact_seconds_per_variable:g} us x V")
    axes[0].set(xlabel="variables V = samples x workers", ylabel="solve time (ms)",
                ylim=(0, 1e3 * float(solves["exact_s"].quantile(0.99)) * 1.6))
    axes[1].scatter(solves["variables"], 1e3 * (solves["exact_s"] - solves["fitted_s"]),
                    s=10, alpha=0.35, color=palette.COLORS.get("esd_exact", "C0"))
    axes[1].axhline(0, color="k", lw=0.8)
    axes[1].set(xlabel="variables V = samples x workers",
                ylabel="measured - fitted (ms)")
    legend_below(fig, ncol=2)
    section.figure(fig, "exact_time_fit",
                   "The exact solver's solve time against its size on this run's sweeps, the "
                   "committed fit HybridDis predicts with and the fixed prior, and the fit's "
                   "residuals (wall clock on this machine)",
                   setting=base_setting(), reads=[res / "exact_times.csv"])
    by_size = solves.groupby(["workers", "samples", "variables"]).agg(
        solves=("exact_s", "size"), measured_ms=("exact_s", lambda t: 1e3 * t.median()),
        fitted_ms=("fitted_s", lambda t: 1e3 * t.iloc[0]),
        fixed_ms=("fixed_s", lambda t: 1e3 * t.iloc[0])).reset_index()
    section.table(by_size, "exact_time_fit", "The exact solver's median solve time per size "
                  "against both predictors", floatfmt=".4g", reads=[res / "exact_times.csv"])
predicted = cost[(cost["sweep"] == "predictor") & (cost["dispatcher"] == "hybriddis")]
if len(predicted):
    laia_s = float(cost.loc[(cost["sweep"] == "base") & (cost["dispatcher"] == "laia"),
                            "transfer_s_per_batch"].iloc[0])
    section.table(predicted.assign(**{"reduction vs laia": 1 - predicted["transfer_s_per_batch"]
                                      / laia_s})[
        ["predictor", "methods", "charged_s_per_batch", "transfer_s_per_batch",
         "reduction vs laia"]], "hybriddis_predictor",
        "HybridDis at the base point under each predictor: the solvers that decided its "
        "batches, the decision time charged to the clock and the transmission cost",
        setting=base_setting(), floatfmt=".4g", reads=[res / "cost.csv"])

# %% [markdown]
# ## Capacity proportional to speed and link
#
# `equal`: every worker takes the same number of samples. `proportional`: each worker's share
# of the (unchanged) global batch follows its rate, so a fast edge worker takes more. The total
# cost is the paper's objective; the makespan (the slowest worker's communication per batch) is
# what a BSP iteration waits for.

# %%
cap_rows = cost[cost["sweep"] == "capacity"]
if len(cap_rows):
    cap_long = cap_rows.melt(id_vars=["dispatcher", "capacity"],
                             value_vars=["transfer_s_per_batch", "makespan_s_per_batch"],
                             var_name="objective", value_name="seconds per batch")
    grid = sns.catplot(data=cap_long, x="dispatcher", y="seconds per batch", hue="capacity",
                       col="objective", kind="bar", height=3, aspect=1.5, sharey=False)
    for ax in grid.axes.flat:
        ax.tick_params(axis="x", rotation=45)
    section.figure(grid.figure, "capacity", "Total cost and makespan per dispatcher with equal "
                   "and speed-proportional capacities", setting=base_setting(),
                   reads=[res / "cost.csv", res / "summary.json"])
    section.table(cap_rows[["dispatcher", "capacity", "capacities", "transfer_s_per_batch",
                            "makespan_s_per_batch"]], "capacity",
                  "Equal against proportional capacities (samples per worker, slowest link "
                  "first)", setting=base_setting(), floatfmt=".5g",
                  reads=[res / "cost.csv", res / "summary.json"])

# %% [markdown]
# ## The deduplicated ILP: up to which size it is exact
#
# `exact_mode: dedup` pays a key shared by several samples on one worker once. That objective is
# an ILP (HiGHS, started from the better of the regret + swap heuristic and the additive optimum,
# stopped at `time_limit_s`). The probe below cuts one steady-state batch of the base setting to
# growing sizes and asks HiGHS to prove optimality within the limit. When it cannot, the plan
# returned is named (`plan`): the MILP's own when it improved on its start, else the start.
# Whether a solve is proven depends on this machine's speed.

# %%
probe_path = res / "dedup_ilp.csv"
if probe_path.exists():
    probe = pd.read_csv(probe_path)
    proven = probe[probe["proven_optimal"].astype(bool)]
    largest = proven.iloc[-1] if len(proven) else None
    section.table(probe, "dedup_ilp", "The deduplicated ILP within its time limit: proven "
                  "optimal or not, its gap, the plan returned, and the heuristic against it",
                  setting=base_setting() + f"; time limit {exp.time_limit_s:g} s",
                  floatfmt=".4g",
                  reads=[probe_path])
    section.note(
        ("**The deduplicated ILP is exact** here up to "
         f"{int(largest['samples'])} samples x {int(largest['workers'])} workers"
         if largest is not None else "**The deduplicated ILP proved no size optimal**")
        + f" within {exp.time_limit_s:g} s; beyond that it returns its best plan unproven "
        f"(largest wall time {probe['wall_s'].max():.2f} s against the limit). On the whole "
        f"base batch it returned `{probe['plan'].iloc[-1]}`, HiGHS' gap "
        + ("unknown" if pd.isna(probe["mip_gap"].iloc[-1])
           else f"{probe['mip_gap'].iloc[-1]:.0%}")
        + ". Where it is proven, the regret + swap heuristic is within "
        + (f"{proven['heuristic_over_ilp'].max():.2%}" if len(proven) else "n/a")
        + f" of the optimum. The sweeps' `esd_exact` solves the {exp.exact_mode} problem "
        + ("(the transportation optimum: exact at every size, in milliseconds)."
           if exp.exact_mode == "additive" else "(this ILP)."))
    probe

# %% [markdown]
# ## Per-worker communication time per dispatcher (base setting)

# %%
comm_rows = []
for disp_name, row in base_cost.iterrows():
    for w, c in enumerate(map(float, str(row["worker_comm_s"]).split())):
        comm_rows.append({"dispatcher": disp_name, "worker": w, "comm_s": c})
comm_frame = pd.DataFrame(comm_rows)
fig, ax = plt.subplots(figsize=(7, 3.2))
sns.barplot(data=comm_frame, x="worker", y="comm_s", hue="dispatcher", palette=DISPATCH_COLOUR,
            ax=ax)
ax.set(xlabel="worker (slowest link first)", ylabel="communication s / batch")
legend_below(fig, ncol=4)
section.figure(fig, "worker_comm", "Per-worker communication time per batch: the BSP makespan "
               "is the tallest bar of each dispatcher", setting=base_setting()
               + f"; capacities: {exp.capacity}",
               reads=[res / "cost.csv", res / "summary.json"])

# %% [markdown]
# ## End to end: test AUC against emulated time

# %%
fig, ax = plt.subplots(figsize=(6, 3.6))
sns.lineplot(data=train, x="time_s", y="test_auc", hue="dispatcher", marker="o",
             markersize=3, palette=palette.colors(train["dispatcher"]), ax=ax)
target = summary["train"]["target_auc"]
ax.axhline(target, color="grey", ls="--", lw=0.8)
ax.set(xlabel="emulated time (s)", ylabel="test AUC")
legend_below(fig)
train_setting = esd_claims.train_setting(measured)
section.figure(fig, "auc_vs_time", "Test AUC against emulated time per dispatcher",
               setting=train_setting,
               reads=[res / "train.csv", res / "summary.json"])
runs = pd.DataFrame(summary["train"]["runs"])
runs["time_to_target_s"] = pd.to_numeric(runs["time_to_target_s"])
reference = float(runs.loc[runs["dispatcher"] == esd, "time_to_target_s"].iloc[0]) \
    if esd in set(runs["dispatcher"]) else np.nan
runs[f"speedup of {esd}"] = runs["time_to_target_s"] / reference
section.table(runs, "time_to_target", f"Time to test AUC {target} per dispatcher",
              setting=train_setting, floatfmt=".4g",
              reads=[res / "summary.json"])
others = runs[runs["dispatcher"] != esd]
# the regime: ESD's premise is that embedding transmission dominates the training cycle; the
# baseline's step split at the committed setting says whether these runs are in it
every_latency = esd_claims.runs(measured)["modes"].copy()
if "latency_ms" not in every_latency:  # results from before the latency sweep
    every_latency["latency_ms"] = exp.latency_ms
modes_all = every_latency[every_latency["latency_ms"] == exp.latency_ms]
modes = modes_all[modes_all["dense_scale"] == 1.0].drop(columns="dense_scale")
dense_mode = summary["train"]["dense_mode"]
base_runs = modes[(modes["spread"] == exp.bandwidth_spread) & (modes["dense_mode"] == dense_mode)]
baseline = esd_claims.SPEEDUP_BASELINE
split = base_runs[base_runs["dispatcher"].isin([baseline, esd])].set_index("dispatcher")
if "embedding_share" in split and baseline in split.index:
    split = split.assign(step_ms=1e3 * split["step_s"],
                         compute_share=1 - split["embedding_share"] - split["dense_share"])
    section.table(split[["step_ms", "embedding_share", "dense_share", "compute_share"]]
                  .reset_index(), "step_split", "The step at the committed setting: the share "
                  "of embedding transmission, dense synchronisation and compute",
                  setting=train_setting, floatfmt=".3g",
                  reads=[res / "train_modes.csv"])
    emb = float(split.loc[baseline, "embedding_share"])
    section.note(
        f"**The regime.** ESD's premise (its abstract) is that embedding transmission dominates "
        f"the training cycle. Here it is {emb:.0%} of {baseline}'s step "
        + ("(at least half: the premise holds); " if emb >= 0.5 else
           "(**less than half: the premise does not hold here**); ")
        + f"dense synchronisation ({summary['train']['dense_sync']}, over the slowest edge link "
        f"at {exp.max_bandwidth_gbps / exp.bandwidth_spread:g} Gb/s) "
        f"{float(split.loc[baseline, 'dense_share']):.0%}, which no dispatch can shorten. The "
        "maps below move both assumed parameters that set the split: the dense bytes and the "
        "links' latency (the ring pays it 2 (W - 1) times a step).")
if "speedup_vs_random" in modes_all and esd in set(modes_all["dispatcher"]):
    curve = modes_all[modes_all["dispatcher"] == esd].sort_values(["spread", "dense_scale"])
    curve["spread"] = "spread " + curve["spread"].map("{:g}".format)  # in numeric order
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, against in zip(axes, ("random", "laia")):
        column = f"speedup_vs_{against}"
        if column not in curve:
            ax.set_visible(False)
            continue
        sns.lineplot(data=curve, x="dense_share", y=column, hue="spread", style="dense_mode",
                     markers=True, dashes=True, sort=True, estimator=None,
                     units="dense_mode" if curve["dense_mode"].nunique() > 1 else None, ax=ax)
        paper_x = claims_register["esd.speedup"].paper_number
        ax.axhline(paper_x, color="k", ls=":", lw=1, label=f"paper: up to {paper_x:g}x [A]")
        ax.axhline(1.0, color="grey", lw=0.6)
        ax.set(xlabel="dense synchronisation / step", title=f"{esd} against {against}",
               ylabel=f"time-to-target speedup of {esd}", xlim=(-0.02, 1.0))
    legend_below(fig, ncol=4)
    section.figure(fig, "speedup_vs_dense_share",
                   f"End-to-end speedup of {esd} against the share of the step spent on dense "
                   "synchronisation, per dense mode and bandwidth spread; along each line the "
                   "dense bytes are scaled by "
                   + ", ".join(f"{x:g}" for x in sorted(set(curve["dense_scale"])))
                   + " (1 = the model's own, the rightmost point of each line; a what-if: a "
                     "smaller dense part or one synchronised off the edge links)",
                   setting=train_setting + "; every run trained at its spread and clocked in "
                                           "each mode and dense scale (exact: its traffic "
                                           "does not depend on time)",
                   reads=[res / "train_modes.csv"])
    section.table(modes, "train_modes", "End to end per dispatcher, spread and dense mode "
                  "(the model's own dense bytes, the base latency)", floatfmt=".4g",
                  reads=[res / "train_modes.csv"])
# the regime map: the speedup and the baseline's embedding share over dense bytes x latency
grid_runs = every_latency[(every_latency["spread"] == exp.bandwidth_spread)
                          & (every_latency["dense_mode"] == dense_mode)]
column = f"speedup_vs_{baseline}"
if column in grid_runs and grid_runs["latency_ms"].nunique() > 1 and "embedding_share" in grid_runs:
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (who, value, title, fmt) in zip(axes, (
            (esd, column, f"{esd} / {baseline} time to target", ".2f"),
            (baseline, "embedding_share", f"{baseline}: embedding transmission / step",
             ".0%"))):
        grid = grid_runs[grid_runs["dispatcher"] == who].pivot(
            index="dense_scale", columns="latency_ms", values=value).sort_index(ascending=False)
        sns.heatmap(grid, annot=True, fmt=fmt, cmap="viridis", ax=ax, cbar=False,
                    annot_kws={"fontsize": THEME_MIN_PT})
        ax.set(title=title, xlabel="link latency (ms)", ylabel="dense bytes (x the model's)")
        for i, scale in enumerate(grid.index):  # outline the committed cell
            for j, lat in enumerate(grid.columns):
                if scale == 1.0 and lat == exp.latency_ms:
                    ax.add_patch(plt.Rectangle((j, i), 1, 1, fill=False, lw=2, ec="k"))
    section.figure(fig, "regime_map", f"The regime: {esd}'s speedup over {baseline} (left) and "
                   f"{baseline}'s share of embedding transmission in its step (right) over the "
                   "dense bytes and the links' latency, at the base spread in the "
                   f"`{dense_mode}` mode (every run reclocked; outlined: the committed setting); "
                   "the paper's premise is the region where the right map is at least 50%",
                   setting=train_setting,
                   reads=[res / "train_modes.csv"])
# a decision that overruns its budget (one iteration's compute) is charged to the clock: say how
# much of the end-to-end time that is, since it can reverse the speedup at small batches
overrun = esd_claims.decision_overrun(measured)
if overrun:
    section.note(f"**Decision time charged**: {overrun[2:]}.")
# The claim (register v7): HybridDis against LAIA over the replicates (seed + r: a new
# initialisation and data order each) at the base spread, at a target relative to the pair's
# final AUC (past the caches' warm-up), across the swept targets and in steady state; the
# spread, dense mode and dense bytes are its other assumed parameters (every run reclocked:
# train_modes.csv); workbench/claims/esd.py measures it
rep_table = esd_claims.replicate_table(measured)
if len(rep_table):
    against = esd_claims.SPEEDUP_BASELINE
    by_target = rep_table[rep_table["unit"] == esd_claims.UNITS[0]].pivot(
        index="delta", columns="replicate", values="speedup")
    by_target.loc["steady state"] = rep_table[rep_table["unit"] == esd_claims.UNITS[1]].set_index(
        "replicate")["speedup"]
    section.table(by_target.rename(columns=lambda r: f"replicate {r}").reset_index().rename(
                      columns={"delta": "target (final AUC minus)"}),
                  "train_replicates", f"{against} / {esd} per replicate (seed + r, a new data "
                  "order each) at the base spread: time to each target below the pair's final "
                  f"AUC (committed: {esd_claims.TARGET_OFFSET:g}), and the steady state's time "
                  f"per iteration past the caches' {esd_claims.warmup_iterations(measured)}-batch "
                  "warm-up", floatfmt=".4g", reads=[res / "train_replicates.csv"])
section.record(claims.measure(claims_register["esd.speedup"], measured))

# %%
section.save()

# %% [markdown]
# ## Explore (live, not part of the report)
#
# Everything above reads the pipeline's outputs in `results/`. The widgets below rerun a small
# variant live through `workbench.api`, in seconds: the dispatchers of the end-to-end runs on
# ESD's edge cluster at the chosen bandwidth spread, cache size and batch, warmed and then
# measured for 10 batches: transmission cost per batch. Nothing here goes into the report. Under
# papermill the cell runs once at the parameters' values (e.g. `-p bandwidth_spread ...`; None:
# the configuration's); in JupyterLab (`make notebooks lab`) moving a widget reruns and redraws
# it.

# %%
from workbench import explorers

explorer = explorers.show("esd", cfg, bandwidth_spread=bandwidth_spread, cache_ratio=cache_ratio,
                          per_worker=per_worker)
