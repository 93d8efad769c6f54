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
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.data.preprocess import read_split
from workbench.data.schema import DatasetMeta
from workbench.experiments.config import FlexShardConfig
from workbench.sharding.config import TopologyConfig
from workbench.sharding.planner import (
    best_cut,
    candidate_cuts,
    estimate_probability,
    evaluate_cuts,
    missing_mass,
)
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
from workbench.utils.errors import UserError
from workbench.utils.validation import ConfigError

log = logging.getLogger(__name__)

LABELS = {"tw": "table-wise (TW)", "rw": "row-wise (RW)", "cw": "column-wise (CW)",
          "twrw": "table-row-wise (TWRW)", "hot_dp": "hot rows data-parallel (HugeCTR-style)",
          "flexshard": "FlexShard (tiered)",
          "torchrec": "TorchRec's planner (RW's memory)",
          "torchrec_hbm": "TorchRec's planner (the device's HBM)"}
MIB = 2**20


class NoSequenceError(UserError, ValueError):
    """The dataset has no sequence feature to shard."""


class SequenceLookups:
    """The sequence column of a train split as flat lookups, cut into iterations.

    Args:
        values: ``int64`` the row ids of every sequence, concatenated.
        lengths: ``int64[n]`` each sample's sequence length.
        rows: N, rows of the table.
    """

    def __init__(self, values: np.ndarray, lengths: np.ndarray, rows: int) -> None:
        self.values, self.lengths, self.rows = values, lengths, rows
        self.offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)

    @classmethod
    def read(cls, processed: Path, feature: str | None) -> SequenceLookups:
        """The train split's sequence ``feature`` (None: the first one).

        Raises:
            NoSequenceError: the dataset has no sequence feature.
            ConfigError: ``feature`` is not one of its sequence features.
        """
        meta = DatasetMeta.read(processed)
        if not meta.sequences:
            raise NoSequenceError(
                f"{processed.name} has no sequence (list) feature: FlexShard shards sequence "
                "embedding tables; use a dataset with user histories (synthetic_sessions, "
                "taobao_sample, movielens_100k_sample) in experiments.flexshard.datasets")
        name = feature or next(iter(meta.sequences))
        if name not in meta.sequences:
            raise ConfigError(f"experiments.flexshard.sequence_feature = {name!r}: not a "
                              f"sequence feature of {processed.name} ({list(meta.sequences)})")
        lists = read_split(processed, "train", columns=[name])[name].to_numpy()
        lengths = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
        values = (np.concatenate([np.asarray(x, dtype=np.int64) for x in lists])
                  if len(lists) else np.zeros(0, np.int64))
        if values.size == 0:
            raise NoSequenceError(f"{processed.name}: the sequence feature {name!r} has no "
                                  "values in the train split; nothing to shard")
        return cls(values, lengths, int(meta.cardinalities[meta.sequences[name]]))

    def iteration(self, t: int, devices: int, per_device: int) -> tuple[np.ndarray, np.ndarray]:
        """``(src, rows)``: the lookups of iteration ``t`` (samples taken in order, wrapping)."""
        n = self.lengths.size
        idx = (t * devices * per_device + np.arange(devices * per_device)) % n
        lens = self.lengths[idx]
        starts = np.repeat(self.offsets[idx] - np.r_[0, np.cumsum(lens)[:-1]], lens)
        rows = self.values[starts + np.arange(lens.sum())]
        src = np.repeat(np.arange(devices * per_device) // per_device, lens)
        return src.astype(np.int64), rows


def profile_lookups(data: SequenceLookups, exp: FlexShardConfig,
                    devices: int) -> list[np.ndarray]:
    """The row ids looked up in each of the first ``exp.profile_batches`` iterations."""
    return [data.iteration(t, devices, exp.per_device_batch)[1]
            for t in range(exp.profile_batches)]


def profile_probability(data: SequenceLookups, exp: FlexShardConfig,
                        devices: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The profile of the first ``exp.profile_batches`` iterations of ``devices`` x
    ``exp.per_device_batch`` samples: ``(counts per row, access probability per row,
    lookups per device per iteration)``; the unseen rows' share is [`missing_mass`][]."""
    profile = profile_lookups(data, exp, devices)
    counts = np.bincount(np.concatenate(profile), minlength=data.rows)
    probability = estimate_probability(counts, exp.probability_estimator,
                                       missing_mass(profile, data.rows))
    return counts, probability, float(np.mean([r.size for r in profile])) / devices


def replay_in_profile(samples: int, per_iteration: int, profiled: int, replayed: int) -> float:
    """The share of the replayed samples that the profile read too: iterations take the split's
    samples in order and wrap around, so a split shorter than ``profiled + replayed``
    iterations replays part of the profile (no longer a held-out replay)."""
    seen = np.zeros(samples, dtype=bool)
    seen[np.arange(profiled * per_iteration) % samples] = True
    start = profiled * per_iteration
    return float(seen[np.arange(start, start + replayed * per_iteration) % samples].mean())


def replay_unseen(data: SequenceLookups, counts: np.ndarray, iterations: range, devices: int,
                  per_device: int) -> float:
    """The share of the replayed lookups that fall on rows the profile never saw (``counts``
    0). A plan made from the profile cannot single those rows out: they stay row-wise over all
    devices, as in RW, so about ``1 -`` this share bounds the inter-node reduction any
    profile-driven plan reaches (the ceiling the report draws)."""
    ids = np.concatenate([data.iteration(t, devices, per_device)[1] for t in iterations])
    return float((counts[ids] == 0).mean())


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
        NoSequenceError: the dataset has no sequence feature.
    """
    from workbench.data.pipeline import unavailable_result
    from workbench.utils.io import atomic_dir, write_json

    with atomic_dir(out) as tmp:
        if unavailable_result(processed, tmp / "summary.json"):
            return
        data = SequenceLookups.read(processed, exp.sequence_feature)
        base = Topology.from_config(topology)
        row_bytes = 4 * exp.embedding_dim
        counts, probability, lookups = profile_probability(data, exp, base.devices)
        order = rank_order(counts)  # by the lookups profiled: an unseen row never goes first
        replay = range(exp.profile_batches, exp.profile_batches + exp.replay_batches)
        n = data.rows
        extra_cuts = np.rint(np.asarray(exp.replicated_fractions) * n)
        overlap = replay_in_profile(data.lengths.size, base.devices * exp.per_device_batch,
                                    exp.profile_batches, exp.replay_batches)
        if overlap > 0:
            log.warning("%s: the train split has %d samples, fewer than the %d that %d profiled "
                        "+ %d replayed iterations of %d devices x %d read: %.0f%% of the replayed "
                        "samples are the profile's (not a held-out replay); lower "
                        "experiments.flexshard.per_device_batch or the iteration counts, or use "
                        "more data", processed.name, data.lengths.size,
                        (exp.profile_batches + exp.replay_batches) * base.devices
                        * exp.per_device_batch, exp.profile_batches, exp.replay_batches,
                        base.devices, exp.per_device_batch, 100 * overlap)

        built = build_plans(exp, probability, base, lookups, row_bytes, extra_cuts, order)
        plan_rows, matrices = _plan_rows(built, data, base, replay, exp, probability, lookups,
                                         row_bytes, {"devices": base.devices})
        plans = pd.DataFrame(plan_rows)
        curve = fraction_curve(exp, built, n)
        rw_seconds = float(plans.loc[plans["plan"] == "rw", "expected_seconds"].iloc[0])
        curve["savings_vs_rw_ms"] = (rw_seconds - curve["seconds"]) * 1e3

        swept: dict[tuple, list[dict]] = {}  # a topology met twice is planned once
        unseen = replay_unseen(data, counts, replay, base.devices, exp.per_device_batch)
        profiles = {base.devices: (probability, lookups, order, unseen)}

        def sweep_point(topo: Topology, extra: dict[str, Any]) -> list[dict]:
            """Every plan at ``topo``, planned as the base is (the same candidate cuts) on a
            profile of ``topo``'s own iterations, so its replay is held out as the base's is
            and the sweep's point at the base topology is the claims' plan."""
            key = (topo.nodes, topo.devices_per_node, topo.inter_bps.tobytes(),
                   float(topo.intra_bps))
            if key not in swept:
                if topo.devices not in profiles:  # one profile (and its reach) per count
                    seen, p, per = profile_probability(data, exp, topo.devices)
                    profiles[topo.devices] = (p, per, rank_order(seen), replay_unseen(
                        data, seen, replay, topo.devices, exp.per_device_batch))
                p, per, rank, missed = profiles[topo.devices]
                held = replay_in_profile(data.lengths.size, topo.devices * exp.per_device_batch,
                                         exp.profile_batches, exp.replay_batches)
                swept[key] = [{**row, "replay_in_profile": held, "replay_unseen_share": missed}
                              for row in _plan_rows(
                    build_plans(exp, p, topo, per, row_bytes, extra_cuts, rank),
                    data, topo, replay, exp, p, per, row_bytes, {})[0]]
            return [{**extra, **row} for row in swept[key]]

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

        links = pd.concat([pd.DataFrame({"plan": name,
                                         "src": np.repeat(np.arange(base.devices), base.devices),
                                         "dst": np.tile(np.arange(base.devices), base.devices),
                                         "bytes": m.ravel()})
                           for name, m in matrices.items() if name in ("rw", "flexshard")])
        by = plans.set_index("plan")
        summary = {
            "dataset": processed.name, "available": True, "table_rows": n,
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
            "torchrec": _torchrec_summary(built, by, n)}
        warn_over_memory(processed.name, by, exp.memory_limit)
        plans.to_csv(tmp / "plans.csv", index=False, float_format="%.6g")
        curve.to_csv(tmp / "fraction_curve.csv", index=False, float_format="%.6g")
        for name, rows in sweeps.items():
            pd.DataFrame(rows).to_csv(tmp / f"{name}.csv", index=False, float_format="%.6g")
        links.to_csv(tmp / "link_traffic.csv", index=False, float_format="%.6g")
        if built["torchrec"]:
            write_json(tmp / "torchrec_plan.json", built["torchrec"])
        write_json(tmp / "summary.json", summary)
    inter, speedup = summary["inter_traffic_reduction"], summary["latency_speedup"]
    inter_note, speed_note = (summary["inter_traffic_reduction_note"],
                              summary["latency_speedup_note"])
    log.info("%s: FlexShard t1 = %d, t2 = %d; %s; all-to-all latency %s; memory %.2fx RW's",
             processed.name, summary["flexshard"]["t1"], summary["flexshard"]["t2"],
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
