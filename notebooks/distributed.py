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
# # The emulated cluster against real processes
#
# Every other notebook's cluster numbers come from one process emulating all workers and an
# analytic clock. Here the same small runs go through the **distributed backend**
# (`workbench/training/distributed.py`): a parameter-server process and W worker processes on
# torch.distributed (gloo, loopback), HET's pulls and pushes as real messages
# (`workbench/cluster/remote_ps.py`), dense gradients averaged with a real `all_reduce`, every
# link shaped in its sender (token bucket + latency, `workbench/cluster/shaped_link.py`).
# Reads `results/distributed_check/<dataset>/` (the `distributed_check` stage). Knobs:
# `workbench/conf/stages/distributed_check.yaml`.

# %% tags=["parameters"]
params_file = "params.yaml"  # the composed config whose outputs are shown (from the repo root)
out_dir = None  # figures, tables, section.json; None: scratch/ (dvc repro: reports/)
dataset = None  # any preprocessed dataset (yours too); None: the pipeline's
# the live exploration at the end (not part of the report) starts at these; None: the config's
bandwidth_gbps = None  # every worker's link, Gb/s
latency_ms = None  # every worker's link latency, ms

# %%
import json

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from workbench.explorers import notebook_config
from workbench.report.plotting import set_theme
from workbench.report.sections import Section

set_theme()
cfg = notebook_config("distributed", params_file, dataset, bandwidth_gbps=bandwidth_gbps,
                      latency_ms=latency_ms)
exp = cfg.experiments.distributed_check
dataset = cfg.experiments.het_train.dataset
results = cfg.paths.resolve("results") / "distributed_check" / dataset
summary = json.loads((results / "summary.json").read_text())
checks = pd.DataFrame(json.loads((results / "check.json").read_text())["bounds"])
phases = pd.read_csv(results / "phases.csv")
esd = pd.read_csv(results / "esd.csv")
if checks.empty or phases.empty or esd.empty:
    raise RuntimeError(f"{results}: no checked runs or no timed iterations")
links = ", ".join(f"{b:g} Gb/s / {l:g} ms" for b, l in
                  zip(summary["bandwidth_gbps"], summary["latency_ms"], strict=True))
setting = (f"{dataset}, {summary['model']} (dense optimizer {summary['optimizer']}), "
           f"{summary['workers']} workers ({links}), global batch {summary['batch_size']}, "
           f"{summary['steps']} BSP iterations, {summary['cache_policy']} cache "
           f"{summary['cache_ratio']:g} of the table, seed {summary['seed']}")
section = Section(
    name="distributed", title="The emulator against real processes (torch.distributed)",
    out_dir=out_dir,
    intro=("The same runs, emulated and on real processes: a parameter-server process and "
           f"{summary['workers']} worker processes exchanging HET's pulls and pushes over gloo "
           "on loopback, each link shaped in its sender, dense gradients averaged with a real "
           "all_reduce. The exact checks say whether the emulator's protocol is the real one; "
           "the timing says how far its clock is from wall time on this machine. No paper "
           "claim is measured here: this validates the instrument the HET and ESD sections "
           "use."))

# %% [markdown]
# ## Exact checks: counters, rows, bytes, versions, parameters

# %%
table = checks[["bound", "counters_identical", "counter_mismatches", "counter_cells",
                "pulled_rows_emulated", "pulled_rows_distributed", "pushed_rows_emulated",
                "pushed_rows_distributed", "embedding_bytes_identical",
                "meta_bytes_emulated", "meta_bytes_measured", "meta_bytes_protocol_extra",
                "meta_bytes_explained", "header_bytes_measured", "versions_identical",
                "table_max_rel_diff", "dense_max_rel_diff"]].copy()
section.table(
    table, "checks",
    "Per staleness bound: every cache counter of every (iteration, worker) and of the final "
    "flush, emulated against distributed; rows pulled and pushed; embedding bytes (rows x D x 4, "
    "what the clock counts) against the bytes the processes really sent and received; metadata "
    "bytes: the clock's 16 B per key read and per pushed row, plus what the real protocol must "
    "also carry (a reply mask of one bit per key and the 8-byte version of every pulled row); "
    f"{summary['runs'][0]['startup_s']:.1f} s of process start-up not counted. Parameter "
    "differences are relative to the largest parameter.", setting)
ok = summary["counters_identical"] and bool(table["embedding_bytes_identical"].all()) \
    and bool(table["meta_bytes_explained"].all()) and bool(table["versions_identical"].all())
s0 = checks[checks["bound"] == 0].iloc[0]
section.note(
    ("**Identical.** " if ok else "**MISMATCH** (see the table). ")
    + f"Counters, rows and embedding bytes agree exactly for every bound "
    f"({', '.join(str(b) for b in checks['bound'])}); the measured metadata bytes equal the "
    "clock's plus the protocol's extra to the byte. At s = 0 the trained table differs by "
    f"{s0['table_max_rel_diff']:.1e} and the dense parameters by {s0['dense_max_rel_diff']:.1e} "
    f"of their largest value (tolerance {summary['param_rtol']:g}: "
    + ("within" if summary["parameters_within_tolerance"] else "**outside**")
    + "): the worker processes sum the dense gradients in a gloo all_reduce and compute each "
    "sample's embedding gradient in a smaller batch than the emulator's single backward pass, "
    "so the float reduction order differs. The check trains with "
    f"{summary['optimizer']}: Adam would turn such a 1e-7 difference of a near-zero gradient "
    "into a full step.")

# %% [markdown]
# ## Wall time against the emulated clock, per phase

# %%
long = []
for phase, measured, emulated in (("compute", "compute_measured", "compute_emulated"),
                                  ("PS communication", "comm_measured", "comm_emulated"),
                                  ("all-reduce", "allreduce_measured", "allreduce_emulated"),
                                  ("iteration", "wall_measured", "step_emulated")):
    for source, col in (("measured (processes)", measured), ("emulated clock", emulated)):
        long.append(phases.groupby(["bound", "worker"])[col].mean().rename("seconds")
                    .reset_index().assign(phase=phase, source=source))
long = pd.concat(long, ignore_index=True)
long["ms"] = 1e3 * long["seconds"]
grid = sns.catplot(data=long, x="phase", y="ms", hue="source", col="worker", row="bound",
                   kind="bar", height=3.2, aspect=1.4, sharey=False)
grid.set_axis_labels("", "ms per iteration (mean)")
section.figure(grid.figure, "phases",
               "Mean seconds per iteration and phase: measured wall time of the processes "
               "against the emulated clock's, per worker and bound (first "
               f"{summary['warmup']} iterations dropped). PS communication = the pull exchange "
               "+ sending the push; the wait for the other workers' pushes (BSP) is in the "
               "iteration, not in a phase.", setting)
plt.close("all")
ratios = pd.DataFrame(summary["phase_ratios"]).T.rename_axis("bound").reset_index()
section.table(ratios, "phase_ratios", "Measured / emulated per phase (means).", setting)
fit = summary["fitted_software"]
clock = summary["clock"]
section.note(
    f"The clock's compute is this machine's calibration ({clock['describe']}); measured / "
    "emulated compute is "
    + ", ".join(f"{r['compute']:.2f}x (s = {r['bound']})" for _, r in ratios.iterrows())
    + ": the workers run as separate processes on 2 cores beside the server's sender threads. "
    "The all-reduce is slower than the clock's ring term "
    + ", ".join(f"{r['allreduce']:.2f}x" for _, r in ratios.iterrows())
    + " because the clock charges only 2(W-1)/W x dense bytes / the slowest link, while a "
    "real ring also pays 2(W-1) latencies, gloo's own copies, and the wait for the slowest "
    "worker's backward pass. PS communication: "
    + ", ".join(f"{r['comm']:.2f}x" for _, r in ratios.iterrows())
    + f". Fitted on the {fit['samples']} measured pull exchanges (pull seconds minus the shaped "
    "links' latencies and bytes / bandwidth, against rows handled): "
    f"{1e6 * fit['message_s']:.0f} us per exchange + {1e6 * fit['row_s']:.2f} us per row "
    f"(median residual {1e3 * fit['residual_median_s']:.2f} ms), against the calibrated "
    f"{1e6 * (clock['client_message_s'] + clock['server_message_s']):.0f} us per message and "
    f"{1e6 * (clock['client_row_s'] + clock['server_row_s']):.2f} us per row (client + server). "
    "The real exchange also pays gloo's send/receive of two tensors per message each way and "
    "numpy framing, which the calibration's in-process serialisation loop does not.")

# %% [markdown]
# ## ESD on real processes: a dispatcher process, heterogeneous edge links

# %%
esd_links = ", ".join(f"{b:g}" for b in summary["esd_bandwidth_gbps"])
esd_setting = (f"{dataset}, {summary['model']}, {summary['esd_workers']} workers, links "
               f"{esd_links} Gb/s, {summary['steps']} iterations, every dispatcher in its own "
               "process sending each worker its samples (the baseline too)")
view = esd[["dispatcher", "step_s_measured", "step_s_emulated", "speedup_measured",
            "speedup_emulated", "embedding_bytes_measured", "decision_s_mean",
            "dispatch_wait_s_mean", "counters_identical"]]
section.table(view, "esd", "Mean BSP iteration (slowest worker) measured end to end against "
              "the emulated clock's step, and the speedup over "
              f"`{summary['esd_baseline']}` in each; decision seconds per batch in the "
              "dispatcher process and the workers' wait for their samples.", esd_setting)
fig, ax = plt.subplots(figsize=(6, 3.4))
melted = esd.melt(id_vars="dispatcher", value_vars=["speedup_measured", "speedup_emulated"],
                  var_name="source", value_name="speedup")
melted["source"] = melted["source"].map({"speedup_measured": "measured (processes)",
                                         "speedup_emulated": "emulated clock"})
sns.barplot(data=melted, x="dispatcher", y="speedup", hue="source", ax=ax)
ax.axhline(1.0, color="0.4", lw=0.8)
ax.set_ylabel(f"speedup over {summary['esd_baseline']}")
section.figure(fig, "esd_speedup", "Per-iteration speedup of each dispatcher over the baseline, "
               "measured on processes and on the emulated clock.", esd_setting)
plt.close(fig)
best = esd.iloc[esd["speedup_measured"].idxmax()]
section.note(
    f"Best measured: `{best['dispatcher']}` at {best['speedup_measured']:.3f}x the baseline's "
    f"iteration rate (emulated clock: {best['speedup_emulated']:.3f}x). The dispatcher decides "
    "on a replica of the caches' metadata (the protocol replayed without values), runs ahead of "
    "the workers and overlaps its decision "
    f"({1e3 * best['decision_s_mean']:.1f} ms per batch) with their training: the workers "
    f"waited {1e3 * best['dispatch_wait_s_mean']:.2f} ms per iteration for their samples. "
    "Counters against the emulated run with the same dispatcher: "
    + ("identical for every dispatcher." if esd["counters_identical"].all() else
       "**different** for " + ", ".join(esd.loc[~esd["counters_identical"], "dispatcher"])
       + "."))

# %%
section.save()

# %% [markdown]
# ## Explore (live, not part of the report)
#
# Everything above reads the pipeline's outputs in `results/`. The widgets below rerun a small
# variant live through `workbench.api`, in seconds: the emulated clock of this section's small
# cluster (no process is spawned) on the chosen link, a few iterations without a cache and with
# HET's: milliseconds per iteration of compute and of communication. Nothing here goes into the
# report. Under papermill the cell runs once at the parameters' values (e.g. `-p bandwidth_gbps
# ...`; None: the configuration's); in JupyterLab (`make notebooks lab`) moving a widget reruns
# and redraws it.

# %%
from workbench import explorers

explorer = explorers.show("distributed", cfg, bandwidth_gbps=bandwidth_gbps, latency_ms=latency_ms)
