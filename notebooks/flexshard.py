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
# # FlexShard: per-row tiered sharding of sequence embedding tables
#
# **The formalisation is ours**: FlexShard's method section is unavailable (the abstract and one
# figure of the authors). The tiers, the network and memory models and the planner follow
# `workbench/sharding/` (`topology`, `plans`, `traffic`, `planner`).
# Reads `results/flexshard_stream/<claims dataset>/` (the `flexshard-stream` stage: the claims,
# every plan profiled on millions of samples streamed from the claims dataset's generator) and
# `results/flexshard/<dataset>/` (the `flexshard` stage: each dataset's split). Knobs:
# `workbench/conf/stages/flexshard.yaml` and `workbench/conf/topology/*.yaml`.

# %% tags=["parameters"]
params_file = "params.yaml"  # the composed config whose outputs are shown (from the repo root)
out_dir = None  # figures, tables, section.json; None: scratch/ (dvc repro: reports/)
dataset = None  # any preprocessed dataset (yours too); None: the pipeline's
# the live exploration at the end (not part of the report) starts at these; None: the config's
replicated_fraction = None  # rows replicated on every device, share of the table
devices = None  # devices (whole nodes)
per_device = None  # samples per device per iteration

# %%
import json

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from workbench import claims
from workbench.claims import flexshard as flexshard_claims
from workbench.claims import register
from workbench.explorers import notebook_config
from workbench.report import palette
from workbench.report.plotting import set_theme
from workbench.report.sections import Section, files, per_dataset

set_theme()
cfg = notebook_config("flexshard", params_file, dataset, replicated_fraction=replicated_fraction,
                      devices=devices, per_device=per_device)
exp = cfg.experiments.flexshard
topo_cfg = cfg.topology
results = cfg.paths.resolve("results") / "flexshard"
claims_ds = exp.claims_dataset
streamed = cfg.paths.resolve("results") / "flexshard_stream" / claims_ds
section = Section(
    name="flexshard", title="FlexShard: tiered sharding of sequence embedding tables",
    out_dir=out_dir, config=cfg,
    intro=("**Our formalisation** (FlexShard's method section is unavailable): rows of a "
           "sequence table are ranked by their access probability, estimated from the lookups "
           "of a profile (per occurrence; rows the profile missed share the Good-Turing missing "
           f"mass): on `{claims_ds}`, the claims' run, {exp.stream_profile_batches} iterations "
           "of the base topology streamed from its generator past its materialised rows (the "
           f"profile's length swept over {min(exp.profile_sweep)}-{max(exp.profile_sweep)} "
           f"iterations); on each dataset's split, its first {exp.profile_batches} iterations. "
           "The hottest t1 rows are replicated on every device, "
           "the next t2 on every node and row-sharded inside it, the rest row-sharded over all "
           "devices with a slow node's devices holding fewer of them. The planner picks (t1, t2) "
           "minimising the expected all-to-all time within row-wise sharding's (RW) memory per "
           "device, weights plus the all-to-all's send and receive buffers. Every plan is then "
           f"replayed on {exp.replay_batches} iterations the profile never read (data parallel, "
           f"{exp.per_device_batch} samples per device, every occurrence of a row in a history "
           "sent, D = "
           f"{exp.embedding_dim}). The topology ({topo_cfg.nodes} nodes x "
           f"{topo_cfg.devices_per_node} devices, NVLink {topo_cfg.intra_gbps:g} GB/s, NIC "
           f"{topo_cfg.inter_gbps:g} GB/s per device) is **our assumption** of a DGX-A100-class "
           "cluster: FlexShard's was not obtained."))
summaries, data = per_dataset(results, exp.datasets,
                              ["plans", "fraction_curve", "device_sweep", "skew_sweep",
                               "link_sweep"], section)
datasets = list(summaries)
# the claims' run: its summary and sweeps; a dataset of your own has no generator to stream,
# so its split's run stands in (and no claim is recorded)
has_stream = (streamed / "summary.json").is_file()
if has_stream:
    STREAMED = flexshard_claims.STREAMED.format(claims_ds)
    base = json.loads((streamed / "summary.json").read_text())
else:
    STREAMED, streamed, base = claims_ds, results / claims_ds, summaries[claims_ds]
stream = {k: pd.read_csv(streamed / f"{k}.csv").assign(dataset=STREAMED)
          for k in ("plans", "device_sweep", "skew_sweep", "link_sweep", "profile_sweep")
          if (streamed / f"{k}.csv").is_file()}
# the configured plans that were planned somewhere (TorchRec's planner may find no plan)
PLAN_ORDER = [p for p in exp.plans if p in set(data["plans"]["plan"])]
LABEL = dict(zip(data["plans"]["plan"], data["plans"]["label"], strict=False))


def ds_setting(name: str) -> str:
    return flexshard_claims.ds_setting(base if name == STREAMED else summaries[name])


# %% [markdown]
# ## Memory against communication savings over the replicated fraction (the authors' figure)

# %%
curve = data["fraction_curve"]
# FlexShard's abstract, against row-wise sharding (RW): "over 85% less global all-to-all
# traffic" and "almost 6x lower communication latency"
claims_register = register.load()  # the paper's numbers: workbench/conf/claims.yaml
paper_inter_reduction = claims_register["flexshard.a2a_traffic"].rule["paper"][0]  # "over"
paper_latency_x = claims_register["flexshard.comm_latency"].paper_number  # "almost"
CURVE_STYLE = {"hot_dp": ("o", palette.COLORS["hot_dp"], "replicated tier only (t2 = 0)"),
               "flexshard": ("s", palette.COLORS["flexshard"],
                             "FlexShard (+ node tier within RW's memory)")}
ncols = min(2, len(datasets))
nrows = -(-len(datasets) // ncols)
fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.9 * nrows), squeeze=False)
fractions = 100 * curve["replicated_fraction"]
norm = plt.Normalize(fractions.min(), fractions.max())
for ax, name in zip(axes.flat, datasets):
    part = curve[curve["dataset"] == name]
    for plan, (marker, colour, label) in CURVE_STYLE.items():
        pts = part[part["plan"] == plan].sort_values("replicated_fraction")
        if pts.empty:
            continue
        # the replicated fraction is the points' colour (colour bar), not inline text
        ax.plot(pts["savings_vs_rw_ms"], pts["memory_vs_rw_mib"], color=colour, lw=1,
                zorder=1)
        ax.scatter(pts["savings_vs_rw_ms"], pts["memory_vs_rw_mib"], marker=marker, s=28,
                   c=100 * pts["replicated_fraction"], cmap="viridis", norm=norm,
                   edgecolors=colour, linewidths=1.0, zorder=2, label=label)
    rw = data["plans"][(data["plans"]["dataset"] == name) & (data["plans"]["plan"] == "rw")]
    if len(rw):  # the savings at which the all-to-all would be 6x faster than RW's
        ax.axvline(1e3 * float(rw["expected_seconds"].iloc[0]) * (1 - 1 / paper_latency_x),
                   color="k", ls="--", lw=0.9,
                   label=f"paper: almost {paper_latency_x:g}x lower latency than RW [A]")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set(title=name, xlabel="all-to-all latency savings vs RW (ms / iteration)",
           ylabel="memory vs RW (MiB, largest device)")
for ax in axes.flat[len(datasets):]:
    ax.set_visible(False)
handles = {label: plt.Line2D([], [], color=colour, marker=marker, mfc="white", lw=1)
           for plan, (marker, colour, label) in CURVE_STYLE.items()
           if plan in set(curve["plan"])}
for ax in axes.flat[:len(datasets)]:
    for h, lab in zip(*ax.get_legend_handles_labels()):
        handles.setdefault(lab, h)
fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncol=3)
fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap="viridis"), ax=axes, shrink=0.8,
             label="rows replicated on every device (% of the table)")
section.figure(fig, "memory_vs_savings",
               "Memory cost against latency savings relative to RW as the fraction of rows "
               "replicated on every device goes from 0.1% to 1.1% (point colour; expected "
               "values from the profile); dashed: the savings at which the all-to-all would be "
               f"{paper_latency_x:g}x faster than RW's, the paper's headline (its abstract); the "
               "authors' figure has a memory minimum near 0.1-0.2% and zero extra memory near "
               "0.7%", setting="; ".join(ds_setting(n) for n in datasets),
               reads=files(results, datasets, "fraction_curve.csv", "plans.csv", "summary.json"))
stream_curve = pd.read_csv(streamed / "fraction_curve.csv")
base_curve = stream_curve[stream_curve["plan"] == "hot_dp"]
section.table(base_curve[["replicated_fraction", "t1", "memory_vs_rw_mib", "savings_vs_rw_ms"]],
              "curve_replicated_tier", f"The replicated tier alone on {STREAMED}, the claims' "
              "run (the authors' axes)", floatfmt=".4g",
              reads=[streamed / "fraction_curve.csv"])
below = base_curve[base_curve["memory_vs_rw_mib"] <= 0]
minimum = base_curve.loc[base_curve["memory_vs_rw_mib"].idxmin()]
saving = (f"saves memory up to {100 * below['replicated_fraction'].max():.1f}% of the rows"
          if len(below) else "never saves memory")
section.note(
    f"On `{STREAMED}` replicating rows on every device {saving} (the minimum, "
    f"{minimum['memory_vs_rw_mib']:.2f} MiB against RW, at "
    f"{100 * minimum['replicated_fraction']:.1f}%): the replicas cost {4 * exp.embedding_dim} B "
    "per row on every device, while the all-to-all buffers shrink by the hot rows' share of the "
    "lookups. The authors report the minimum at 0.1-0.2% and the break-even near 0.7% on a "
    "production table; the break-even moves with the ratio of the buffers (batch x sequence "
    "length) to the table's rows per device.")

# %% [markdown]
# ## The plans at the base setting

# %%
plans = pd.concat([stream["plans"], data["plans"]], ignore_index=True).drop_duplicates(
    subset=["dataset", "plan"])
table = plans[["dataset", "label", "t1", "t2", "replay_bytes", "replay_inter_bytes",
               "replay_seconds", "replay_memory", "expected_seconds"]].copy()
for col in ("replay_bytes", "replay_inter_bytes", "replay_memory"):
    table[col] = table[col] / 2**20
table = table.rename(columns={"replay_bytes": "MiB moved", "replay_inter_bytes":
                              "MiB inter-node", "replay_seconds": "a2a s (fwd+bwd)",
                              "replay_memory": "memory MiB (max device)",
                              "expected_seconds": "expected a2a s"})
section.table(table, "plans", "Every plan at the base topology, replayed on held-out "
              "iterations: bytes moved per iteration, inter-node (global) bytes, all-to-all "
              "seconds and the largest device's memory (weights + buffers)", floatfmt=".4g",
              reads=[streamed / "plans.csv", streamed / "summary.json",
                     *files(results, datasets, "plans.csv", "summary.json")])

# %% [markdown]
# ## Scaling with devices, the NVLink / NIC ratio and a slow node

# %%
# the paper's headlines against RW (paper_inter_reduction, paper_latency_x), drawn as RW's
# curve scaled by them
# one style per plan (colour, marker, dash); every other plan has a larger hollow marker, so
# plans whose lines coincide (several move the same inter-node bytes) stay visible
_PLAN_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<"]
_PLAN_DASHES = ["-", (0, (5, 2)), (0, (1, 1.5)), (0, (6, 2, 1, 2)), (0, (3, 1.5)),
                (0, (8, 2, 2, 2)), (0, (2, 2)), (0, (4, 1, 1, 1))]
PLAN_STYLE = {}
for i, (plan, colour) in enumerate(palette.colors(PLAN_ORDER).items()):
    hollow = i % 2 == 1
    PLAN_STYLE[plan] = {"color": colour, "marker": _PLAN_MARKERS[i % len(_PLAN_MARKERS)],
                        "ls": _PLAN_DASHES[i % len(_PLAN_DASHES)], "lw": 1.4, "mew": 1.4,
                        "ms": (9, 12)[(i // 2) % 2] if hollow else 6,
                        "mfc": "none" if hollow else colour,
                        "label": LABEL[plan]}
fig, axes = plt.subplots(2, 3, figsize=(10.5, 6.8), sharex="col")
for col, (key, x, xlabel) in enumerate((("device_sweep", "devices", "devices"),
                                        ("link_sweep", "link_ratio",
                                         "NVLink / NIC bandwidth per device (x)"),
                                        ("skew_sweep", "slow_factor",
                                         "slow node's NIC speed (x nominal)"))):
    part = stream[key]
    for row, (y, ylabel) in enumerate((("replay_inter_bytes", "inter-node MiB / iteration"),
                                       ("replay_seconds", "all-to-all s / iteration"))):
        ax = axes[row][col]
        # zero inter-node bytes (a single node) cannot be drawn on the log axis: left out
        values = (part[y] / (2**20 if "bytes" in y else 1)).where(part[y] > 0)
        for plan in PLAN_ORDER:
            line = part.assign(v=values)[part["plan"] == plan].sort_values(x)
            if len(line):
                ax.plot(line[x], line["v"], **PLAN_STYLE[plan])
        rw = part[part["plan"] == "rw"].sort_values(x)
        if len(rw):
            rw_v = (rw[y] / (2**20 if "bytes" in y else 1)).where(rw[y] > 0)
            ref, ref_label = ((rw_v * (1 - paper_inter_reduction),
                               f"paper: {paper_inter_reduction:.0%} less than RW [A]")
                              if "bytes" in y else
                              (rw_v / paper_latency_x,
                               f"paper: RW / {paper_latency_x:g} (almost {paper_latency_x:g}x "
                               "lower latency) [A]"))
            ax.plot(rw[x], ref, color="k", lw=1.6, label=ref_label,
                    ls=(0, (1, 1)) if "bytes" in y else (0, (5, 1, 1, 1)))
            if "bytes" in y and "replay_unseen_share" in rw:  # lookups the profile missed
                ax.plot(rw[x], rw_v * rw["replay_unseen_share"], color="grey", lw=2.4,
                        alpha=0.6, label="ceiling: RW's bytes on rows the profile never saw")
        ax.set(yscale="log", ylabel=ylabel, xlabel=xlabel)
        if key != "skew_sweep":  # log axes, ticked at the swept values
            ticks = sorted(part[x].unique())
            ax.set_xscale("log")
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.minorticks_off()
    if key == "skew_sweep":
        axes[0][col].invert_xaxis()  # once: the column shares its x axis
handles = {}
for ax in axes.flat:
    for h, lab in zip(*ax.get_legend_handles_labels()):
        handles.setdefault(lab, h)
fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncol=3)
section.figure(fig, "sweeps", "Inter-node bytes and all-to-all time per plan against the "
               "number of devices (nodes of "
               f"{topo_cfg.devices_per_node}; one node has no inter-node traffic, not drawn on "
               "the log axis), against NVLink's bandwidth over the NIC's (the NICs as "
               "committed) and against the speed of the slowest node's NICs "
               f"({max(1, topo_cfg.slow_nodes)} slow node), every plan re-planned at each "
               "point; black: the paper's headlines applied to our RW (FlexShard "
               f"{paper_inter_reduction:.0%} less inter-node traffic, "
               f"{paper_latency_x:g}x lower latency; paper values from its abstract, the "
               "lines ours); grey: the inter-node bytes RW moves for rows the profile never "
               "saw, which no plan made from the profile can keep on the node (FlexShard's "
               "floor); plans whose lines coincide show as nested filled and hollow markers",
               setting=ds_setting(STREAMED),
               reads=[streamed / f"{k}.csv" for k in ("device_sweep", "link_sweep",
                                                     "skew_sweep")])



def versus_rw(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    """FlexShard against RW at each point of a sweep: plan, reduction, ceiling, speedup."""
    rows = []
    for point, g in frame.groupby(by):
        p = g.set_index("plan")
        rw_inter = p.loc["rw", "replay_inter_bytes"]
        rows.append({by: point, "t1": int(p.loc["flexshard", "t1"]),
                     "t2": int(p.loc["flexshard", "t2"]),
                     "inter-node reduction": (1 - p.loc["flexshard", "replay_inter_bytes"]
                                              / rw_inter) if rw_inter > 0 else None,
                     "ceiling": 1 - p.loc["rw", "replay_unseen_share"],
                     "a2a speedup": p.loc["rw", "replay_seconds"]
                     / p.loc["flexshard", "replay_seconds"]})
    return pd.DataFrame(rows)


by_devices = versus_rw(stream["device_sweep"], "devices")
by_ratio = versus_rw(stream["link_sweep"], "link_ratio")
shown = by_devices.assign(**{c: (100 * by_devices[c].astype(float)).round(1)
                             for c in ("inter-node reduction", "ceiling")})
section.table(shown.assign(**{"a2a speedup": shown["a2a speedup"].round(2)}).rename(
                  columns={"inter-node reduction": "inter-node reduction %",
                           "ceiling": "ceiling %"}), "device_curve",
              "FlexShard against RW at every device count (each planned on the streamed "
              "profile, replayed on held-out samples): the inter-node reduction, its ceiling "
              "(the replayed lookups on rows the profile saw) and the all-to-all speedup "
              "(modelled)", floatfmt="g", reads=[streamed / "device_sweep.csv"])
inter = by_devices.dropna(subset=["inter-node reduction"])
one_plan = (by_ratio[["t1", "t2"]].drop_duplicates().shape[0] == 1
            and by_ratio["a2a speedup"].max() - by_ratio["a2a speedup"].min() < 1e-9)
section.note(
    f"Over {int(inter['devices'].min())}-{int(inter['devices'].max())} devices FlexShard cuts "
    f"{100 * inter['inter-node reduction'].min():.0f}-"
    f"{100 * inter['inter-node reduction'].max():.0f}% of RW's inter-node bytes, "
    f"{100 * (inter['inter-node reduction'] / inter['ceiling']).min():.0f}-"
    f"{100 * (inter['inter-node reduction'] / inter['ceiling']).max():.0f}% of its ceiling: "
    f"{100 * (1 - inter['ceiling'].max()):.0f}-{100 * (1 - inter['ceiling'].min()):.0f}% of the "
    f"replayed lookups fall on rows the profile of {base['profile_samples']:,} samples never "
    "saw (a long tail at Criteo's cardinality), and a plan made from the profile leaves those "
    "rows where RW has them. Every device count is planned on the same profile, so the ceiling "
    "moves only with the replayed samples (the next section sweeps the profile's length). "
    + ("The NVLink / NIC ratio changes nothing over "
       f"{by_ratio['link_ratio'].min():g}-{by_ratio['link_ratio'].max():g}x: the planner picks "
       "the same plan at every ratio and the all-to-all ends when the NICs' transfers end "
       "(a device's intra- and inter-node transfers run at once; NVLink is never the slower)."
       if one_plan else
       "The NVLink / NIC ratio moves the plan or its time: " + ", ".join(
           f"{r['link_ratio']:g}x: t1 {r['t1']:,}, t2 {r['t2']:,}, {r['a2a speedup']:.2f}x"
           for r in by_ratio.to_dict("records"))
       + "."))

# %% [markdown]
# ## The profile's length: how much of the table the planner saw
#
# A plan can only single out rows its profile saw; the rest stay row-wise, as in RW. The claims'
# run profiles millions of streamed samples; this sweep replans every plan on shorter and longer
# profiles of the same stream and replays them all on the same held-out samples.

# %%
if "profile_sweep" in stream:
    by_profile = versus_rw(stream["profile_sweep"], "profile_samples")
    committed_samples = base["profile_samples"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.9))
    x = by_profile["profile_samples"]
    axes[0].plot(x, 100 * by_profile["ceiling"], color="grey", lw=2.4, alpha=0.6, marker="o",
                 label="coverage: replayed lookups on rows the profile saw (the ceiling)")
    axes[0].plot(x, 100 * by_profile["inter-node reduction"].astype(float),
                 color=palette.COLORS["flexshard"], marker="s",
                 label="FlexShard: inter-node reduction")
    axes[0].axhline(100 * paper_inter_reduction, color="k", ls=(0, (1, 1)),
                    label=f"paper: over {paper_inter_reduction:.0%} [A]")
    axes[0].set(ylabel="% of RW's inter-node bytes / of lookups", ylim=(0, 100))
    axes[1].plot(x, by_profile["a2a speedup"], color=palette.COLORS["flexshard"], marker="s",
                 label="FlexShard: all-to-all speedup over RW (modelled)")
    axes[1].axhline(paper_latency_x, color="k", ls=(0, (5, 1, 1, 1)),
                    label=f"paper: almost {paper_latency_x:g}x [A]")
    axes[1].set(ylabel="RW / FlexShard all-to-all time")
    for ax in axes:
        ax.axvline(committed_samples, color="grey", ls="--", lw=0.9,
                   label=f"committed profile ({committed_samples:,} samples)")
        ax.set(xscale="log", xlabel="profiled samples (streamed)")
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncol=2)
    section.figure(fig, "profile_coverage",
                   "FlexShard against RW as the profile grows: the share of the replayed lookups "
                   "on rows the profile saw (coverage, grey: no profile-driven plan keeps more of "
                   "RW's inter-node bytes off the network), FlexShard's inter-node reduction and "
                   "its modelled all-to-all speedup; every point replans every plan and replays "
                   "the same held-out samples; dashed: the committed profile",
                   setting=ds_setting(STREAMED), reads=[streamed / "profile_sweep.csv"])
    section.table(by_profile.assign(**{c: (100 * by_profile[c].astype(float)).round(1)
                                       for c in ("inter-node reduction", "ceiling")}).rename(
                      columns={"inter-node reduction": "inter-node reduction %",
                               "ceiling": "coverage %"}), "profile_curve",
                  "FlexShard against RW at every profile length", floatfmt="g",
                  reads=[streamed / "profile_sweep.csv"])
    at = by_profile.set_index("profile_samples").loc[committed_samples]
    section.note(
        f"The committed profile ({committed_samples:,} samples) covers "
        f"{100 * at['ceiling']:.1f}% of the replayed lookups; FlexShard then cuts "
        f"{100 * at['inter-node reduction']:.1f}% of RW's inter-node bytes "
        f"({at['a2a speedup']:.2f}x all-to-all, modelled). Over "
        f"{int(x.min()):,}-{int(x.max()):,} samples the coverage runs "
        f"{100 * by_profile['ceiling'].min():.0f}-{100 * by_profile['ceiling'].max():.0f}%, the "
        f"reduction {100 * by_profile['inter-node reduction'].astype(float).min():.0f}-"
        f"{100 * by_profile['inter-node reduction'].astype(float).max():.0f}% and the speedup "
        f"{by_profile['a2a speedup'].min():.2f}-{by_profile['a2a speedup'].max():.2f}x: the "
        "paper's "
        f"over {paper_inter_reduction:.0%} is "
        + ("reached where the profile covers enough of the table"
           if (by_profile["inter-node reduction"].astype(float) > paper_inter_reduction).any()
           else "not reached at any profile length swept") + ".")
else:
    section.note(f"`{claims_ds}` has no streamed run (a dataset of your own has no generator "
                 "to stream past its rows): the plans above are profiled on its split's first "
                 f"{exp.profile_batches} iterations, and no profile-length sweep is shown.")

# %% [markdown]
# ## Per-link traffic

# %%
links = pd.read_csv(streamed / "link_traffic.csv")
fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
vmax = links["bytes"].max() / 2**20
for ax, plan in zip(axes, ("rw", "flexshard"), strict=True):
    m = links[links["plan"] == plan].pivot(index="src", columns="dst", values="bytes") / 2**20
    sns.heatmap(m, ax=ax, cmap="viridis", vmin=0, vmax=vmax, cbar=ax is axes[1],
                cbar_kws={"label": "MiB / iteration"})
    ax.set(title=LABEL[plan], xlabel="to device", ylabel="from device")
section.figure(fig, "link_traffic", "Bytes each device sends to each other device per "
               "iteration (forward), RW against FlexShard: FlexShard's traffic stays inside the "
               f"{topo_cfg.devices_per_node}-device blocks of a node",
               setting=ds_setting(STREAMED),
               reads=[streamed / "link_traffic.csv", streamed / "summary.json"])

# %% [markdown]
# ## Claims

# %%
# workbench/claims/flexshard.py measures both claims on the claims dataset
for key in ("flexshard.a2a_traffic", "flexshard.comm_latency"):
    if has_stream:  # the claims are measured on the streamed run
        section.record(claims.measure(claims_register[key], cfg))
others = [n for n in datasets if n != claims_ds]  # the claims dataset's split: its own point
section.note("On the smaller tables (" + ", ".join(
    f"`{n}`: {summaries[n]['table_rows']:,} rows, "
    + (f"{100 * summaries[n]['inter_traffic_reduction']:.0f}% less inter-node traffic"
       if summaries[n]["inter_traffic_reduction"] is not None
       else summaries[n]["inter_traffic_reduction_note"]) + ", "
    + (f"{summaries[n]['latency_speedup']:.2f}x" if summaries[n]["latency_speedup"]
       else "no communication")
    for n in others) + ") the buffers of an all-to-all outweigh a device's share of the "
    "table, so within RW's memory FlexShard can replicate most or all of the table per node or "
    "everywhere: their numbers say how small the tables are, not how FlexShard scales.")

# %%
section.save()

# %% [markdown]
# ## Explore (live, not part of the report)
#
# Everything above reads the pipeline's outputs in `results/`. The widgets below rerun a small
# variant live through `workbench.api`, in seconds: FlexShard's replicated tier on the chosen
# number of devices and batch, over the experiment's replicated fractions (the chosen one
# marked): the largest device's memory against the expected all-to-all savings, both relative to
# row-wise sharding. Nothing here goes into the report. Under papermill the cell runs once at the
# parameters' values (e.g. `-p replicated_fraction ...`; None: the configuration's); in
# JupyterLab (`make notebooks lab`) moving a widget reruns and redraws it.

# %%
from workbench import explorers

explorer = explorers.show("flexshard", cfg, replicated_fraction=replicated_fraction,
                          devices=devices, per_device=per_device)
