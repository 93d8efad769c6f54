r"""FlexShard experiments: sharding plans of a sequence embedding table, replayed on real batches.

Our formalisation of FlexShard (arXiv 2301.02959; the method section is unavailable;
``workbench/sharding/``). The ``flexshard@<ds>`` stage, on one dataset with a sequence (user
history) feature:

    train split, in order -> iterations of P x b samples (device d trains samples d b .. d b + b)
    profile: the lookups of the first ``profile_batches`` iterations -> p_r per row (per occurrence;
             unseen rows share the Good-Turing missing mass, estimated per iteration: see
             missing_mass); rows ranked by their profiled lookups
    plans at the base topology: tw, rw (baseline), cw, twrw, hot_dp, flexshard, and TorchRec's
        planner's own choice (torchrec: in RW's memory; torchrec_hbm: in the device's HBM)
        (hot_dp and flexshard: cut points by the planner within RW's memory)
    replay: the next ``replay_batches`` iterations through every plan -> bytes per device pair,
        all-to-all seconds (forward + backward), memory (weights + the largest buffers)
    curve:  every replicated fraction f: t1 = f N, the best t2 (expected, no memory limit)
    sweeps: devices (8..256), the slow node's speed and the NVLink / NIC bandwidth ratio, every
            plan re-planned and replayed; a device count profiles its own first iterations and
            plans with the base's candidate cuts, so every point's replay is held out as the
            base's is, and the point at the base topology is the claims' plan
            (``replay_in_profile`` per point)

Outputs (``results/flexshard/<ds>/``): ``plans.csv``, ``fraction_curve.csv``,
``device_sweep.csv``, ``skew_sweep.csv``, ``link_sweep.csv``, ``link_traffic.csv`` (the base
replay's bytes per device pair for RW and FlexShard), ``torchrec_plan.json`` (TorchRec's
planner's plans at the base topology, shard by shard: ``torchrec`` within RW's memory,
``torchrec_hbm`` with the device's HBM; [`workbench.sharding.torchrec_plan`][]), and
``summary.json`` (its ``torchrec`` part: each TorchRec plan's type, whether it places the rows
as the workbench's RW does, and FlexShard's reduction and speedup against it).
Everything is deterministic (no wall clock).

The profile's reach: ``replay_unseen_share`` (summary and every sweep point) is the share of
the replayed lookups on rows the profile never saw; a plan made from the profile leaves those
row-wise, as RW does, so about ``1 -`` it caps the inter-node reduction (the report's ceiling).

Ratios against RW that would say nothing are refused (``None`` in ``summary.json``, with a
``..._note`` saying why, and the same words in the log): a reduction of traffic RW does not have
(a zero baseline), or of traffic FlexShard cannot have because it replicates the whole table on
every node (``t1 + t2 = N``) or device (``t1 = N``). The stage warns when a plan limited to RW's
memory uses more in the replay than RW, and when the split is too short for a held-out replay
(the iterations wrap around to the profile's samples; ``replay_in_profile``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.data.synthetic import SyntheticGenerator
from workbench.experiments.config import FlexShardConfig
from workbench.sharding.config import TopologyConfig
from workbench.sharding.lookups import (
    LookupSource,
    Profile,
    SequenceLookups,
    SplitSource,
    stream_source,
)
from workbench.sharding.planner import best_cut, candidate_cuts, evaluate_cuts
from workbench.sharding.plans import (
    Plan,
    column_wise,
    rank_order,
    row_wise,
    table_row_wise,
    table_wise,
    tiered,
)
from workbench.sharding.topology import Topology
from workbench.sharding.torchrec_plan import plan_table, to_plan
from workbench.sharding.traffic import expected_traffic, memory, replay_traffic, traffic_summary

log = logging.getLogger(__name__)

LABELS = {"tw": "table-wise (TW)", "rw": "row-wise (RW)", "cw": "column-wise (CW)",
          "twrw": "table-row-wise (TWRW)", "hot_dp": "hot rows data-parallel (HugeCTR-style)",
          "flexshard": "FlexShard (tiered)",
          "torchrec": "TorchRec's planner (RW's memory)",
          "torchrec_hbm": "TorchRec's planner (the device's HBM)"}
MIB = 2**20


def row_wise_baseline(probability: np.ndarray, topo: Topology, lookups: float,
                      row_bytes: int) -> tuple[np.ndarray, float]:
    """Row-wise sharding, the baseline: its expected traffic and its largest device's
    memory (weights + buffers), the limit FlexShard's planner must stay within."""
    rw = row_wise(probability.size, topo)
    traffic = expected_traffic(rw, probability, lookups, row_bytes, topo)
    return traffic, float(memory(rw, traffic, row_bytes, topo)["total"].max())


def build_plans(exp: FlexShardConfig, probability: np.ndarray, topo: Topology,
                lookups: float, row_bytes: int,
                extra_cuts: np.ndarray | Sequence[int] = (),
                order: np.ndarray | None = None) -> dict[str, Any]:
    """Every configured plan at ``topo``, the planner's searches and RW's memory limit.

    ``order`` ranks the rows for the tiers (default: by ``probability``); the stage ranks them by
    their profiled lookups, so that a row the profile never saw is never replicated ahead of
    one it saw, whatever share of the missing mass each unseen row gets."""
    n = probability.size
    rw = row_wise(n, topo)
    rw_traffic, rw_memory = row_wise_baseline(probability, topo, lookups, row_bytes)
    limit = rw_memory if exp.memory_limit == "rw" else None
    cuts = candidate_cuts(n, exp.candidate_cuts, extra_cuts)
    rw_seconds = traffic_summary(rw_traffic, topo)["seconds"]
    order = rank_order(probability) if order is None else order
    searches = {  # name -> [(search, tier-2 owners weighted by bandwidth)]
        "flexshard": [(evaluate_cuts(probability, topo, lookups, row_bytes, cuts, weighted=w,
                                     order=order), w) for w in (True, False)],
        "hot_dp": [(evaluate_cuts(probability, topo, lookups, row_bytes, cuts, node_tier=False,
                                  weighted=False, order=order), False)]}
    plans: dict[str, Plan] = {}
    torchrec: dict[str, Any] = {}
    hbm = {"torchrec": rw_memory, "torchrec_hbm": exp.device_hbm_gib * 2**30}
    for name in exp.plans:
        if name in hbm:
            try:
                planned = plan_table(n, exp.embedding_dim, topo, exp.per_device_batch,
                                     lookups / exp.per_device_batch, hbm[name])
            except ValueError as err:  # its own memory estimate fits nowhere: no such plan
                torchrec[name] = {"no_plan": str(err)}
                continue
            plans[name] = to_plan(planned, n, exp.embedding_dim, name)
            torchrec[name] = planned.record()
        elif name in searches:
            plans[name] = _planned(name, searches[name], probability, topo, limit, rw_seconds, rw,
                                   order)
        else:
            plans[name] = {"tw": lambda: table_wise(n, 0), "rw": lambda: rw,
                           "cw": lambda: column_wise(n, exp.cw_shards, 0, topo),
                           "twrw": lambda: table_row_wise(n, topo, 0)}[name]()
    return {"plans": plans, "searches": {k: v[0][0] for k, v in searches.items()},
            "rw_memory": rw_memory, "limit": limit, "torchrec": torchrec}


def _planned(name: str, searches: list, probability: np.ndarray, topo: Topology,
             limit: float | None, rw_seconds: float, rw: Plan, order: np.ndarray) -> Plan:
    """The fastest pair of cut points over ``searches`` within ``limit``; RW itself (renamed)
    when no pair fits or none is faster than RW, so the plan never needs more memory (when
    limited) nor more expected time than RW."""
    best = None
    for search, weighted in searches:
        try:
            k = best_cut(search, limit)
        except ValueError:
            continue
        if best is None or search.seconds[k] < best[0]:
            best = (float(search.seconds[k]), int(search.t1[k]), int(search.t2[k]), weighted)
    if best is None or best[0] >= rw_seconds:
        return Plan(name, rw.tier, rw.owner)
    return tiered(probability, best[1], best[2], topo, name, weighted=best[3], order=order)


def replay_plan(plan: Plan, data: SequenceLookups, topo: Topology, iterations: range,
                per_device: int, row_bytes: int) -> tuple[dict[str, float], np.ndarray]:
    """Replay ``iterations`` through ``plan``: mean bytes, inter-node bytes and seconds per
    iteration, the largest device memory (weights + that iteration's buffers), and the mean
    traffic matrix."""
    rows, total = [], np.zeros((topo.devices, topo.devices))
    for t in iterations:
        src, ids = data.iteration(t, topo.devices, per_device)
        m = replay_traffic(plan, src, ids, row_bytes, topo)
        total += m
        rows.append({**traffic_summary(m, topo),
                     "memory": float(memory(plan, m, row_bytes, topo)["total"].max())})
    frame = pd.DataFrame(rows)
    out = {k: float(frame[k].mean()) for k in ("bytes", "inter_bytes", "seconds")}
    out["memory"] = float(frame["memory"].max())
    out["weights"] = float(plan.rows_per_device(topo).max() * row_bytes)
    return out, total / len(rows)


def _plan_rows(built: dict[str, Any], data: SequenceLookups, topo: Topology, iterations: range,
               exp: FlexShardConfig, probability: np.ndarray, lookups: float, row_bytes: int,
               extra: dict[str, Any]) -> tuple[list[dict], dict[str, np.ndarray]]:
    rows, matrices = [], {}
    for name, plan in built["plans"].items():
        replayed, matrix = replay_plan(plan, data, topo, iterations, exp.per_device_batch,
                                       row_bytes)
        expected = expected_traffic(plan, probability, lookups, row_bytes, topo)
        exp_sum = traffic_summary(expected, topo)
        rows.append({**extra, "plan": name, "label": LABELS[name], "t1": plan.t1, "t2": plan.t2,
                     "replicated_fraction": plan.t1 / plan.rows,
                     **{f"replay_{k}": v for k, v in replayed.items()},
                     "expected_inter_bytes": exp_sum["inter_bytes"],
                     "expected_seconds": exp_sum["seconds"],
                     "expected_memory": float(memory(plan, expected, row_bytes,
                                                     topo)["total"].max())})
        matrices[name] = matrix
    return rows, matrices


def profile_rows(exp: FlexShardConfig, profile: Profile, topo: Topology, source: LookupSource,
                 extra_cuts: np.ndarray) -> list[dict]:
    """Every plan at ``topo`` made from ``profile`` (the base's candidate cuts, rows ranked by
    their profiled lookups) and replayed on ``source``'s replay: ``plans.csv``'s rows."""
    row_bytes = 4 * exp.embedding_dim
    built = build_plans(exp, profile.probability, topo, profile.lookups, row_bytes, extra_cuts,
                        rank_order(profile.counts))
    return _plan_rows(built, source.data, topo, source.replay, exp, profile.probability,
                      profile.lookups, row_bytes, {})[0]


def fraction_curve(exp: FlexShardConfig, built: dict[str, Any], n: int) -> pd.DataFrame:
    """The authors' figure: for each replicated fraction f (t1 = f N rows on every device), the
    memory and expected time against RW's: ``hot_dp`` (t2 = 0: replication alone) and
    ``flexshard`` (the node tier t2 chosen within the memory limit, when one fits)."""
    rw_mem, limit = built["rw_memory"], built["limit"]
    out = []
    for f in exp.replicated_fractions:
        t1 = int(round(f * n))
        for name, s in built["searches"].items():
            mask = s.t1 == t1
            if name == "flexshard" and limit is not None:
                mask &= s.memory <= limit * (1 + 1e-12)
            if not mask.any():
                continue
            k = np.flatnonzero(mask)[np.argmin(s.seconds[mask])]
            out.append({"plan": name, "replicated_fraction": f, "t1": t1, "t2": int(s.t2[k]),
                        "seconds": float(s.seconds[k]), "memory": float(s.memory[k]),
                        "memory_vs_rw_mib": (float(s.memory[k]) - rw_mem) / MIB})
    return pd.DataFrame(out)


def run(processed: Path, out: Path, exp: FlexShardConfig, *, topology: TopologyConfig) -> None:
    """The ``flexshard`` stage on one dataset (see the module docstring); writes ``out`` whole.

    Raises:
        workbench.sharding.lookups.NoSequenceError: the dataset has no sequence feature.
    """
    from workbench.data.pipeline import unavailable_result
    from workbench.utils.io import atomic_dir

    with atomic_dir(out) as tmp:
        if unavailable_result(processed, tmp / "summary.json"):
            return
        source = SplitSource(SequenceLookups.read(processed, exp.sequence_feature),
                             exp.per_device_batch, exp.profile_batches, exp.replay_batches,
                             exp.probability_estimator)
        base = Topology.from_config(topology)
        overlap = source.replay_in_profile(base.devices)
        if overlap > 0:
            log.warning("%s: the train split has %d samples, fewer than the %d that %d profiled "
                        "+ %d replayed iterations of %d devices x %d read: %.0f%% of the replayed "
                        "samples are the profile's (not a held-out replay); lower "
                        "experiments.flexshard.per_device_batch or the iteration counts, or use "
                        "more data", processed.name, source.data.lengths.size,
                        (exp.profile_batches + exp.replay_batches) * base.devices
                        * exp.per_device_batch, exp.profile_batches, exp.replay_batches,
                        base.devices, exp.per_device_batch, 100 * overlap)
        summary = measure(source, processed.name, tmp, exp, topology)
    _log_summary(summary)


def run_stream(generator: SyntheticGenerator, name: str, out: Path, exp: FlexShardConfig, *,
               topology: TopologyConfig, progress: bool = False) -> None:
    """The ``flexshard-stream`` stage: every plan made from a profile of
    ``exp.stream_profile_batches`` iterations of ``generator``'s samples (the claims'), the
    coverage sweep over ``exp.profile_sweep``, every replay held out
    ([`workbench.sharding.lookups.StreamSource`][]); writes ``out`` whole.

    Raises:
        ValueError: the generator has no sequence feature.
    """
    from tqdm.auto import tqdm

    from workbench.utils.io import atomic_dir

    base = Topology.from_config(topology)
    per_iteration = base.devices * exp.per_device_batch
    longest = max(exp.profile_sweep)
    replay = exp.replay_batches * max([base.devices, *exp.device_sweep]) * exp.per_device_batch
    cfg = generator.cfg

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        # the materialised dataset's samples chunk by chunk (the same draws), then more
        for start in range(0, cfg.rows, cfg.chunk_rows):
            yield generator.histories(min(cfg.chunk_rows, cfg.rows - start))
        while True:
            yield generator.histories(cfg.chunk_rows)

    with atomic_dir(out) as tmp:
        with tqdm(total=longest * per_iteration + replay, disable=not progress, unit="sample",
                  unit_scale=True, desc=f"flexshard-stream {name}") as bar:
            source = stream_source(
                chunks(), generator.cards[cfg.sequence.item_feature],
                iteration_samples=per_iteration, profile_lengths=exp.profile_sweep,
                committed=exp.stream_profile_batches, replay_samples=replay,
                per_device=exp.per_device_batch, replay_batches=exp.replay_batches,
                estimator=exp.probability_estimator,
                progress=lambda read: bar.update(min(read, bar.total) - bar.n))
        summary = measure(source, name, tmp, exp, topology,
                          {"profile_samples": exp.stream_profile_batches * per_iteration,
                           "replay_samples": replay, "streamed": True})
        extra_cuts = np.rint(np.asarray(exp.replicated_fractions) * source.data.rows)
        rows = []
        for k in exp.profile_sweep:
            profile = source.at(k, base.devices)
            unseen = source.unseen(profile, base.devices)
            rows += [{"profile_samples": k * per_iteration, "profile_iterations": k,
                      "coverage": 1 - unseen, "replay_unseen_share": unseen,
                      "rows_seen_in_profile": int((profile.counts > 0).sum()), **row}
                     for row in profile_rows(exp, profile, base, source, extra_cuts)]
        pd.DataFrame(rows).to_csv(tmp / "profile_sweep.csv", index=False, float_format="%.6g")
    _log_summary(summary)


def measure(source: LookupSource, name: str, tmp: Path, exp: FlexShardConfig,
            topology: TopologyConfig, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every plan at the base topology and every sweep point, profiled and replayed through
    ``source``; the stage's files written into ``tmp``; returns the summary."""
    from workbench.utils.io import write_json

    base = Topology.from_config(topology)
    data = source.data
    row_bytes = 4 * exp.embedding_dim
    profile = source.profile(base.devices)
    counts, probability, lookups = profile.counts, profile.probability, profile.lookups
    order = rank_order(counts)  # by the lookups profiled: an unseen row never goes first
    replay = source.replay
    n = data.rows
    extra_cuts = np.rint(np.asarray(exp.replicated_fractions) * n)
    overlap = source.replay_in_profile(base.devices)

    built = build_plans(exp, probability, base, lookups, row_bytes, extra_cuts, order)
    plan_rows, matrices = _plan_rows(built, data, base, replay, exp, probability, lookups,
                                     row_bytes, {"devices": base.devices})
    plans = pd.DataFrame(plan_rows)
    curve = fraction_curve(exp, built, n)
    rw_seconds = float(plans.loc[plans["plan"] == "rw", "expected_seconds"].iloc[0])
    curve["savings_vs_rw_ms"] = (rw_seconds - curve["seconds"]) * 1e3

    swept: dict[tuple, list[dict]] = {}  # a topology met twice is planned once
    unseen = source.unseen(profile, base.devices)
    profiles = {base.devices: (profile, unseen)}

    def sweep_point(topo: Topology, point: dict[str, Any]) -> list[dict]:
        """Every plan at ``topo``, planned as the base is (the same candidate cuts) on
        ``source``'s profile for ``topo``'s device count, so its replay is held out as the
        base's is and the sweep's point at the base topology is the claims' plan."""
        key = (topo.nodes, topo.devices_per_node, topo.inter_bps.tobytes(),
               float(topo.intra_bps))
        if key not in swept:
            if topo.devices not in profiles:  # one profile (and its reach) per count
                seen = source.profile(topo.devices)
                profiles[topo.devices] = (seen, source.unseen(seen, topo.devices))
            seen, missed = profiles[topo.devices]
            held = source.replay_in_profile(topo.devices)
            swept[key] = [{**row, "replay_in_profile": held, "replay_unseen_share": missed}
                          for row in profile_rows(exp, seen, topo, source, extra_cuts)]
        return [{**point, **row} for row in swept[key]]

    sweeps: dict[str, list[dict[str, Any]]] = {"device_sweep": [], "skew_sweep": [],
                                               "link_sweep": []}
    slow_cfg = replace(topology, slow_nodes=max(1, topology.slow_nodes))
    for devices in exp.device_sweep:
        topo = Topology.from_config(topology, nodes=devices // topology.devices_per_node)
        sweeps["device_sweep"] += sweep_point(topo, {"devices": devices})
    for speed in exp.skew_sweep:
        topo = Topology.from_config(slow_cfg, slow_factor=speed)
        sweeps["skew_sweep"] += sweep_point(topo, {
            "devices": topo.devices, "slow_factor": speed,
            "slow_nodes": slow_cfg.slow_nodes})
    for ratio in exp.link_ratio_sweep:  # NVLink = ratio x the NIC, the NICs as committed
        topo = Topology.from_config(replace(topology,
                                            intra_gbps=ratio * topology.inter_gbps))
        sweeps["link_sweep"] += sweep_point(topo, {
            "devices": topo.devices, "link_ratio": ratio,
            "intra_gbps": ratio * topology.inter_gbps, "inter_gbps": topology.inter_gbps})

    links = pd.concat([pd.DataFrame({"plan": plan,
                                     "src": np.repeat(np.arange(base.devices), base.devices),
                                     "dst": np.tile(np.arange(base.devices), base.devices),
                                     "bytes": m.ravel()})
                       for plan, m in matrices.items() if plan in ("rw", "flexshard")])
    by = plans.set_index("plan")
    summary = {
        "dataset": name, "available": True, "table_rows": n,
        "rows_seen_in_profile": int((counts > 0).sum()),
        "embedding_dim": exp.embedding_dim, "row_bytes": row_bytes,
        "per_device_batch": exp.per_device_batch, "lookups_per_device": lookups,
        "mean_sequence_length": float(data.lengths.mean()),
        "top_0.1%_share": float(np.sort(probability)[::-1][:max(1, n // 1000)].sum()),
        "top_1%_share": float(np.sort(probability)[::-1][:max(1, n // 100)].sum()),
        "topology": {"nodes": base.nodes, "devices_per_node": base.devices_per_node,
                     "devices": base.devices, "name": topology.name,
                     "source": topology.source},
        "memory_limit": exp.memory_limit, "rw_memory": built["rw_memory"],
        "flexshard": {"t1": int(by.loc["flexshard", "t1"]),
                      "t2": int(by.loc["flexshard", "t2"])},
        **versus_rw(by, n),
        "whole_table_replicated": bool(by.loc["flexshard", "t1"] == n),
        "whole_table_node_replicated": bool(by.loc["flexshard", "t1"]
                                            + by.loc["flexshard", "t2"] == n),
        "memory_vs_rw": by.loc["flexshard", "replay_memory"] / by.loc["rw", "replay_memory"],
        "expected_memory_vs_rw": by.loc["flexshard", "expected_memory"]
        / by.loc["rw", "expected_memory"],
        "unseen_mass_estimate": float(probability[counts == 0].sum()),
        "replay_unseen_share": unseen,
        "replay_in_profile": overlap,
        "torchrec": _torchrec_summary(built, by, n), **(extra or {})}
    warn_over_memory(name, by, exp.memory_limit)
    plans.to_csv(tmp / "plans.csv", index=False, float_format="%.6g")
    curve.to_csv(tmp / "fraction_curve.csv", index=False, float_format="%.6g")
    for sweep, rows in sweeps.items():
        pd.DataFrame(rows).to_csv(tmp / f"{sweep}.csv", index=False, float_format="%.6g")
    links.to_csv(tmp / "link_traffic.csv", index=False, float_format="%.6g")
    if built["torchrec"]:
        write_json(tmp / "torchrec_plan.json", built["torchrec"])
    write_json(tmp / "summary.json", summary)
    return summary


def _log_summary(summary: dict[str, Any]) -> None:
    inter, speedup = summary["inter_traffic_reduction"], summary["latency_speedup"]
    inter_note, speed_note = (summary["inter_traffic_reduction_note"],
                              summary["latency_speedup_note"])
    log.info("%s: FlexShard t1 = %d, t2 = %d; %s; all-to-all latency %s; memory %.2fx RW's",
             summary["dataset"], summary["flexshard"]["t1"], summary["flexshard"]["t2"],
             f"{100 * inter:.1f}% less inter-node traffic than RW" if inter is not None
             else f"no inter-node traffic ratio: {inter_note}",
             f"{speedup:.2f}x lower than RW" if speedup is not None
             else "no ratio (the same reason)" if speed_note == inter_note
             else f"no ratio: {speed_note}", summary["memory_vs_rw"])


def _torchrec_summary(built: dict[str, Any], by: pd.DataFrame, n: int) -> dict[str, Any]:
    """Per TorchRec plan: its sharding type and kernel, whether it places every row where the
    workbench's RW does, and FlexShard against it as [`versus_rw`][] states it against RW (the
    same refusals)."""
    own = built["plans"]["rw"]
    out: dict[str, Any] = {}
    for name, record in built["torchrec"].items():
        if "no_plan" in record:
            out[name] = {"no_plan": record["no_plan"]}
            continue
        plan = built["plans"][name]
        against = versus_rw(by.drop(index="rw").rename(index={name: "rw"}), n)
        out[name] = {"sharding_type": record["sharding_type"],
                     "compute_kernel": record["compute_kernel"],
                     "hbm_bytes": record["hbm_bytes"],
                     "same_rows_as_rw": bool(plan.column_devices is None
                                             and np.array_equal(plan.tier, own.tier)
                                             and np.array_equal(plan.owner, own.owner)),
                     **against}
    return out


def versus_rw(by: pd.DataFrame, n: int) -> dict[str, Any]:
    """FlexShard against RW in the replay: ``inter_traffic_reduction`` and
    ``traffic_reduction`` (1 - FlexShard's bytes / RW's) and ``latency_speedup`` (RW's seconds /
    FlexShard's), each ``None`` with a ``<key>_note`` saying why when the ratio would say
    nothing: RW has none of that traffic (a zero baseline), or FlexShard cannot have it
    because it replicates the whole table on every node or device (a reduction by
    construction, whatever the workload), or its replay had none at all.

    Args:
        by: the plans' rows (``plans.csv``) indexed by plan.
        n: rows of the table.
    """
    fs, rw = by.loc["flexshard"], by.loc["rw"]
    t1, t2 = int(fs["t1"]), int(fs["t2"])
    memory = f"at {fs['replay_memory'] / rw['replay_memory']:.2f}x RW's memory"
    everywhere = (f"FlexShard replicates the whole table on every device (t1 = N = {n:,} rows): "
                  f"no traffic by construction, {memory}")
    per_node = (f"FlexShard replicates the whole table on every node (t1 + t2 = N = {n:,} "
                f"rows): no inter-node traffic by construction, {memory}")

    def reduction(key: str, what: str, replicated: str | None) -> dict[str, Any]:
        ours, base = float(fs[key]), float(rw[key])
        note = None
        if base == 0:
            note = (f"no {what} in either plan" if ours == 0 else
                    f"RW has no {what} to reduce (FlexShard: {ours / MIB:.3g} MiB per iteration)")
        elif replicated is not None:
            note = replicated
        elif ours == 0:
            note = (f"FlexShard's replay has no {what}: the {t1 + t2:,} of {n:,} rows it "
                    "replicates served every replayed lookup")
        name = {"replay_inter_bytes": "inter_traffic_reduction",
                "replay_bytes": "traffic_reduction"}[key]
        return {name: None if note else 1 - ours / base, f"{name}_note": note}

    seconds, rw_seconds = float(fs["replay_seconds"]), float(rw["replay_seconds"])
    speed_note = None
    if rw_seconds == 0:
        speed_note = "no communication in either plan"
    elif t1 == n:
        speed_note = everywhere
    elif seconds == 0:
        speed_note = "FlexShard's replay has no communication left"
    return {**reduction("replay_inter_bytes", "inter-node traffic",
                        everywhere if t1 == n else per_node if t1 + t2 == n else None),
            **reduction("replay_bytes", "traffic", everywhere if t1 == n else None),
            "latency_speedup": None if speed_note else rw_seconds / seconds,
            "latency_speedup_note": speed_note}


def warn_over_memory(name: str, by: pd.DataFrame, limit: str) -> None:
    """Warn for each plan limited to RW's memory that uses more than RW in the replay.

    The planner bounds the memory it expects from the profile; the replay's busiest iteration
    can still need larger all-to-all buffers (an iteration's users and their histories vary),
    and the stage says so with the numbers instead of reporting the plan as within the limit.
    """
    if limit != "rw":
        return
    rw = by.loc["rw"]
    for plan in ("hot_dp", "flexshard"):
        if plan not in by.index or by.loc[plan, "replay_memory"] <= rw["replay_memory"]:
            continue
        row = by.loc[plan]
        log.warning("%s: %s was planned within RW's memory (expected %.2f MiB against RW's "
                    "%.2f MiB) but its busiest replayed iteration takes %.2f MiB, %.3fx RW's "
                    "%.2f MiB: the replay's all-to-all buffers exceed the profile's expectation",
                    name, plan, row["expected_memory"] / MIB, rw["expected_memory"] / MIB,
                    row["replay_memory"] / MIB, row["replay_memory"] / rw["replay_memory"],
                    rw["replay_memory"] / MIB)
