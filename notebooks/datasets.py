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
# # Datasets and embedding access skew (HET Fig. 3)
#
# Reads the `dataset_stats` stage outputs (`results/dataset_stats/<dataset>/`) of every dataset
# the pipeline ran on: the embedded synthetic default and each real sample that was present.
# Change a knob (e.g. `dataset.synthetic.top1_share` in `workbench/conf/dataset/synthetic.yaml`), rerun
# `dvc repro`, and re-run this notebook to see its effect.

# %% tags=["parameters"]
params_file = "params.yaml"  # the composed config whose outputs are shown (from the repo root)
out_dir = None  # figures, tables, section.json; None: scratch/ (dvc repro: reports/)
dataset = None  # any preprocessed dataset (yours too); None: the pipeline's
# the live exploration at the end (not part of the report) starts at these; None: the config's
samples = None  # train samples counted
top_fraction = None  # the top fraction of rows marked (HET: 0.1)

# %%
import json

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from workbench import claims
from workbench.claims import register
from workbench.explorers import notebook_config
from workbench.report.plotting import legend_below, set_theme
from workbench.report.sections import Section

set_theme()
cfg = notebook_config("datasets", params_file, dataset, samples=samples, top_fraction=top_fraction)
stats_cfg = cfg.experiments.dataset_stats
results = cfg.paths.resolve("results") / "dataset_stats"
section = Section(
    name="datasets", title="Datasets and embedding access skew (HET Fig. 3)", out_dir=out_dir,
    config=cfg,
    intro=("Statistics of every dataset the pipeline ran on, computed on the train split. "
           "*Lookups* count every categorical value read (one embedding-row read and, in "
           "training, one update); sequence features count as lookups of their item table. "
           "Shares rank all embedding rows of all tables together, as HET's Fig. 3 does. "
           "The synthetic dataset is the embedded default (Criteo Kaggle schema, cardinalities "
           f"x {cfg.datasets['synthetic'].synthetic.cardinality_scale:g}, per-table power-law "
           "skew calibrated so the top 1% of a table's rows take "
           f"{cfg.datasets['synthetic'].synthetic.top1_share:.0%} of its lookups)."))

# %%
summaries, curves, features, missing = [], [], [], []
names = [dataset] if dataset else cfg.pipeline.datasets
for name in names:
    stats = json.loads((results / name / "stats.json").read_text())
    if not stats["available"]:
        missing.append({"dataset": name, "reason": stats["reason"]})
        continue
    summaries.append(stats)
    curve = pd.read_csv(results / name / "rank_curve.csv")
    curve["dataset"] = name
    curves.append(curve)
    feat = pd.read_csv(results / name / "features.csv")
    feat["dataset"] = name
    features.append(feat)
curves = pd.concat(curves, ignore_index=True)
features = pd.concat(features, ignore_index=True)
shown = [s["dataset"] for s in summaries]  # the datasets read (figures name their files)

# %%
fractions = stats_cfg.top_fractions
table = pd.DataFrame([{
    "dataset": s["dataset"], "source": s["source"], "train rows": s["rows_train"],
    "test rows": s["rows_test"], "dense": s["dense_features"],
    "categorical": s["categorical_features"], "sequence": s["sequence_features"],
    "embedding rows": s["embedding_rows"], "rows seen": s["rows_seen"],
    "lookups": s["lookups"], "positive rate": s["positive_rate"],
    **{f"top {f:.0%} share": s["top_share"][f"{f * 100:g}pct"] for f in fractions},
    "seen once (of seen)": s["singleton_share_of_seen"], "malformed rows": s["malformed_rows"],
} for s in summaries])
section.table(table, "dataset_statistics", "Dataset statistics (train split)",
              setting=f"profile {cfg.profile.name}; encoding fitted on the train split; "
                      "shares pooled over all embedding tables", floatfmt=".3g",
              reads=[results / n / "stats.json" for n in shown])

# %%
per_feature_table = features.rename(columns={
    "table_rows": "cardinality (rows)", "rows_seen": "rows seen", "user_side": "user-side",
    **{f"top_{f * 100:g}pct_share": f"top {f:.0%} share" for f in fractions}})
section.table(per_feature_table[["dataset", "feature", "cardinality (rows)", "rows seen",
                                 "lookups", "user-side",
                                 *[f"top {f:.0%} share" for f in fractions]]],
              "feature_statistics", "Per-feature cardinality and skew (train split)",
              setting="cardinality = embedding-table rows excluding id 0 (missing/rare); shares "
                      "within each feature's table", floatfmt=".3g",
              reads=[results / n / "features.csv" for n in shown])

# %%
fig, (ax_rank, ax_cum) = plt.subplots(1, 2, figsize=(9, 3.6))
sns.lineplot(data=curves, x="rank", y="lookups", hue="dataset", ax=ax_rank)
ax_rank.set(xscale="log", yscale="log", xlabel="embedding row rank (by lookups)",
            ylabel="lookups (= updates in training)", title="Accesses vs rank (log-log)")
sns.lineplot(data=curves, x="rank_fraction", y="cumulative_share", hue="dataset", ax=ax_cum,
             legend=False)
claim_x, claim_y = stats_cfg.skew_claim_fraction, stats_cfg.skew_claim_share
ax_cum.axvline(claim_x, color="grey", ls="--", lw=0.8)
ax_cum.axhline(claim_y, color="grey", ls=":", lw=0.8)
ax_cum.annotate(f"HET: top {claim_x:.0%} -> {claim_y:.0%}", (claim_x, claim_y),
                textcoords="offset points", xytext=(4, -12))
ax_cum.set(xscale="log", xlabel="fraction of embedding rows (most accessed first)",
           ylabel="share of lookups", title="Cumulative share", ylim=(0, 1.02))
legend_below(fig)
section.figure(fig, "het_fig3_access_skew",
               "HET Fig. 3 - embedding popularity skew: lookups per row against its rank",
               setting=f"train split of each dataset; all tables pooled; profile "
                       f"{cfg.profile.name}",
               reads=[results / n / "rank_curve.csv" for n in shown])

# %%
fig, ax = plt.subplots(figsize=(9, 3.2))
per_feature = features[features["dataset"].isin([dataset] if dataset else
                                                 ["synthetic", "criteo_sample"])]
sns.barplot(data=per_feature, x="feature", y="table_rows", hue="dataset", ax=ax)
ax.set(yscale="log", ylabel="embedding rows", xlabel="", title="Rows per table")
ax.tick_params(axis="x", rotation=90)
legend_below(fig)
section.figure(fig, "table_sizes", "Embedding-table rows per categorical feature",
               setting=f"{dataset}: distinct values in its train split" if dataset else
                       "synthetic: Criteo Kaggle cardinalities x the scale factor (declared "
                       "sizes); criteo_sample: distinct values in the sample's train split",
               reads=[results / n / "features.csv" for n in per_feature["dataset"].unique()])

# %% [markdown]
# ## HET's claim: the top 10% of embeddings get 90% of the updates on Criteo

# %%
# measured on the register's committed dataset (real Criteo rows), the others its condition:
# workbench/claims/het.py reads results/dataset_stats
section.record(claims.measure(register.load()["het.fig3_skew"], cfg))
for m in missing:
    section.note(f"Dataset `{m['dataset']}` was not available in this run: {m['reason']}")
pd.DataFrame([c.__dict__ for c in section.claims])[["key", "measured", "state", "holds"]]

# %%
section.save()

# %% [markdown]
# ## Explore (live, not part of the report)
#
# Everything above reads the pipeline's outputs in `results/`. The widgets below rerun a small
# variant live through `workbench.api`, in seconds: the access skew of the first train samples of
# a dataset: the share of all lookups taken by the most-accessed fraction of the embedding rows,
# on the dataset, sample count and fraction chosen (a small sample understates the tail). Nothing
# here goes into the report. Under papermill the cell runs once at the parameters' values (e.g.
# `-p dataset ...`; None: the configuration's); in JupyterLab (`make notebooks lab`) moving a
# widget reruns and redraws it.

# %%
from workbench import explorers

explorer = explorers.show("datasets", cfg, dataset=dataset, samples=samples,
                          top_fraction=top_fraction)
