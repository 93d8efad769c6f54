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
# # The five mechanisms combined: an ablation on ESD's edge cluster
#
# **The composition is ours**: each mechanism is the one its own stage builds (ESD's, Hotline's
# and FlexShard's formalisations are ours too), trained together through one emulated cluster
# (`workbench/experiments/combined.py`). Reads `results/combined/<dataset>/` (the `combined`
# stage). Knobs: `workbench/conf/stages/combined.yaml` (which mechanisms, the pairs, the cache, the
# hot and replicated fractions; the links are ESD's base setting).

# %% tags=["parameters"]
params_file = "params.yaml"  # the composed config whose outputs are shown (from the repo root)
out_dir = None  # figures, tables, section.json; None: scratch/ (dvc repro: reports/)
dataset = None  # any preprocessed dataset (yours too); None: the pipeline's
# knobs of the live exploration at the end (None: the config's value)
mechanisms = None  # e.g. "esd,het,recd"
bandwidth_spread = None
cache_ratio = None
hot_fraction = None

# %%
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from workbench.explorers import notebook_config
from workbench.report.plotting import legend_below, set_theme
from workbench.report.sections import Section

set_theme()
cfg = notebook_config("combined", params_file, dataset, mechanisms=mechanisms,
                      bandwidth_spread=bandwidth_spread, cache_ratio=cache_ratio,
                      hot_fraction=hot_fraction)
exp = cfg.experiments.combined
res = cfg.paths.resolve("results") / "combined" / exp.dataset
summary = json.loads((res / "summary.json").read_text())
ablation = pd.read_csv(res / "ablation.csv")
train = pd.read_csv(res / "train.csv")
MECH = [m for m in ("esd", "het", "recd", "hotline", "flexshard") if m in exp.mechanisms]
setting = (f"{summary['dataset']} ({summary['table_rows']:,}-row table, "
           f"{summary['train_samples']:,} train samples), {exp.model.upper()}, {exp.workers} "
           f"workers x {exp.per_worker} samples, links {exp.max_bandwidth_gbps / exp.bandwidth_spread:g}"
           f"..{exp.max_bandwidth_gbps:g} Gb/s (spread {exp.bandwidth_spread:g}x); HET: "
           f"{exp.cache_policy.upper()} {exp.cache_ratio:.0%} s={exp.bound}; Hotline: hot "
           f"{exp.hot_fraction:.1%} of rows ({summary['replicated_rows']['hotline']:,}); "
           f"FlexShard: replicated {exp.replicated_fraction:.1%} "
           f"({summary['replicated_rows']['flexshard']:,}); ESD: {exp.esd_dispatcher}, off: "
           f"{exp.baseline_dispatcher}; clock: "
           + summary['clock']['describe'].replace("overlap prefetch", "overlap prefetch with "
                                                  "het on, none with het off"))
section = Section(
    name="combined", title="The mechanisms combined: ablation on the edge cluster",
    out_dir=out_dir, config=cfg,
    intro=("**Our composition** of the five mechanisms in one trainer on ESD's heterogeneous "
           "edge cluster (each mechanism as its own stage formalises it: ESD's, Hotline's and "
           "FlexShard's formalisations are ours). *esd*: HybridDis on the real caches' cost "
           f"model (off: {exp.baseline_dispatcher} dispatch). *het*: HET caches with bound s "
           "and the client's prefetch (off: no cache, every key pulled and pushed, no "
           "overlap: HET's Hybrid). *recd*: IKJT reads, each distinct key read once per worker "
           "and one summed update written per key. *hotline*: the hottest rows of a profile "
           f"({exp.profile_rate:.0%} of the inputs) up to the accelerator budget held by every "
           "worker, and the popular micro-batch's compute hiding the other rows' fetch. "
           "*flexshard*: FlexShard's replicated tier (rows ranked by Good-Turing access "
           "probability). Replicated rows are read locally and their updates join the dense "
           "AllReduce. **What does not carry over**: on an edge star (one PS, one device per "
           "worker, no peer links) FlexShard's per-node and row-sharded tiers have no "
           "counterpart, so its placement is its replicated tier; under HET's prefetch every "
           "compute already overlaps communication, so Hotline's micro-batch overlap only "
           "shows with het off. Emulated time is the calibrated clock: run-to-run noise is nil."))

# %% [markdown]
# ## The ablation table
#
# One row per run: every run trains the same model from the same parameters on the same
# samples. Bytes are summed over the workers. *PS bytes*: rows and keys between the workers and
# the parameter server; *AllReduce bytes*: the dense gradients plus the replicated rows'
# updates (a ring: each worker sends 2 (W-1)/W of the buffer).

# %%
MB = 1e6
base = ablation.set_index("run").loc["none"]
table = ablation[["run", "dispatcher", "bytes", "ps_bytes", "allreduce_bytes",
                  "replicated_sync_bytes", "lookup_rows", "time_s", "comm_s", "final_auc",
                  "time_to_target_s"]].copy()
for col in ("bytes", "ps_bytes", "allreduce_bytes", "replicated_sync_bytes"):
    table[col] = table[col] / MB
table = table.rename(columns={"bytes": "MB moved", "ps_bytes": "PS MB",
                              "allreduce_bytes": "AllReduce MB",
                              "replicated_sync_bytes": "of which replicated rows MB",
                              "lookup_rows": "rows looked up", "time_s": "emulated s",
                              "comm_s": "comm s", "final_auc": "test AUC",
                              "time_to_target_s": f"s to AUC {summary['target_auc']}"})
table["time vs none"] = ablation["time_s"] / base["time_s"]
table["PS bytes vs none"] = ablation["ps_bytes"] / base["ps_bytes"]
section.table(table, "ablation", "Each mechanism on and off, the configured pairs, all "
              "together, all but each: bytes moved, emulated time and test AUC",
              setting=setting, floatfmt=".4g",
              reads=[res / "ablation.csv", res / "summary.json"])

# %%
long = ablation.melt(id_vars="run", value_vars=["ps_bytes", "allreduce_bytes"],
                     var_name="traffic", value_name="MB")
long["MB"] /= MB
long["traffic"] = long["traffic"].map({"ps_bytes": "PS (rows, keys)",
                                       "allreduce_bytes": "AllReduce (dense + replicated)"})
split = ablation.melt(id_vars="run", value_vars=["compute_s", "comm_s", "decision_s"],
                      var_name="part", value_name="seconds")
fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.6), sharey=True)
order = list(ablation["run"])
sns.barplot(data=long, y="run", x="MB", hue="traffic", order=order, ax=axes[0])
axes[0].set(xlabel="MB moved (all workers)", ylabel="")
piv = split.pivot_table(index="run", columns="part", values="seconds").reindex(order)
left = np.zeros(len(piv))
for part, colour in zip(("compute_s", "comm_s", "decision_s"), sns.color_palette()[2:5]):
    axes[1].barh(range(len(piv)), piv[part], left=left, color=colour,
                 label=part.replace("_s", ""))
    left += piv[part].to_numpy()
axes[1].set(xlabel="emulated seconds (compute, communication, decision overrun)")
legend_below(fig, ncol=5)
section.figure(fig, "ablation", "Bytes moved and emulated time per run of the ablation",
               setting=setting,
               reads=[res / "ablation.csv", res / "summary.json"])

# %%
shown = ["none", *[f"{m} only" for m in MECH], "all"]
fig, ax = plt.subplots(figsize=(7, 3.8))
sns.lineplot(data=train[train["run"].isin(shown)], x="time_s", y="test_auc", hue="run",
             hue_order=shown, marker="o", markersize=3, ax=ax)
ax.axhline(summary["target_auc"], color="grey", ls="--", lw=0.8)
ax.set(xlabel="emulated time (s)", ylabel="test AUC")
legend_below(fig)
section.figure(fig, "auc_vs_time", "Test AUC against emulated time: none, each mechanism "
               "alone, all together", setting=setting,
               reads=[res / "train.csv"])

# %% [markdown]
# ## Interactions
#
# A mechanism's *gain* is the emulated time it saves: alone, against `none`; among the others,
# `all - m` against `all`. The pairs answer the questions directly: the interaction of a and b
# is `gain(a + b) - gain(a) - gain(b)` (negative: they overlap, the pair gains less than the
# sum; positive: they reinforce each other).

# %%
t = ablation.set_index("run")


def gain(on: str, off: str, col: str = "time_s") -> float:
    """Relative saving of run ``on`` against run ``off`` (positive: ``on`` is cheaper)."""
    return float(1 - t.loc[on, col] / t.loc[off, col])


rows = []
for m in MECH:
    alone = gain(f"{m} only", "none")
    among = gain("all", f"all - {m}") if f"all - {m}" in t.index else np.nan
    rows.append({"mechanism": m, "time saved alone": alone, "time saved among all": among,
                 "PS bytes saved alone": gain(f"{m} only", "none", "ps_bytes"),
                 "PS bytes saved among all": gain("all", f"all - {m}", "ps_bytes")
                 if f"all - {m}" in t.index else np.nan})
gains = pd.DataFrame(rows)
section.table(gains, "gains", "Each mechanism's saving alone and among all the others "
              "(time and PS bytes)", setting=setting, floatfmt=".3f",
              reads=[res / "ablation.csv"])
pair_rows = []
for a, b in exp.pairs:
    name = f"{a} + {b}"
    if name not in t.index:
        continue
    ga, gb, gab = gain(f"{a} only", "none"), gain(f"{b} only", "none"), gain(name, "none")
    pair_rows.append({"pair": name, "first alone": ga, "second alone": gb, "together": gab,
                      "sum of alone": ga + gb, "interaction": gab - ga - gb,
                      "first with the second on": gain(name, f"{b} only")})
pairs = pd.DataFrame(pair_rows)
if len(pairs):
    section.table(pairs, "interactions", "Pairs (first + second): time saved alone, together, "
                  "their interaction (together minus the sum), and the first's saving with the "
                  "second already on", setting=setting, floatfmt=".3f",
                  reads=[res / "ablation.csv"])
every = gain("all", "none")
total_alone = float(gains["time saved alone"].sum())
laia = gain("all", "all (laia)") if "all (laia)" in t.index else np.nan

# %%
lines = [f"**All together** save {every:.1%} of the emulated time of `none` "
         f"({t.loc['all', 'time_s']:.4g} s against {t.loc['none', 'time_s']:.4g} s), against "
         f"{total_alone:.1%} for the sum of the mechanisms alone: "
         + ("they add up" if abs(every - total_alone) < 0.02 else
            f"they do not add up (together minus the sum: {every - total_alone:+.1%})")
         + ". A negative saving is a slowdown."]
dense_share = float(t.loc["none", "allreduce_bytes"] / t.loc["none", "bytes"])
lines.append(f"**The dense AllReduce** carries {dense_share:.0%} of the bytes of `none`: it runs "
             "over the slowest edge link and no mechanism here shortens it; each mechanism "
             "acts on the embedding traffic that is left.")
for r in pair_rows:
    a, b = r["pair"].split(" + ")
    lines.append(f"**{r['pair']}**: {a} saves {r['first alone']:.1%} of the time alone and "
                 f"{r['first with the second on']:.1%} with {b} already on; together they save "
                 f"{r['together']:.1%} against {r['sum of alone']:.1%} for the sum "
                 f"(interaction {r['interaction']:+.1%}: "
                 + ("they overlap" if r["interaction"] < -0.005 else
                    "each helps the other" if r["interaction"] > 0.005 else "independent")
                 + ").")
recd_lookups = float(1 - t.loc["recd only", "lookup_rows"] / t.loc["none", "lookup_rows"]) \
    if "recd only" in t.index else np.nan
if "recd only" in t.index:
    lines.append(f"**RecD's dedup** cuts the rows looked up by {recd_lookups:.0%}, but the PS "
                 f"bytes by {gain('recd only', 'none', 'ps_bytes'):.1%}: each worker's read "
                 "of a batch already pulls a key once (the HET protocol reads the distinct keys), "
                 "so deduplication saves lookups and, with a cache, update-clock ticks (one per "
                 "key and iteration instead of one per occurrence), not wire bytes; the clock "
                 "has no per-lookup compute term, so the lookup saving does not show as time "
                 "(the RecD section measures it in wall time).")
if not np.isnan(laia):
    lines.append(f"**ESD against LAIA with everything else on**: {laia:+.1%} of the time "
                 f"(PS bytes {gain('all', 'all (laia)', 'ps_bytes'):+.1%}).")
for m in ("hotline", "flexshard"):
    if f"{m} only" in t.index:
        lines.append(f"**{m}'s replicated rows** ({summary['replicated_rows'][m]:,} rows, "
                     f"{summary['replicated_lookup_share'][m]:.0%} of the lookups, "
                     f"{summary['popular_fraction'][m]:.0%} of samples popular) cut PS bytes "
                     f"by {gain(f'{m} only', 'none', 'ps_bytes'):.1%} and add "
                     f"{t.loc[f'{m} only', 'replicated_sync_bytes'] / MB:.3g} MB to the "
                     f"AllReduce; time saved {gain(f'{m} only', 'none'):+.1%}. Without the "
                     "tier a worker moves only the hot rows its own samples touch, over its own "
                     "link, overlapped or not; with it every worker sends 2 (W-1)/W of the "
                     "union of the rows all workers touched, over the slowest link, after the "
                     "backward pass.")
for line in lines:
    section.note(line)  # shown rendered here, and in the report

# %%
section.save()

# %% [markdown]
# ## Explore (live, not part of the report)
#
# The tables above come from `results/`. The widgets below train a small variant live through
# `workbench.api` (seconds, on the first train samples): pick the mechanisms, the link spread,
# the cache ratio and the hot fraction, and see test AUC against emulated time and the bytes.

# %%
from workbench import explorers

explorer = explorers.combined(cfg, mechanisms=mechanisms, bandwidth_spread=bandwidth_spread,
                              cache_ratio=cache_ratio, hot_fraction=hot_fraction)
explorer
