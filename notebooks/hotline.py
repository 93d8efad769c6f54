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
# # Hotline: popular / non-popular micro-batches against the CPU-GPU hybrid and FAE
#
# **The formalisation is ours**: Hotline's method section is unavailable (the ISCA'24 and v1
# abstracts, FAE's public profiler). The popularity profile, the pipeline, the FAE baseline and
# the time model follow `workbench/data/popularity.py`,
# `workbench/training/hotline.py` and `workbench/cluster/accelerator_time.py`. Reads
# `results/hotline_popularity/<dataset>/` and `results/hotline/<dataset>/`. Knobs:
# `workbench/conf/stages/hotline.yaml` (budgets, batch sizes, schemes, the rows unit) and
# `workbench/conf/hardware/*.yaml` (the modelled servers).

# %% tags=["parameters"]
params_file = "params.yaml"  # the composed config whose outputs are shown (from the repo root)
out_dir = None  # figures, tables, section.json; None: scratch/ (dvc repro: reports/)
dataset = None  # any preprocessed dataset (yours too); None: the pipeline's
# the live exploration at the end (not part of the report) starts at these; None: the config's
hot_fraction = None  # hot-memory budget, fraction of the table's rows
profile_rate = None  # fraction of the inputs profiled

# %%
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from workbench import claims
from workbench.claims import hotline as hotline_claims
from workbench.claims import register
from workbench.cluster.accelerator_time import step_seconds
from workbench.cluster.config import HardwareConfig
from workbench.explorers import notebook_config
from workbench.report import palette
from workbench.report.plotting import legend_below, set_theme
from workbench.report.sections import Section, files, per_dataset
from workbench.training.hotline import MicroBatchCounts

set_theme()
cfg = notebook_config("hotline", params_file, dataset, hot_fraction=hot_fraction,
                      profile_rate=profile_rate)
exp = cfg.experiments.hotline
results = cfg.paths.resolve("results")
res = results / "hotline" / exp.dataset
summary = json.loads((res / "summary.json").read_text())
metrics = pd.read_csv(res / "metrics.csv")
steps = pd.read_csv(res / "steps.csv")
timeline = pd.read_csv(res / "timeline.csv")
sweep = pd.read_csv(res / "sweep.csv")
servers = summary["servers"]
claims_register = register.load()  # the paper's numbers: workbench/conf/claims.yaml
paper_v2 = claims_register["hotline.speedup"].paper_number  # [A], on average
SERVER_LABEL = {name: s["label"] for name, s in servers.items()}
LABELS = {r["scheme"]: r["label"] for r in summary["runs"]}
ORDER = [s for s in ["hybrid", "hotline", "hotline_online", "fae", "accel_only"] if s in LABELS]
main_server = exp.hardware[-1]  # the newest server (v2's generation by default)
v1_server = exp.hardware[0]


def setting() -> str:
    return hotline_claims.setting(claims.Results(cfg))


section = Section(
    name="hotline", title="Hotline: popular / non-popular micro-batch pipeline", out_dir=out_dir,
    config=cfg,
    intro=("**Our formalisation** (Hotline's method section is unavailable): a "
           f"{100 * exp.profile_rate:g}% profile of the train inputs, drawn with replacement "
           "(FAE), counts accesses per row; the hot set is the most-accessed rows that fit the "
           "accelerator budget (FAE's 128 / 256 / 512 MiB for the full Criteo Kaggle tables, "
           "scaled here by their fraction of the table bytes); an input is *popular* iff every "
           "lookup hits it. Each mini-batch is split into a popular and a non-popular "
           "micro-batch; the non-popular micro-batch's cold rows are gathered from host memory "
           "on a background thread (a CUDA side stream on a GPU) while the popular micro-batch "
           "computes; the dense parameters take one update per mini-batch, so the parameters "
           "equal the hybrid baseline's (tested). Baselines: the CPU-GPU hybrid (gather every "
           "row from host memory, send it, compute, write back), FAE (popular and non-popular "
           "inputs in separate mini-batches and phases, hot rows synced at each switch) and "
           "accelerator-only. **Measured** numbers are wall-clock on this machine, where the "
           "'accelerator' tier is a separate tensor store in the same DRAM and change from run "
           "to run; **modelled** numbers apply the time model to the same mini-batches with "
           "the rates of a V100- and an A100-class server: spec-sheet peaks with efficiencies "
           "and a host gather rate that are **our assumptions** (`workbench/conf/hardware/`)."))

# %% [markdown]
# ## Popular inputs against the hot-memory budget

# %%
pop_summaries, pop_data = per_dataset(results / "hotline_popularity",
                                      exp.popularity_datasets, ["popularity"], section)
pop = pop_data["popularity"]
pop_notes = [f"{name} ({s['train_samples']:,} inputs x {s['features']} features, "
             f"{s['table_rows']:,} rows; the profile saw {s['profiled_rows_seen']:,})"
             for name, s in pop_summaries.items()]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharex=True)
for ax, y, label in ((axes[0], "popular_fraction", "popular inputs (share)"),
                     (axes[1], "lookup_hit_share", "lookups hitting the hot set (share)")):
    sns.lineplot(data=pop.rename(columns={"profile": "hot set from"}), x="budget_fraction", y=y,
                 hue="dataset", style="hot set from", style_order=["profile", "full pass"],
                 markers=True, ax=ax, legend=ax is axes[0])
    for mb, frac in (pop.dropna(subset=["fae_budget_mb"])
                     .groupby("fae_budget_mb")["budget_fraction"].first().items()):
        ax.axvline(frac, color="grey", lw=0.6, ls=":")
        if ax is axes[0]:
            ax.text(frac, 1.0, f"{mb:g} MiB", rotation=90, va="top", ha="right")
    ax.set(xscale="log", ylim=(0, 1.02), ylabel=label,
           xlabel="hot-memory budget (fraction of the table bytes)")
legend_below(fig, ncol=4)
section.figure(fig, "popular_fraction",
               "Share of popular inputs (every lookup hot) and of lookups that hit, against the "
               f"hot-memory budget; solid: the {100 * exp.profile_rate:g}% profile, dashed: a full "
               "pass (the ceiling of profiling); dotted: FAE's budgets scaled to these tables",
               setting="; ".join(pop_notes),
               reads=files(results / "hotline_popularity", list(pop_summaries), "popularity.csv",
                           "summary.json"))
fae_rows = pop.dropna(subset=["fae_budget_mb"])
section.table(fae_rows.pivot_table(index=["dataset", "fae_budget_mb"], columns="profile",
                                   values="popular_fraction").reset_index(),
              "popular_at_fae_budgets", "Popular-input share at FAE's budgets (scaled)",
              reads=files(results / "hotline_popularity", list(pop_summaries), "popularity.csv"))
section.note(
    "A profile can only make hot what it saw: past the budget that holds every profiled row, "
    "the curve is flat, and an input is popular only if *all* of its lookups (26 on Criteo) "
    "hit, so a long tail of rare ids keeps the popular share low on these small tables even "
    "where most lookups hit.")

# %% [markdown]
# ## One mini-batch of each scheme: measured and modelled timelines

# %%
LANE_ORDER = ["accelerator", "link", "host", "planner"]  # planner: Hotline's next split
PHASES = ["compute", "gather", "upload", "download", "write-back", "dense update", "update hot",
          "wait", "classify", "plan", "phase sync"]
PHASE_COLOR = dict(zip(PHASES, sns.color_palette("colorblind", 10) + [(0.1, 0.1, 0.1)],
                       strict=True))


def colour(phase: str):
    for key, c in PHASE_COLOR.items():
        if phase.startswith(key) or key in phase:
            return c
    return "grey"


sources = ["measured", main_server]
fig, axes = plt.subplots(1, len(sources), figsize=(10.5, 4.6))
for ax, source in zip(axes, sources, strict=True):
    part = timeline[timeline["source"] == source]
    labels = list(dict.fromkeys(part["label"]))
    yticks, ylabels, y = [], [], 0
    for label in labels:
        drawn = set(part.loc[part["label"] == label, "lane"])
        for lane in (ln for ln in LANE_ORDER if ln != "planner" or ln in drawn):
            bars = part[(part["label"] == label) & (part["lane"] == lane)]
            for _, b in bars.iterrows():
                ax.broken_barh([(1e3 * b["start"], 1e3 * (b["end"] - b["start"]))], (y, 0.8),
                               color=colour(b["phase"]), edgecolor="black", linewidth=0.2)
            yticks.append(y + 0.4)
            ylabels.append(f"{label}: {lane}")
            y += 1
        y += 0.6
    ax.set_yticks(yticks, ylabels)
    ax.invert_yaxis()
    ax.set(xlabel="ms from the start of the mini-batch",
           title="measured on this machine" if source == "measured"
           else f"modelled: {SERVER_LABEL[source]}")
handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in PHASE_COLOR.values()]
fig.legend(handles, list(PHASE_COLOR), ncol=6, loc="outside lower center")
section.figure(fig, "timeline",
               "One mini-batch per scheme, lane by lane: what overlapped in the measured run "
               "(left; the popular micro-batch's compute beside the background gather) and what "
               f"the time model predicts on the {SERVER_LABEL[main_server]} for the same "
               "mini-batch", setting=setting() + f"; mini-batch {exp.timeline_step}",
               reads=[res / "timeline.csv", res / "summary.json"])

# %% [markdown]
# ## Speedup over the hybrid against budget and batch size

# %%
sw = sweep.copy()
sw["source_label"] = sw["source"].map(lambda s: "measured (this machine)" if s == "measured"
                                      else SERVER_LABEL.get(s, s))
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
mid_batch = exp.batch_size if exp.batch_size in exp.batch_sweep else exp.batch_sweep[-1]
sns.lineplot(data=sw[sw["batch_size"] == mid_batch], x="budget_mb_full", y="speedup",
             hue="source_label", marker="o", ax=axes[0])
axes[0].set(xscale="log", xlabel="hot budget (MiB at full Criteo scale, scaled)",
            ylabel="hybrid time / Hotline time", title=f"batch {mid_batch:,}")
sns.lineplot(data=sw[sw["budget_mb_full"] == exp.budget_mb], x="batch_size", y="speedup",
             hue="source_label", marker="o", ax=axes[1], legend=False)
axes[1].set(xscale="log", xlabel="mini-batch", title=f"budget {exp.budget_mb:g} MiB")
for ax in axes:
    ax.axhline(1, color="grey", lw=0.8)
    ax.axhline(paper_v2, color="black", lw=0.8, ls="--")
axes[0].text(axes[0].get_xlim()[0], paper_v2, f" paper (v2): {paper_v2:g}x",
             va="bottom")
legend_below(fig, ncol=3)
section.figure(fig, "speedup_sweep",
               "Hotline's speedup over the CPU-GPU hybrid on the same mini-batches: measured "
               f"(median of {exp.sweep_steps} steps each, alternating) and modelled "
               f"(servers count rows per {exp.rows_unit}; this machine per unique row)",
               setting=setting(),
               reads=[res / "sweep.csv", res / "summary.json"])
measured_sweep = sw[sw["source"] == "measured"]
section.table(measured_sweep[["budget_mb_full", "batch_size", "popular_fraction", "hybrid_s",
                              "hotline_s", "hotline_sequential_s", "speedup", "overlap_gain",
                              "spread"]],
              "sweep_measured", "Measured seconds per mini-batch (medians); overlap_gain = "
              "Hotline without overlap / with it (the background gather's effect alone); "
              "spread = (max - min) / median of the noisiest variant", floatfmt=".4g",
              reads=[res / "sweep.csv"])
section.table(sw[sw["source"] != "measured"][["source", "budget_mb_full", "batch_size",
                                               "popular_fraction", "hybrid_s", "hotline_s",
                                               "accel_only_s", "speedup"]],
              "sweep_modelled", "Modelled seconds per mini-batch on each server",
              floatfmt=".4g",
              reads=[res / "sweep.csv"])

# %% [markdown]
# ## Accuracy parity: test AUC against time for every scheme

# %%
fig, axes = plt.subplots(1, 3, figsize=(11, 3.6), sharey=True)
for ax, col, title in ((axes[0], "step", "mini-batches"),
                       (axes[1], "wall_s", "measured seconds (this machine)"),
                       (axes[2], f"model_{main_server}_s",
                        f"seconds, {SERVER_LABEL[main_server]}")):
    sns.lineplot(data=metrics.assign(label=metrics["scheme"].map(LABELS)), x=col, y="auc",
                 hue="label", hue_order=[LABELS[s] for s in ORDER], style="label",
                 palette=palette.colors(LABELS[s] for s in ORDER), ax=ax, legend=ax is axes[0])
    ax.set(xlabel=title, ylabel="test AUC")
legend_below(fig, ncol=5)
section.figure(fig, "auc_vs_time", "Test AUC of every scheme against mini-batches, measured "
               "time and modelled time: Hotline and accelerator-only follow the hybrid's curve "
               "(same parameters), FAE's phases change the sample order", setting=setting(),
               reads=[res / "metrics.csv", res / "summary.json"])
runs = pd.DataFrame(summary["runs"])
runs_table = runs[["label", "steps", "final_auc", "final_logloss", "measured_s",
                   *[f"model_{n}_s" for n in servers]]].copy()
runs_table["speedup_measured"] = runs["scheme"].map(summary["speedup_measured"])
for n in servers:
    runs_table[f"speedup_{n}"] = runs["scheme"].map(summary["speedup_modelled"][n])
section.table(runs_table, "schemes", "One epoch per scheme: final AUC, measured and modelled "
              "training time, speedup over the hybrid", setting=setting(), floatfmt=".4g",
              reads=[res / "summary.json"])
fits = ", ".join(f"{SERVER_LABEL[n]} {'fits' if servers[n]['fits_full_table'] else 'does not fit'}"
                 for n in exp.hardware)
section.note(
    f"Accelerator-only holds the whole table: {summary['table_bytes'] / 2**20:.1f} MiB here, "
    f"{summary['table_bytes'] / summary['budget_bytes']:.1f}x the hot budget, so it is a reference "
    "the budget does not allow, not a competitor at this budget. At full scale FAE's Criteo "
    f"Kaggle tables take {summary['full_scale_table_gb']:.2f} GB: {fits} (Criteo Terabyte's "
    "would not).")

# %% [markdown]
# ## Does the time model predict this machine? And why the speedup is what it is

# %%
per_scheme = steps.groupby("scheme")[["wall_s", "model_this_machine_s"]].sum()
per_scheme["model / measured"] = per_scheme["model_this_machine_s"] / per_scheme["wall_s"]
section.table(per_scheme.reset_index(), "model_validation",
              "Measured seconds of each run against the time model with this machine's rates "
              "fitted from the runs' own spans (compute a + b n, gather and link bandwidths)",
              floatfmt=".4g",
              reads=[res / "steps.csv"])
hotline_steps = steps[steps["scheme"] == "hotline"]
count_cols = list(MicroBatchCounts.__dataclass_fields__)
base_hw = {k: v for k, v in servers[main_server].items()
           if k in HardwareConfig.__dataclass_fields__}
host_rates = np.geomspace(0.25, 64, 25)
curves = []
for unit in ("lookups", "unique"):
    for rate in host_rates:
        hw = HardwareConfig(**{**base_hw, "host_gbps": float(rate)})
        tot = {"hybrid": 0.0, "hotline": 0.0}
        for _, r in hotline_steps.iterrows():
            c = MicroBatchCounts(**{k: int(r[k]) for k in count_cols}).model_inputs(unit)
            for kind in tot:
                tot[kind] += step_seconds(kind, hw, 4 * summary["embedding_dim"],
                                          summary["train_flops_per_sample"], **c)
        curves.append({"rows unit": unit, "host_gbps": rate,
                       "speedup": tot["hybrid"] / tot["hotline"]})
curves = pd.DataFrame(curves)
fig, ax = plt.subplots(figsize=(6, 3.6))
sns.lineplot(data=curves, x="host_gbps", y="speedup", hue="rows unit", marker="o", ax=ax)
ax.axhline(paper_v2, color="black", lw=0.8, ls="--")
ax.axvline(servers[main_server]["host_gbps"], color="grey", lw=0.8, ls=":")
ax.set(xscale="log", xlabel="host-memory gather rate (GB/s), all else as the server",
       ylabel="modelled hybrid / Hotline")
legend_below(fig)
section.figure(fig, "sensitivity_host_rate",
               f"Modelled speedup on the recorded mini-batches against the host gather rate "
               f"({SERVER_LABEL[main_server]}; dotted: the assumed rate); rows counted per "
               "lookup (the Intel hybrid's EmbeddingBag path) or per distinct row",
               setting=setting(),
               reads=[res / "steps.csv", res / "summary.json"])
at_rate = {u: float(np.interp(np.log(servers[main_server]["host_gbps"]), np.log(host_rates),
                              curves[curves["rows unit"] == u]["speedup"])) for u in ("lookups",
                                                                                    "unique")}
limit = {u: float(curves[curves["rows unit"] == u]["speedup"].max()) for u in at_rate}
machine = servers["this_machine"]
hyb = steps[steps["scheme"] == "hybrid"]
gather_ms = 1e3 * float((hyb["unique_all"] * 4 * summary["embedding_dim"]).median()
                        / (machine["host_gbps"] * 1e9))
popular, hit, feats = (summary["popular_fraction"], summary["lookup_hit_share"],
                       summary["features"])
link = summary["measured_link"]
link_ms = (1e3 * float((hyb["unique_all"] * 4 * summary["embedding_dim"]).median())
           / (link["link_gbps"] * 1e9) if link.get("link_gbps") else 0.0)
section.note(
    f"**What sets the speedup.** An input is popular only if all {feats} of its lookups hit: "
    f"{100 * hit:.1f}% of the lookups hit the hot set here, but only {100 * popular:.1f}% of the "
    f"inputs are popular (independent lookups would give {100 * hit ** feats:.1f}%). Hotline "
    "hides the host gather only behind the popular micro-batch's compute, and takes off the "
    "host path only the hot rows of the non-popular one, so its gain grows with how slow the "
    "host path is (figure). Counted per lookup (the Intel hybrid's EmbeddingBag path, which "
    f"gathers, sends and updates a row per lookup) the model gives {at_rate['lookups']:.2f}x at "
    f"the assumed {servers[main_server]['host_gbps']:g} GB/s and up to {limit['lookups']:.2f}x "
    "as host work dominates; counted per distinct row (a deduplicating hybrid, like the "
    f"measured implementation) {at_rate['unique']:.2f}x, at most {limit['unique']:.2f}x. The "
    "modelled factors rest on that assumed host rate and on the efficiencies in "
    "`workbench/conf/hardware/`: they are a model's, not a measurement. On this machine the "
    "'accelerator' tier shares the CPU's DRAM: the hybrid's host gather takes "
    f"{gather_ms:.2f} ms of a {1e3 * hyb['wall_s'].median():.1f} ms mini-batch. "
    + (f"The PCIe link is emulated at {link['link_gbps']:.3g} GB/s ({link['link']}): the "
       f"hybrid waits {link_ms:.2f} ms per mini-batch on it each way, which Hotline partly hides "
       "behind the popular micro-batch, "
       if link.get("link_gbps") else "The link is a memory copy (not shaped), ")
    + "while Hotline's second micro-batch pays the fixed forward + backward cost again (fitted: "
    f"{machine['step_overhead_us'] / 1e3:.2f} ms per micro-batch): measured "
    f"{summary['speedup_measured']['hotline']:.2f}x, and "
    f"{summary['speedup_modelled']['this_machine']['hotline']:.2f}x by the time model with this "
    "machine's fitted rates.")

# %% [markdown]
# ## Claims

# %%
# The claims are the time model's (the paper's hardware); the host rate and the way the host's
# rows are counted are their assumed parameters (every server re-evaluated: conditions.csv).
# The measured CPU run is context, not a claim row: this machine has no accelerator.
conditions = pd.read_csv(res / "conditions.csv")
for key in ("hotline.speedup", "hotline.v1_hybrid"):  # workbench/claims/hotline.py
    section.record(claims.measure(claims_register[key], cfg))
meas = summary["speedup_measured"]
section.note(f"Context, not a claim: on this machine (CPU; the accelerator tier is a separate "
             f"tensor store in the same DRAM) Hotline ran {meas['hotline']:.2f}x the hybrid's "
             "epoch speed, measured once (wall clock); the only mechanism that can pay here is "
             "the overlap of the gather thread with compute. The GPU-only comparison of v1 is "
             "not comparable (the register says why).")
section.table(conditions.pivot_table(index=["server", "rows_unit", "host_gbps"],
                                     columns="scheme", values="speedup").reset_index(),
              "host_rate_conditions", "Modelled speedup over the hybrid per server, rows unit "
              "and host rate (the claims' assumed parameters)", floatfmt=".3g",
              reads=[res / "conditions.csv"])

# %%
section.save()

# %% [markdown]
# ## Explore (live, not part of the report)
#
# Everything above reads the pipeline's outputs in `results/`. The widgets below rerun a small
# variant live through `workbench.api`, in seconds: the hot set of the first train inputs over a
# sweep of hot-memory budgets (the chosen one marked), from the profile at the chosen rate and
# from a full pass: the share of popular inputs and of lookups that hit the hot set. Nothing here
# goes into the report. Under papermill the cell runs once at the parameters' values (e.g. `-p
# hot_fraction ...`; None: the configuration's); in JupyterLab (`make notebooks lab`) moving a
# widget reruns and redraws it.

# %%
from workbench import explorers

explorer = explorers.show("hotline", cfg, hot_fraction=hot_fraction, profile_rate=profile_rate)
