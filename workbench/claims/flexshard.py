"""FlexShard's claims (inter-node traffic, all-to-all latency) from the ``flexshard`` stages.

The committed values come from ``results/flexshard_stream/<claims dataset>/`` (register v8):
every plan profiled on ``experiments.flexshard.stream_profile_batches`` iterations streamed
from the claims dataset's generator, so the profile covers at least 95% of the replayed
lookups, and replayed on the samples after the longest profile (held out). Its
``summary.json`` holds FlexShard's reduction of inter-node bytes and its all-to-all speedup over
row-wise sharding (RW); its sweeps re-plan every plan at each point: ``device_sweep.csv``
(devices), ``link_sweep.csv`` (the NVLink / NIC bandwidth ratio), ``skew_sweep.csv`` (the
slow-node NIC speed) and ``profile_sweep.csv`` (the profile's length in iterations of the base
topology's global batch, with its coverage).
``results/flexshard/<ds>/summary.json`` (each dataset's split, a short profile) are the
dataset condition's other points.

* ``flexshard.a2a_traffic``: 1 - FlexShard / RW inter-node bytes per iteration;
* ``flexshard.comm_latency``: RW / FlexShard all-to-all seconds per iteration (forward +
  backward); the devices, the link ratio, the slow-node NIC speed, the profile length and the
  dataset are the conditions of both (a point whose replay reused profiled samples is left
  out), and so is the baseline (register v6): the workbench's RW, or TorchRec's planner's own
  plan (``summary.json``'s ``torchrec``) within RW's memory or within the device's HBM.

A replay that reuses samples the planner profiled (``replay_in_profile`` > 0: a split too short
for a held-out replay) is no measurement of either claim: the planner has seen the lookups it is
judged on. Such a run gives no value (the row says so), and such a dataset is left out of the
dataset condition.
"""

from __future__ import annotations

from typing import Any

from workbench.claims.measurement import EntryLike, Measurement, Results

#: the baseline condition's values: the workbench's row-wise plan, and TorchRec's planner's own
#: plan (``torchrec_plan.json``) within RW's memory and within the device's HBM
BASELINES = {"rw (own)": None, "torchrec (RW's memory)": "torchrec",
             "torchrec (device HBM)": "torchrec_hbm"}
#: each swept condition: its name in the register, its sweep file and the file's column
SWEEPS = {"devices": ("device_sweep.csv", "devices"),
          "NVLink/NIC ratio": ("link_sweep.csv", "link_ratio"),
          "slow-node NIC speed": ("skew_sweep.csv", "slow_factor"),
          "profile length": ("profile_sweep.csv", "profile_iterations")}
#: the dataset condition's name of the streamed claims run
STREAMED = "{} (streamed)"


def runs(res: Results) -> dict[str, Any]:
    """The streamed claims run's summary (``base``) and sweeps (by condition), and the available
    datasets' split summaries (``summaries``)."""
    def build() -> dict[str, Any]:
        exp = res.cfg.experiments.flexshard
        summaries, _ = res.available("flexshard", exp.datasets)
        sweeps = {name: res.csv("flexshard_stream", exp.claims_dataset, file)
                  for name, (file, _) in SWEEPS.items()}
        base = res.json("flexshard_stream", exp.claims_dataset, "summary.json")
        return {"summaries": summaries, "sweeps": sweeps, "base": base}
    return res.memo("flexshard", build)


def ds_setting(s: dict[str, Any]) -> str:
    """One run's table, lookups, skew, devices and profile."""
    profile = (f"a profile of {s['profile_samples']:,} streamed samples covering "
               f"{100 * (1 - float(s['replay_unseen_share'])):.1f}% of the replayed lookups"
               if s.get("streamed") else
               f"a profile covering {100 * (1 - float(s['replay_unseen_share'])):.0f}% of the "
               "replayed lookups")
    return (f"{s['dataset']}: {s['table_rows']:,}-row table, D = {s['embedding_dim']}, "
            f"{s['lookups_per_device']:,.0f} lookups per device per iteration (mean history "
            f"{s['mean_sequence_length']:.1f}), top 0.1% of rows take "
            f"{100 * s['top_0.1%_share']:.0f}% of lookups; {s['topology']['devices']} devices; "
            + profile)


def _setting_note(res: Results) -> tuple[dict[str, Any], str, str]:
    exp = res.cfg.experiments.flexshard
    base = runs(res)["base"]
    setting = (ds_setting(base) + f"; FlexShard t1 = {base['flexshard']['t1']:,}, t2 = "
               f"{base['flexshard']['t2']:,}; memory limit {exp.memory_limit}; "
               + baseline_source(base))
    unseen = float(base["replay_unseen_share"])
    note = ("our formalisation and assumed topology; the claims run streams the session "
            "generator at Criteo's full cardinality past its materialised rows, every plan "
            "profiled on the first samples and replayed on later ones (held out; datasets that "
            "reuse profiled samples are left out of the dataset condition); replayed memory "
            f"{float(base['memory_vs_rw']):.2f}x RW's (the planner bounds the expected memory); "
            f"{100 * unseen:.1f}% of the replayed lookups fall on rows the profile never saw, "
            "which a plan made from the profile leaves row-wise as RW does (the inter-node "
            f"reduction's ceiling is about {100 * (1 - unseen):.0f}%)")
    return base, setting, note


def dataset_points(res: Results, column: str) -> list[dict[str, Any]]:
    """The dataset condition: the streamed claims run, then each dataset's split run whose
    replay was held out."""
    exp = res.cfg.experiments.flexshard
    out = []
    for name, s in [(STREAMED.format(exp.claims_dataset), runs(res)["base"]),
                    *runs(res)["summaries"].items()]:
        if s.get(column) is not None and held_out(s):
            out.append({"value": name, "values": [float(s[column])]})
    return out


def sweep_points(res: Results, condition: str, column: str,
                 better: str) -> list[dict[str, Any]]:
    """FlexShard against RW at every point of one swept ``condition`` ([`SWEEPS`][]): the
    reduction of ``column`` (``better = "reduction"``) or RW's over FlexShard's (a speedup).
    A point whose replay reused samples its planner profiled is left out."""
    frame = runs(res)["sweeps"][condition]
    by_col = SWEEPS[condition][1]
    out = []
    for point, g in frame.groupby(by_col):
        if "replay_in_profile" in g and float(g["replay_in_profile"].max()) > 0:
            continue
        by = g.set_index("plan")[column]
        if "rw" in by and "flexshard" in by and by["rw"] > 0 and by["flexshard"] > 0:
            value = (1 - by["flexshard"] / by["rw"]) if better == "reduction" \
                else by["rw"] / by["flexshard"]
            out.append({"value": float(point), "values": [float(value)]})
    return out


def baseline_points(base: dict[str, Any], column: str) -> list[dict[str, Any]]:
    """FlexShard's ``column`` (a summary value against a baseline) against each of
    [`BASELINES`][] that the stage planned (a refused ratio is left out)."""
    planned = base.get("torchrec", {})
    out = []
    for label, name in BASELINES.items():
        value = base.get(column) if name is None else planned.get(name, {}).get(column)
        if value is not None and (name is None or name in planned):
            out.append({"value": label, "values": [float(value)]})
    return out


def baseline_source(base: dict[str, Any]) -> str:
    """Where the committed baseline comes from, in words (TorchRec's plan beside it)."""
    planned = base.get("torchrec", {})
    if "torchrec" not in planned:
        return "baseline: the workbench's row-wise plan (TorchRec's planner did not run)"

    def chose(t: dict[str, Any]) -> str:
        return ("found no plan" if "no_plan" in t
                else f"chose {t['sharding_type']} ({t['compute_kernel']})")

    t, hbm = planned["torchrec"], planned.get("torchrec_hbm")
    same = ("" if "no_plan" in t else ", which places every row where it does"
            if t["same_rows_as_rw"] else ", which places the rows differently")
    other = f"; with the device's HBM it {chose(hbm)}" if hbm else ""
    return (f"baseline: the workbench's row-wise plan (contiguous blocks of ceil(N/P) ids); "
            f"TorchRec's planner, given RW's memory per device, {chose(t)}{same}{other}")


def held_out(summary: dict[str, Any]) -> bool:
    """Whether a dataset's replay used only samples its planner did not profile."""
    return float(summary.get("replay_in_profile") or 0.0) == 0.0


def _committed(res: Results, base: dict[str, Any], column: str,
               no_value: str) -> tuple[float | None, str]:
    """The claims dataset's ``column`` and why it may be missing: the stage's own
    ``<column>_note`` (else ``no_value``), or, when its replay reused samples the planner
    profiled, no value and that reason."""
    if held_out(base):
        return base[column], base.get(f"{column}_note") or no_value
    name = res.cfg.experiments.flexshard.claims_dataset
    return None, (f"the replay of {name} reused samples the planner profiled "
                  f"({100 * float(base['replay_in_profile']):.0f}% of those replayed): no "
                  "held-out measurement; raise experiments.flexshard.profile_sweep's longest "
                  "length past the replay")


def a2a_traffic(res: Results, entry: EntryLike) -> Measurement:
    """FlexShard's inter-node traffic reduction against RW."""
    base, setting, note = _setting_note(res)
    reduction, missing = _committed(res, base, "inter_traffic_reduction",
                                    "no inter-node traffic")
    return Measurement(
        entry.key,
        (f"{100 * reduction:.1f}% ({100 * float(base['traffic_reduction']):.1f}% of all bytes)"
         if reduction is not None else "-"), setting,
        {"values": [reduction] if reduction is not None else None, "missing": missing},
        {**{c: sweep_points(res, c, "replay_inter_bytes", "reduction") for c in SWEEPS},
         "dataset": dataset_points(res, "inter_traffic_reduction"),
         "baseline": baseline_points(base, "inter_traffic_reduction") if held_out(base) else []},
        note)


def comm_latency(res: Results, entry: EntryLike) -> Measurement:
    """FlexShard's all-to-all speedup against RW."""
    base, setting, note = _setting_note(res)
    speedup, missing = _committed(res, base, "latency_speedup", "no communication left")
    return Measurement(
        entry.key, f"{speedup:.2f}x" if speedup is not None else "-",
        setting,
        {"values": [speedup] if speedup is not None else None, "missing": missing},
        {**{c: sweep_points(res, c, "replay_seconds", "speedup") for c in SWEEPS},
         "dataset": dataset_points(res, "latency_speedup"),
         "baseline": baseline_points(base, "latency_speedup") if held_out(base) else []},
        note + "; the all-to-all time of one iteration (forward + backward), not the whole step")
