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
# # RecD: session-clustered data, InverseKeyedJaggedTensors, dedup in preprocessing and training
#
# **The formalisation is ours**: RecD's method section is unavailable (abstract and the IKJT
# figure only). The layouts (windows of the log shuffled or sorted by session), the history
# snapshot per session, the reader that builds IKJTs from request ids, the transforms and the
# model (a DLRM with a self-attention tower over the user history) follow
# `workbench/data/partition.py`, `workbench/transforms.py` and `workbench/recd_model.py`.
# Reads `results/dedup/<dataset>/` (the `dedup` stage) and `results/recd/<dataset>/` (the `recd`
# stage). Knobs: `workbench/conf/stages/recd.yaml` (window, batch sizes, dedup groups, transforms,
# model) and the `recd_*` entries of the profile.

# %% tags=["parameters"]
params_file = "params.yaml"  # the composed config whose outputs are shown (from the repo root)
out_dir = None  # figures, tables, section.json; None: scratch/ (dvc repro: reports/)
dataset = None  # any preprocessed dataset (yours too); None: the pipeline's
# the live exploration at the end (not part of the report) starts at these; None: the config's
dedup_group = None  # the dedup group, e.g. one feature of it (None: the configured group)
batch_size = None  # rows per batch

# %%

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter, ScalarFormatter

from workbench import claims
from workbench.claims import recd as recd_claims
from workbench.claims import register
from workbench.claims.measurement import Estimate
from workbench.experiments.recd import TRACKS
from workbench.explorers import notebook_config
from workbench.report import palette
from workbench.report.plotting import legend_below, panels, set_theme
from workbench.report.sections import Section, files

set_theme()
LAYOUT_STYLE = {"style_order": ["clustered", "shuffled"],
                "markers": {"clustered": "o", "shuffled": "X"},
                "dashes": {"clustered": "", "shuffled": (3, 2)}}
cfg = notebook_config("recd", params_file, dataset, dedup_group=dedup_group, batch_size=batch_size)
exp = cfg.experiments.recd
results = cfg.paths.resolve("results")
section = Section(
    name="recd", title="RecD: deduplication from data generation to training", out_dir=out_dir,
    config=cfg,
    intro=("**Our formalisation** (RecD's method section is unavailable): training partitions "
           f"are windows of {exp.window:,} rows of the log (timestamp order), written as zstd "
           "Parquet either *shuffled* inside the window (a conventional training table) or "
           "*clustered* by session (RecD). Sessions are users, split at gaps over "
           f"{exp.session_gap_s} s on timestamped sources; with `history: {exp.history}` every "
           "sample of a session carries the history the session started with (a feature "
           "store serves it once per request). The dedup group is the user-side features plus "
           "the history (other features are not deduplicated). The reader builds an "
           "InverseKeyedJaggedTensor from the request ids (group features read once per "
           "request); transforms (truncate, hash) and the model's per-group compute (embedding "
           "bags, a self-attention tower over the history) run on the unique rows and are "
           "expanded through the inverse lookup. Throughputs are wall-clock on this machine "
           "(one torch thread; best of "
           f"{exp.repeats} alternating runs) and change from run to run."))

measured = claims.Results(cfg)  # the claims' measures and this notebook read the same files
claims_register = register.load()  # the paper's numbers: workbench/conf/claims.yaml
loaded = recd_claims.runs(measured)
for name, reason in loaded["unavailable"]:
    section.note(f"Dataset `{name}` was not available in this run: {reason}")
summaries = loaded["summaries"]
dedup, storage = loaded["dedup"].copy(), loaded["storage"].copy()
timing = pd.concat([pd.read_csv(results / "recd" / n / "timing.csv").assign(dataset=n)
                    for n in summaries], ignore_index=True)
losses = pd.concat([pd.read_csv(results / "recd" / n / "training.csv").assign(dataset=n)
                    for n in summaries], ignore_index=True)
datasets = list(summaries)
# one colour per dataset in every figure; the training figure's layout x path bars take others
dataset_colours = palette.colors(datasets)


def dataset_setting(name: str) -> str:
    return recd_claims.dataset_setting(measured, name)


# %% [markdown]
# ## Dedup factor against batch size, window and layout

# %%
user = dedup[dedup["group"] != "all"]
at_window = user[user["window"] == exp.window]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
sns.lineplot(data=at_window, x="batch_size", y="dedup_factor", hue="dataset",
             palette=dataset_colours,
             hue_order=datasets, style="layout", ax=axes[0], **LAYOUT_STYLE)
axes[0].set(xscale="log", yscale="log", xlabel="batch size",
            ylabel="dedup factor (rows / unique rows)",
            title=f"window {exp.window:,} rows")
mid = recd_claims.middle_batch(measured)
by_window = user[user["batch_size"] == mid]
sns.lineplot(data=by_window, x="window", y="dedup_factor", hue="dataset", palette=dataset_colours,
             hue_order=datasets, style="layout", ax=axes[1], legend=False, **LAYOUT_STYLE)
axes[1].set(xscale="log", yscale="log", xlabel="partition window (rows)", ylabel="",
            title=f"batch size {mid}")
legend_below(fig, ncol=4)
section.figure(fig, "dedup_factor",
               "Dedup factor of the user group (rows / unique rows per batch) against batch "
               "size and clustering window, shuffled vs session-clustered partitions",
               setting="; ".join(dataset_setting(n) for n in datasets),
               reads=files(results / "dedup", datasets, "dedup.csv", "summary.json"))
values = dedup[(dedup["group"] == "all") & (dedup["window"] == exp.window)]
section.table(values.pivot_table(index=["dataset", "batch_size"], columns="layout",
                                 values="values_factor").reset_index(),
              "values_factor", "All sparse ids of a batch / ids an IKJT stores (user group "
              "deduplicated, other features stored whole)",
              setting=f"window {exp.window:,}",
              reads=files(results / "dedup", datasets, "dedup.csv"))

# %% [markdown]
# ## Storage: Parquet + zstd bytes shuffled, clustered and in the session layout
#
# The session layout is RecD's data generation: the clustered partition with the features
# constant within a session (the dedup group's: user-side and history) written once per session
# in a sessions file, the rest per sample with the sample's row in it (`session_row`).

# %%
classes = storage[(storage["window"] == exp.window) & (storage["column_class"] != "total")]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
stacked = classes.pivot_table(index=["dataset", "layout"], columns="column_class",
                              values="bytes", aggfunc="sum") / 1e6
stacked.plot.barh(stacked=True, ax=axes[0], width=0.7)
axes[0].set(xlabel="MB (compressed column chunks)", ylabel="(dataset, layout)")
totals = storage[storage["column_class"] == "total"]
ratio = recd_claims.storage_ratios(measured)
curves = ratio.melt(id_vars=["dataset", "window"], value_vars=["storage_ratio", "session_ratio"],
                    var_name="layout", value_name="saving").dropna()
curves["layout"] = curves["layout"].map({"storage_ratio": "clustered rows",
                                         "session_ratio": "session layout"})
sns.lineplot(data=curves, x="window", y="saving", hue="dataset",
             palette=dataset_colours, hue_order=datasets,
             style="layout", markers=True, ax=axes[1])
axes[1].axhline(1, color="grey", lw=0.8)
paper_storage_x = claims_register["recd.storage"].paper_number  # [A]
axes[1].axhline(paper_storage_x, color="k", ls="--", lw=1,
                label=f"paper: {paper_storage_x:g}x [A]")
axes[1].set(xscale="log", xlabel="partition window (rows)",
            ylabel="storage saving (bytes shuffled / layout, x)",
            title="storage saving against the shuffled rows")
legend_below(fig, ncol=4)
section.figure(fig, "storage",
               "Partition bytes by column class at the configured window, and the storage "
               "saving of the clustered rows and of the session layout against the window "
               f"(ours; dashed: the paper's {paper_storage_x:g}x, its abstract)",
               setting=f"zstd Parquet, one file per window; window {exp.window:,}; "
               + "; ".join(dataset_setting(n) for n in datasets),
               reads=files(results / "dedup", datasets, "storage.csv"))
section.table(ratio, "storage", "Partition bytes per layout and window", floatfmt=".4g",
              reads=files(results / "dedup", datasets, "storage.csv"))

# %% [markdown]
# ## Preprocessing throughput: transforms on every row (KJT) vs on unique rows (IKJT)

# %%
pre = timing[timing["phase"] == "preprocess"]
fig, axes = panels(len(datasets), (3.6, 3.4))
for ax, name in zip(axes, datasets):
    sns.lineplot(data=pre[pre["dataset"] == name], x="batch_size", y="samples_per_s",
                 hue="path", style="layout", ax=ax, legend=ax is axes[0], **LAYOUT_STYLE)
    sizes = sorted(pre.loc[pre["dataset"] == name, "batch_size"].unique())
    ax.set(xscale="log", yscale="log", title=name, xlabel="reader batch size",
           ylabel="preprocessing samples / s")
    ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
    ax.minorticks_off()
    ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(EngFormatter())
legend_below(fig, ncol=6)
transforms_text = recd_claims.transforms_text(measured)
section.figure(fig, "preprocess_throughput",
               "Preprocessing throughput (columnar batch -> transformed sparse batch) of the "
               "KJT path, RecD's request-keyed IKJT reader, and content-hash dedup",
               setting=f"{transforms_text}; {exp.preprocess_rows:,} rows per run; one thread",
               reads=files(results / "recd", datasets, "timing.csv"))


def speedup(frame: pd.DataFrame) -> pd.DataFrame:
    rate = frame.pivot_table(index=["dataset", "layout", "phase", "batch_size"], columns="path",
                             values="samples_per_s").reset_index()
    rate["IKJT / KJT"] = rate["ikjt"] / rate["kjt"]
    return rate


pre_speed = speedup(pre)
paper_preprocess_x = claims_register["recd.preprocess"].paper_number  # [A]
fig, ax = plt.subplots(figsize=(5.6, 3.6))
sns.lineplot(data=pre_speed, x="batch_size", y="IKJT / KJT", hue="dataset",
             palette=dataset_colours, hue_order=datasets,
             style="layout", ax=ax, **LAYOUT_STYLE)
ax.axhline(1, color="grey", lw=0.8)
ax.axhline(paper_preprocess_x, color="k", ls="--", lw=1,
           label=f"paper: {paper_preprocess_x:g}x [A]")
pre_sizes = sorted(pre_speed["batch_size"].unique())
ax.set(xscale="log", xlabel="reader batch size",
       ylabel="preprocessing speedup IKJT / KJT (x)")
ax.set_xticks(pre_sizes, [f"{s:,}" for s in pre_sizes])
ax.minorticks_off()
ax.legend(loc="upper left", bbox_to_anchor=(1, 1))
section.figure(fig, "preprocess_speedup",
               "Preprocessing speedup of RecD's IKJT reader over the KJT path against the "
               f"reader batch size (ours), against the paper's {paper_preprocess_x:g}x (dashed, its "
               "abstract)",
               setting=f"{transforms_text}; {exp.preprocess_rows:,} rows per run; one thread",
               reads=files(results / "recd", datasets, "timing.csv"))
section.table(pre_speed, "preprocess_speedup", "Preprocessing samples/s per path",
              floatfmt=".4g",
              reads=files(results / "recd", datasets, "timing.csv"))

# %% [markdown]
# ## Training throughput on KJT vs IKJT batches, and the same losses

# %%
# the workbench's model here; TorchRec's own path (same batches, same rounds) in the next section
WORKBENCH_PATHS = list(TRACKS["workbench"])
train = timing[(timing["phase"] == "train") & timing["path"].isin(WORKBENCH_PATHS)]
train_speed = speedup(train)
nearest = min(exp.batch_sizes, key=lambda b: abs(b - exp.train_batch_size))
train_factor = user[(user["window"] == exp.window) & (user["batch_size"] == nearest)]
train_speed = train_speed.merge(train_factor[["dataset", "layout", "dedup_factor"]],
                                on=["dataset", "layout"])
fig, axes = plt.subplots(1, 3, figsize=(11, 3.8))
bars = train["layout"] + " " + train["path"]
bar_colours = dict(zip(dict.fromkeys(bars), [c for c in palette.SPARE
                                             if c not in dataset_colours.values()]))
sns.barplot(data=train, x="dataset", y="samples_per_s", order=datasets, hue=bars,
            palette=bar_colours, ax=axes[0])
axes[0].set(ylabel="training samples / s", xlabel="")
axes[0].tick_params(axis="x", rotation=20)
clustered_losses = losses[(losses["layout"] == "clustered")
                          & losses["path"].isin(WORKBENCH_PATHS)]
sns.lineplot(data=clustered_losses, x="step", y="loss", hue="dataset",
             palette=dataset_colours, hue_order=datasets,
             style="path", ax=axes[1])
axes[1].set(ylabel="train loss (clustered)", xlabel="step")
sns.scatterplot(data=train_speed, x="dedup_factor", y="IKJT / KJT", hue="dataset",
                palette=dataset_colours,
                hue_order=datasets, style="layout", style_order=["clustered", "shuffled"],
                markers={"clustered": "o", "shuffled": "X"}, s=70, ax=axes[2])
axes[2].axhline(1, color="grey", lw=0.8)
paper_train_x = claims_register["recd.train"].paper_number  # [A], "up to"
axes[2].axhline(paper_train_x, color="k", ls="--", lw=1,
                label=f"paper: up to {paper_train_x:g}x [A]")
axes[2].set(xscale="log", xlabel=f"user-group dedup factor (batch {nearest})",
            ylabel="training speedup IKJT / KJT (x)")
axes[2].xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
axes[2].xaxis.set_major_formatter(ScalarFormatter())
axes[2].xaxis.set_minor_formatter(NullFormatter())
legend_below(fig, ncol=5)
section.figure(fig, "training",
               "Training throughput (forward, backward with row-indexed sparse table gradients, "
               "Adagrad step on the rows read) on KJT and IKJT batches, "
               "the per-step losses of both paths (they coincide), and the speedup against the "
               f"batch's dedup factor (ours; dashed: the paper's up to {paper_train_x:g}x)",
               setting=f"batch {exp.train_batch_size}, {exp.train_batches} batches, "
               f"D = {exp.embedding_dim}, history {exp.max_history}, {exp.seq_heads} heads, "
               f"lr {exp.lr}; one torch thread",
               reads=files(results / "recd", datasets, "timing.csv", "training.csv")
                      + files(results / "dedup", datasets, "dedup.csv"))
section.table(train_speed[["dataset", "layout", "batch_size", *WORKBENCH_PATHS, "IKJT / KJT",
                           "dedup_factor"]], "train_speedup",
              "Training samples/s per path", floatfmt=".4g",
              reads=files(results / "recd", datasets, "timing.csv"))
gap = (losses[losses["path"].isin(WORKBENCH_PATHS)]
       .pivot_table(index=["dataset", "layout", "step"], columns="path", values="loss")
       .assign(diff=lambda f: (f["kjt"] - f["ikjt"]).abs()).groupby("dataset")["diff"].max())
section.note("Largest |loss(KJT) - loss(IKJT)| over every step: "
             + ", ".join(f"{n} {v:.1e}" for n, v in gap.items())
             + ". The IKJT path trains the same model: forward and gradients agree to float "
             "rounding at every step (tests), but Adagrad divides each gradient element by its "
             "own running norm, so rounding differences in near-zero elements become full-size "
             "updates and the two runs drift apart slowly over the steps.")

# %% [markdown]
# ## The same batches on TorchRec's own path
#
# RecD's IKJT landed in TorchRec as the variable-batch KeyedJaggedTensor with `inverse_indices`:
# TorchRec's `EmbeddingBagCollection` pools the unique rows of each group and expands them. The
# stage trains TorchRec's EBC (every feature a pooled sum bag, the history's included: no
# attention tower) under the same DLRM on TorchRec's KJT and on the IKJT as its variable-batch
# KJT, in the same alternating rounds as the workbench's paths; once with the dense table
# gradients TorchRec's bags give, once with sparse ones (`workbench/models/torchrec_dlrm.py`).
# Then the same model on TorchRec's fused kernel, fbgemm's table-batched embedding with SGD
# inside the backward: the IKJT through its variable-batch call (as TorchRec's sharded lookup
# makes it; on CPU its metadata costs milliseconds per call) and padded to a fixed batch with
# empty bags (one KJT path for both tracks).

# %%
rounds = recd_claims.timing_rounds(measured)
rounds = rounds[(rounds["phase"] == "train") & (rounds["layout"] == "clustered")]
track_rows = []
for name, part in rounds.groupby("dataset"):
    for point in recd_claims.track_points(part):
        est = Estimate.of(point["values"])
        track_rows.append({"dataset": name, "track": point["value"], "IKJT / KJT": est.mean,
                           "95% CI low": est.lo, "95% CI high": est.hi, "rounds": est.n})
tracks = pd.DataFrame(track_rows)
if tracks["track"].nunique() > 1:
    fig, ax = plt.subplots(figsize=(7.2, 3.6))
    order = [t for t in TRACKS if t in set(tracks["track"])]
    colours = palette.colors(order)
    width = 0.8 / len(order)
    for i, track in enumerate(order):
        part = tracks[tracks["track"] == track].set_index("dataset").reindex(datasets)
        x = np.arange(len(datasets)) + (i - (len(order) - 1) / 2) * width
        ax.bar(x, part["IKJT / KJT"], width, color=colours[track], label=track,
               yerr=[part["IKJT / KJT"] - part["95% CI low"],
                     part["95% CI high"] - part["IKJT / KJT"]], capsize=3)
    ax.axhline(1, color="grey", lw=0.8)
    ax.axhline(paper_train_x, color="k", ls="--", lw=1,
               label=f"paper: up to {paper_train_x:g}x [A]")
    ax.set_xticks(np.arange(len(datasets)), datasets)
    ax.set(ylabel="training speedup IKJT / KJT (x)", xlabel="")
    legend_below(fig, ncol=2)
    section.figure(fig, "training_tracks",
                   "Training speedup of the deduplicated batches on each path (clustered "
                   "partitions; mean and 95% interval over the alternating rounds): the "
                   "workbench's model, TorchRec's EmbeddingBagCollection on its KJT against "
                   "its variable-batch KJT with dense and with sparse table gradients, and "
                   "fbgemm's fused TBE on the KJT against the IKJT, variable-batch or padded",
                   setting=f"batch {exp.train_batch_size}, {exp.train_batches} batches, "
                           f"D = {exp.embedding_dim}; one torch thread",
                   reads=files(results / "recd", datasets, "timing_rounds.csv"))
    section.table(tracks, "training_tracks", "IKJT / KJT training throughput per path "
                  "(clustered partitions)", floatfmt=".3g",
                  reads=files(results / "recd", datasets, "timing_rounds.csv"))
else:
    section.note("TorchRec's path was not measured: TorchRec did not load in the recd stage "
                 "(`make torchrec` installs it; the stage's summary.json says why).")

# %% [markdown]
# ## Claims

# %%
# The register's committed dataset (real user sessions) is measured; the other datasets are a
# condition (the gain follows their dedup factor). Wall-clock claims: every alternating round
# times both paths back to back, so each round's IKJT/KJT ratio is one paired sample
# (workbench/claims/recd.py measures them).
for key in ("recd.train", "recd.preprocess", "recd.storage"):
    section.record(claims.measure(claims_register[key], measured))

# %%
section.save()

# %% [markdown]
# ## Explore (live, not part of the report)
#
# Everything above reads the pipeline's outputs in `results/`. The widgets below rerun a small
# variant live through `workbench.api`, in seconds: the first batches of the RecD partitions
# (`data/partitions/<dataset>`) converted to IKJTs for the chosen dedup group and batch size: the
# dedup factor per batch of the session-clustered and the shuffled layouts. Nothing here goes
# into the report. Under papermill the cell runs once at the parameters' values (e.g. `-p
# dedup_group ...`; None: the configuration's); in JupyterLab (`make notebooks lab`) moving a
# widget reruns and redraws it.

# %%
from workbench import explorers

explorer = explorers.show("recd", cfg, dedup_group=dedup_group, batch_size=batch_size)
