"""FlexShard's claims (inter-node traffic, all-to-all latency) from the ``flexshard`` stage.

Reads ``results/flexshard/<ds>/``: ``summary.json`` (the plans replayed on the claims dataset:
FlexShard's reduction of inter-node bytes and its all-to-all speedup over row-wise sharding,
RW) and the sweeps that re-plan every plan at each point: ``device_sweep.csv`` (devices),
``link_sweep.csv`` (the NVLink / NIC bandwidth ratio) and ``skew_sweep.csv`` (the slow-node NIC
speed).

* ``flexshard.a2a_traffic``: 1 - FlexShard / RW inter-node bytes per iteration;
* ``flexshard.comm_latency``: RW / FlexShard all-to-all seconds per iteration (forward +
  backward); the devices, the link ratio, the slow-node NIC speed and the dataset are the
  conditions of both (a device count whose replay reused profiled samples is left out), and so
  is the baseline (register v6): the workbench's RW, or TorchRec's planner's own plan
  (``summary.json``'s ``torchrec``) within RW's memory or within the device's HBM.

A replay that reuses samples the planner profiled (``replay_in_profile`` > 0: a split too short
for a held-out replay) is no measurement of either claim: the planner has seen the lookups it is
judged on. Such a claims dataset gives no value (the row says so), and such a dataset is left
out of the dataset condition.
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
          "slow-node NIC speed": ("skew_sweep.csv", "slow_factor")}


def runs(res: Results) -> dict[str, Any]:
    """The available datasets' summaries and the claims dataset's sweeps (by condition)."""
    def build() -> dict[str, Any]:
        exp = res.cfg.experiments.flexshard
        summaries, _ = res.available("flexshard", exp.datasets)
        sweeps = {name: res.csv("flexshard", exp.claims_dataset, file)
                  for name, (file, _) in SWEEPS.items()}
        return {"summaries": summaries, "sweeps": sweeps}
    return res.memo("flexshard", build)


def ds_setting(res: Results, name: str) -> str:
    """One dataset's table, lookups, skew and devices."""
    s = runs(res)["summaries"][name]
    return (f"{name}: {s['table_rows']:,}-row table, D = {s['embedding_dim']}, "
            f"{s['lookups_per_device']:,.0f} lookups per device per iteration (mean history "
            f"{s['mean_sequence_length']:.1f}), top 0.1% of rows take "
            f"{100 * s['top_0.1%_share']:.0f}% of lookups; {s['topology']['devices']} devices")


def _setting_note(res: Results) -> tuple[dict[str, Any], str, str]:
    exp = res.cfg.experiments.flexshard
    base = runs(res)["summaries"][exp.claims_dataset]
    setting = (ds_setting(res, exp.claims_dataset) + f"; FlexShard t1 = "
               f"{base['flexshard']['t1']:,}, t2 = {base['flexshard']['t2']:,}; memory limit "
               f"{exp.memory_limit}; " + baseline_source(base))
    note = ("our formalisation and assumed topology; the claims dataset is the session "
            "generator at Criteo's full cardinality, its replay held out from the profile "
            "(datasets that reuse profiled samples are left out of the dataset condition); "
            "replayed memory "
            f"{float(base['memory_vs_rw']):.2f}x RW's (the planner bounds the expected memory)")
    if base.get("replay_unseen_share") is not None:
        unseen = float(base["replay_unseen_share"])
        note += (f"; {100 * unseen:.0f}% of the replayed lookups fall on rows the profile never "
                 "saw, which a plan made from the profile leaves row-wise as RW does: the "
                 f"inter-node reduction's ceiling is about {100 * (1 - unseen):.0f}%")
    return base, setting, note


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
                  f"held-out measurement; give it more rows (datasets.{name}.synthetic.rows)")


def a2a_traffic(res: Results, entry: EntryLike) -> Measurement:
    """FlexShard's inter-node traffic reduction against RW."""
    base, setting, note = _setting_note(res)
    summaries = runs(res)["summaries"]
    reduction, missing = _committed(res, base, "inter_traffic_reduction",
                                    "no inter-node traffic")
    return Measurement(
        entry.key,
        (f"{100 * reduction:.1f}% ({100 * float(base['traffic_reduction']):.1f}% of all bytes)"
         if reduction is not None else "-"), setting,
        {"values": [reduction] if reduction is not None else None, "missing": missing},
        {**{c: sweep_points(res, c, "replay_inter_bytes", "reduction") for c in SWEEPS},
         "dataset": [{"value": n, "values": [s["inter_traffic_reduction"]]}
                     for n, s in summaries.items()
                     if s["inter_traffic_reduction"] is not None and held_out(s)],
         "baseline": baseline_points(base, "inter_traffic_reduction") if held_out(base) else []},
        note)


def comm_latency(res: Results, entry: EntryLike) -> Measurement:
    """FlexShard's all-to-all speedup against RW."""
    base, setting, note = _setting_note(res)
    summaries = runs(res)["summaries"]
    speedup, missing = _committed(res, base, "latency_speedup", "no communication left")
    return Measurement(
        entry.key, f"{speedup:.2f}x" if speedup is not None else "-",
        setting,
        {"values": [speedup] if speedup is not None else None, "missing": missing},
        {**{c: sweep_points(res, c, "replay_seconds", "speedup") for c in SWEEPS},
         "dataset": [{"value": n, "values": [s["latency_speedup"]]}
                     for n, s in summaries.items() if s["latency_speedup"] and held_out(s)],
         "baseline": baseline_points(base, "latency_speedup") if held_out(base) else []},
        note + "; the all-to-all time of one iteration (forward + backward), not the whole step")
