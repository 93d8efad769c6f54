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
# (`workbench/cluster/remote_ps.py`), dense gradients averaged with a real `all_reduce`, on two
# networks: every link shaped in its sender (token bucket + latency,
# `workbench/cluster/shaped_link.py`), and a real network of one namespace per process whose
# links the kernel shapes (`workbench/cluster/edge_network.py`, one `torchrun` per node).
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
wire = pd.read_csv(results / "bytes.csv")
if checks.empty or phases.empty or esd.empty:
    raise RuntimeError(f"{results}: no checked runs or no timed iterations")
NETWORK_NAMES = {"token_bucket": "token bucket (sender-shaped, loopback)",
                 "kernel": "kernel-shaped (namespaces, tc)"}
networks = summary["networks"]
kernel = summary.get("kernel_network", {})
links = ", ".join(f"{b:g} Gb/s / {l:g} ms" for b, l in
                  zip(summary["bandwidth_gbps"], summary["latency_ms"], strict=True))
setting = (f"{dataset}, {summary['model']} (dense optimizer {summary['optimizer']}), "
           f"{summary['workers']} workers ({links}), global batch {summary['batch_size']}, "
           f"{summary['steps']} BSP iterations, {summary['cache_policy']} cache "
           f"{summary['cache_ratio']:g} of the table, seed {summary['seed']}")
ran = "; ".join(NETWORK_NAMES[n] for n in networks)
skipped = "".join(f" The {n} network was skipped: {why}." for n, why in
                  summary["networks_skipped"].items())
latency_note = ""
if "kernel" in networks:
    latency_note = (" On the kernel network the links' latency is "
                    + ("the configured one (netem)." if kernel.get("latency_applied") else
                       "the veths' own, about "
                       + ", ".join(f"{v * 1e3:.0f} us" for v in kernel["effective_latency_ms"])
                       + " one way (this kernel has no netem to add delay): the clock is "
                       "evaluated at that latency, so both sides see the same links."))
section = Section(
    name="distributed", title="The emulator against real processes (torch.distributed)",
    out_dir=out_dir, config=cfg,
    intro=("The same runs, emulated and on real processes: a parameter-server process and "
           f"{summary['workers']} worker processes exchanging HET's pulls and pushes over gloo, "
           "dense gradients averaged with a real all_reduce, on each network that ran: "
           f"{ran}.{skipped} The token-bucket network shapes each link in its sender (a second "
           "model of the link); the kernel network gives every process its own network "
           "namespace, launched by one torchrun per node, and the kernel's tc shapes each "
           f"link, so what it measures is a real TCP network's.{latency_note} The exact checks "
           "say whether the emulator's protocol is the real one; the timing says how far its "
           "clock is from wall time on this machine. No paper claim is measured here: this "
           "validates the instrument the HET and ESD sections use."))

# %% [markdown]
# ## Exact checks: counters, rows, bytes, versions, parameters

# %%
table = checks[["network", "dense_mode", "bound", "counters_identical", "counter_mismatches",
                "counter_cells", "pulled_rows_emulated", "pulled_rows_distributed",
                "pushed_rows_emulated", "pushed_rows_distributed", "embedding_bytes_identical",
                "meta_bytes_emulated", "meta_bytes_measured", "meta_bytes_protocol_extra",
                "meta_bytes_explained", "header_bytes_measured", "versions_identical",
                "table_max_rel_diff", "dense_max_rel_diff"]].copy()
section.table(
    table, "checks",
    "Per network and staleness bound: every cache counter of every (iteration, worker) and of "
    "the final flush, emulated against distributed; rows pulled and pushed; embedding bytes "
    "(rows x D x 4, what the clock counts) against the bytes the processes really sent and "
    "received; metadata bytes: the clock's 16 B per key read and per pushed row, plus what the "
    "real protocol must also carry (a reply mask of one bit per key and the 8-byte version of "
    f"every pulled row); {summary['runs'][0]['startup_s']:.1f} s of process start-up not "
    "counted. Parameter differences are relative to the largest parameter.", setting,
              reads=[results / "check.json"])
ok = summary["counters_identical"] and bool(table["embedding_bytes_identical"].all()) \
    and bool(table["meta_bytes_explained"].all()) and bool(table["versions_identical"].all())
s0 = checks[checks["bound"] == 0]
section.note(
    ("**Identical.** " if ok else "**MISMATCH** (see the table). ")
    + "Counters, rows and embedding bytes agree exactly for every bound "
    f"({', '.join(str(b) for b in exp.bounds)}) on every network; the measured metadata bytes "
    "equal the clock's plus the protocol's extra to the byte. At s = 0 the trained table "
    f"differs by at most {s0['table_max_rel_diff'].max():.1e} and the dense parameters by "
    f"{s0['dense_max_rel_diff'].max():.1e} of their largest value (tolerance "
    f"{summary['param_rtol']:g}: "
    + ("within" if summary["parameters_within_tolerance"] else "**outside**")
    + "): the worker processes sum the dense gradients in a gloo all_reduce and compute each "
    "sample's embedding gradient in a smaller batch than the emulator's single backward pass, "
    "so the float reduction order differs. The check trains with "
    f"{summary['optimizer']}: Adam would turn such a 1e-7 difference of a near-zero gradient "
    "into a full step.")

# %% [markdown]
# ## Wall time against the emulated clock, per phase and network

# %%
long = []
for phase, measured, emulated in (("compute", "compute_measured", "compute_emulated"),
                                  ("pull", "pull_measured", "pull_emulated"),
                                  ("push", "push_measured", "push_emulated"),
                                  ("dense collective", "collective_measured",
                                   "collective_emulated"),
                                  ("iteration", "wall_measured", "step_emulated")):
    for source, col in (("measured (processes)", measured), ("emulated clock", emulated)):
        long.append(phases.groupby(["network", "dense_mode", "run", "worker"])[col].mean()
                    .rename("seconds").reset_index().assign(phase=phase, source=source))
long = pd.concat(long, ignore_index=True)
long["ms"] = 1e3 * long["seconds"]
long["network"] = long["network"].map(NETWORK_NAMES)
long["worker"] = "worker " + long["worker"].astype(str)
first_mode = summary["dense_modes"][0]
base = long[(long["run"] == "validation s = 0") & (long["dense_mode"] == first_mode)]
grid = sns.catplot(data=base, x="phase", y="ms", hue="source", col="worker", row="network",
                   kind="bar", height=2.8, aspect=1.5, sharey=False)
grid.set_axis_labels("", "ms per iteration (mean)")
grid.set_titles("{row_name}, {col_name}")
section.figure(grid.figure, "phases",
               f"Mean milliseconds per iteration and phase at s = 0 ({first_mode}): measured "
               "wall time of the "
               "processes against the emulated clock's, per network and worker (first "
               f"{summary['warmup']} iterations dropped). Pull: the request until the reply; "
               "push: from the worker's send until the server has all of it (one machine-wide "
               "clock); the wait for the other workers' pushes (BSP) is in the iteration, not "
               "in a phase.", setting,
               reads=[results / "phases.csv", results / "summary.json"])
plt.close("all")
# why a phase stays outside the band: what each phase's measurement holds that the clock lacks
LOW = {  # below the band
    "push": "the refit's per-message cost is fitted on the pulls (a request and a reply that "
            "wait for the server); a push is one way, so the refit overcharges it",
    "allreduce": "the ring's per-step cost was fitted on one flat collective, and DDP's small "
                 "buckets do not each pay it in full",
}
WHY = {  # above it
    "compute": "the check's W + 2 processes (server, workers, dispatcher) share this machine's "
               "cores and preempt one another, while the calibration timed one process alone",
    "push": "a push counts until the server has read all of it, and the server reads one "
            "message at a time: a fast-link worker's push waits behind a slow-link worker's "
            "(head of line), while the clock gives every worker its own parallel link",
    "pull": "the server serves one request at a time, so a pull also waits for the other "
            "workers' exchanges (queueing the clock's max(link, server) does not model)",
    "allreduce": "gloo's own cost per ring step, which only the refit clock has",
    "iteration": "the sum of the phases above, and the BSP waits between them",
}
all_ratios = pd.DataFrame(summary["phase_ratios"])
PHASE_COLUMNS = ["pull", "push", "comm", "compute", "allreduce", "allreduce_with_wait",
                 "iteration"]
lo, hi = summary["band"]
all_ratios = all_ratios.assign(order=all_ratios["network"].map(networks.index),
                               esd=all_ratios["run"].str.startswith("ESD")) \
    .sort_values(["order", "dense_mode", "clock", "esd", "run"]) \
    .drop(columns=["order", "esd"]).reset_index(drop=True)
TARGET = ["pull", "push", "compute", "allreduce", "iteration"]  # the phases the band is set on
all_ratios["outside band"] = all_ratios.apply(
    lambda r: ", ".join(p for p in TARGET if not lo <= r[p] <= hi) or "-", axis=1)
all_ratios["why"] = all_ratios.apply(lambda r: "; ".join(
    f"{p}: " + ((LOW if r[p] < lo else WHY).get(p, WHY[p]))
    for p in TARGET if not lo <= r[p] <= hi) or "-", axis=1)
section.table(all_ratios[["network", "dense_mode", "run", "clock", *PHASE_COLUMNS,
                          "outside band", "why"]], "phase_ratios",
              "Measured / emulated per phase (means), per network, dense mode, run and clock: "
              "`calibrated` is the pipeline's clock (software costs measured in process by the "
              "calibrate stage, no per-step cost of the ring); `refit` has the per-exchange and "
              "per-row costs and the ring's per-step cost fitted on that network's validation "
              "runs (in sample there, out of sample on ESD's heterogeneous edge profile: links "
              + ", ".join(f"{b:g}" for b in summary["esd_bandwidth_gbps"])
              + " Gb/s, a dispatcher process). `allreduce` is the dense collective itself (every "
              "bucket's; per iteration the last worker to enter it); `allreduce_with_wait` the "
              "dense sync each worker waited for past its backward (with the optimizer step and "
              f"the wait for the slowest worker). Target band {lo:g}-{hi:g}.", setting,
              reads=[results / "phases.csv"])
ratios = all_ratios[(all_ratios["clock"] == "calibrated")
                    & (all_ratios["dense_mode"] == first_mode)]
out_of_sample = all_ratios[all_ratios["clock"] == "refit (out of sample)"]
outside = {}
for _, row in out_of_sample.iterrows():
    for phase in TARGET:
        if not lo <= row[phase] <= hi:
            outside.setdefault((phase, row[phase] < lo), []).append(
                f"{row[phase]:.2f}x ({NETWORK_NAMES[row['network']].split(' (')[0]}, "
                f"{row['dense_mode']}, {row['run']})")
inside = [p for p in TARGET if not any(phase == p for phase, _ in outside)]
section.note(
    f"**Against the band {lo:g}-{hi:g}** (the refit clock on ESD's runs, out of sample: its "
    "costs were fitted on the validation runs' links, not these): "
    + (f"{', '.join(inside)} within it everywhere. " if inside else "")
    + " ".join(f"**{phase}** {'below' if low else 'above'} it in {len(v)} of "
               f"{len(out_of_sample)} runs ({'; '.join(v)}): "
               f"{(LOW if low else WHY).get(phase, WHY[phase])}."
               for (phase, low), v in outside.items())
    + " The calibrated clock (in-process software costs, no per-step cost of the ring) is "
      "the pipeline's: its pull and push ratios show what two real processes and a kernel add "
      "to the in-process calibration.")
validation = ratios[ratios["run"].str.startswith("validation")]


def _ratio_list(network, phase, rows=validation):
    rows = rows[rows["network"] == network]
    return ", ".join(f"{r[phase]:.2f}x ({r['run']})" for _, r in rows.iterrows())


clock = summary["clock"]
text = (f"The clock's compute is this machine's calibration ({clock['describe']}). ")
for network in networks:
    fit = summary["fitted_software"][network]
    text += (f"**{NETWORK_NAMES[network]}**: compute {_ratio_list(network, 'compute')}, pull "
             f"{_ratio_list(network, 'pull')}, push {_ratio_list(network, 'push')}, all-reduce "
             f"{_ratio_list(network, 'allreduce')}, iteration "
             f"{_ratio_list(network, 'iteration')}; fitted on its {fit['samples']} pull "
             f"exchanges: {1e6 * fit['message_s']:.0f} us per exchange + "
             f"{1e6 * fit['row_s']:.2f} us per row; the ring's own cost "
             f"{1e6 * fit['ring_step_s']:.0f} us per step (fitted on the after-backward "
             "collectives). ")
esd_runs = ratios[ratios["run"].str.startswith("ESD")]
for network in networks:
    text += (f"On ESD's heterogeneous profile ({NETWORK_NAMES[network]}): pull "
             f"{_ratio_list(network, 'pull', esd_runs)}; push "
             f"{_ratio_list(network, 'push', esd_runs)}; all-reduce "
             f"{_ratio_list(network, 'allreduce', esd_runs)}; iteration "
             f"{_ratio_list(network, 'iteration', esd_runs)}. ")
per_message = clock["client_message_s"] + clock["server_message_s"]
base_runs = phases[phases["run"] == "validation s = 0"]
by_worker = base_runs.groupby(["network", "worker"])[["push_measured", "push_emulated"]].mean()
fast = int(base_runs["worker"].max())  # the last worker has the fastest link in the default
text += ("The all-reduce ratio is the collective itself: per iteration the time of the worker "
         "that entered it last; `allreduce_with_wait` (the mean over workers) also holds the "
         "faster-link worker's wait inside the all_reduce for the slower one, most of the gap "
         "between the two. ")
if "kernel" in networks:
    k = by_worker.loc[("kernel", fast)]
    text += ("On the kernel network a push counts until the server has read all of it, and "
             "the server reads one message at a time: the fastest-link worker's push "
             f"({1e3 * k['push_measured']:.1f} ms measured against the clock's "
             f"{1e3 * k['push_emulated']:.1f} ms at s = 0) waits behind the slow-link worker's, "
             "still crossing its link, while the clock gives every worker a parallel link; the "
             "token bucket hides this wait, because a sender there holds its message until the "
             "bucket lets it go, so the server is never left reading a slow payload. ")
per_row = clock["client_row_s"] + clock["server_row_s"]
text += (f"The calibration charges {1e6 * per_message:.0f} us per message and "
         f"{1e6 * per_row:.2f} us per row (client + server), measured in one process: the "
         "real exchanges add what the in-process measurement cannot see (two processes, the "
         "kernel's sockets, gloo's send and receive, the server serving one message at a "
         "time), which is what the refit clock adds. The clock's ring all-reduce is 2(W-1) "
         "steps of the slowest link's latency + bytes / (W x bandwidth), plus the collective's "
         "own per-step cost in the refit clock; the wait for the slowest worker's backward is "
         "in `allreduce_with_wait`, not in the collective. On the kernel "
         "network every byte also carries TCP/IP and Ethernet headers and gloo's framing (the "
         "table below), and the rate is the wire's, headers included.")
section.note(text)

# %% [markdown]
# ## Bytes on the wire: the kernel's counters against the backend's and the clock's

# %%
if wire.empty:
    section.note("The kernel network did not run here, so no interface counters were read."
                 + skipped)
else:
    view = wire[["run", "worker", "iterations", "kernel_bytes", "kernel_packets",
                 "header_bytes", "backend_bytes", "gloo_framing_bytes",
                 "allreduce_framing_per_iteration", "clock_bytes", "kernel_over_backend",
                 "kernel_over_clock"]]
    section.table(
        view, "bytes",
        "Per kernel-network run and worker, over every iteration: the bytes on the worker's "
        "veth as the kernel counted them (both directions, `/proc/<pid>/net/dev`) against the "
        "backend's own accounting (every message's header and arrays, and the all-reduce's ring "
        "share each way) and the clock's (embedding, metadata and ring bytes). kernel = "
        "headers (66 B per packet: Ethernet, IPv4, TCP with timestamps) + backend + gloo's "
        "framing of each point-to-point transfer (144 B) + the all-reduce's own framing (what "
        "remains, per iteration).", setting,
                  reads=[results / "bytes.csv"])
    worst = wire.loc[wire["kernel_over_clock"].idxmax()]
    section.note(
        "The backend's accounting explains the kernel's counts once packet headers and gloo's "
        "framing are added: kernel / backend is "
        f"{wire['kernel_over_backend'].min():.2f}-{wire['kernel_over_backend'].max():.2f}x, "
        "kernel / clock "
        f"{wire['kernel_over_clock'].min():.2f}-{wire['kernel_over_clock'].max():.2f}x (the "
        f"most in {worst['run']}, worker {worst['worker']}). The clock counts payload only; a "
        "small message (a key list, an ACK) carries more header than payload, so the gap is "
        "largest where the messages are small, and a clock calibrated against a real network "
        "must charge a per-message byte overhead, not only a per-message time.")

# %% [markdown]
# ## ESD on real processes: a dispatcher process, heterogeneous edge links

# %%
esd_links = ", ".join(f"{b:g}" for b in summary["esd_bandwidth_gbps"])
esd_setting = (f"{dataset}, {summary['model']}, {summary['esd_workers']} workers, links "
               f"{esd_links} Gb/s, {summary['steps']} iterations, every dispatcher in its own "
               "process sending each worker its samples (the baseline too), on each network")
view = esd[["network", "dense_mode", "dispatcher", "step_s_measured", "step_s_emulated", "speedup_measured",
            "speedup_emulated", "embedding_bytes_measured", "decision_s_mean",
            "dispatch_wait_s_mean", "counters_identical"]]
section.table(view, "esd", "Mean BSP iteration (slowest worker) measured end to end against "
              "the emulated clock's step, and the speedup over "
              f"`{summary['esd_baseline']}` in each, per network and dense mode; decision "
              "seconds per batch in "
              "the dispatcher process and the workers' wait for their samples.", esd_setting,
              reads=[results / "esd.csv"])
melted = esd.melt(id_vars=["network", "dense_mode", "dispatcher"],
                  value_vars=["speedup_measured", "speedup_emulated"],
                  var_name="source", value_name="speedup")
melted["source"] = melted["source"].map({"speedup_measured": "measured (processes)",
                                         "speedup_emulated": "emulated clock"})
melted["network"] = melted["network"].map(lambda n: NETWORK_NAMES[n].split(" (")[0])
grid = sns.catplot(data=melted, x="dispatcher", y="speedup", hue="source", col="network",
                   row="dense_mode", kind="bar", height=2.6, aspect=1.4)
for ax in grid.axes.flat:
    ax.axhline(1.0, color="0.4", lw=0.8)
grid.set_axis_labels("", f"speedup over {summary['esd_baseline']}")
grid.set_titles("{col_name}, {row_name}")
section.figure(grid.figure, "esd_speedup", "Per-iteration speedup of each dispatcher over the "
               "baseline, measured on processes and on the emulated clock, per network and "
               "dense mode.",
               esd_setting,
               reads=[results / "esd.csv", results / "summary.json"])
plt.close("all")
lines = []
for (network, mode), rows in esd.groupby(["network", "dense_mode"], sort=False):
    best = rows.loc[rows["speedup_measured"].idxmax()]
    lines.append(f"{NETWORK_NAMES[network]} ({mode}): `{best['dispatcher']}` at "
                 f"{best['speedup_measured']:.3f}x the baseline's iteration rate measured "
                 f"(clock {best['speedup_emulated']:.3f}x), deciding in "
                 f"{1e3 * best['decision_s_mean']:.1f} ms per batch while the workers waited "
                 f"{1e3 * best['dispatch_wait_s_mean']:.2f} ms per iteration for their samples")
section.note(
    "Best measured: " + "; ".join(lines) + ". The dispatcher decides on a replica of the "
    "caches' metadata (the protocol replayed without values) and runs ahead of the workers, so "
    "its decision overlaps their training. Counters against the emulated run with the same "
    "dispatcher: "
    + ("identical for every dispatcher and network." if esd["counters_identical"].all() else
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
