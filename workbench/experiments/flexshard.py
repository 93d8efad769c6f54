r"""FlexShard experiments: sharding plans of a sequence embedding table, replayed on real batches.

Our formalisation of FlexShard (arXiv 2301.02959; the method section is unavailable;
``workbench/sharding/``). The ``flexshard@<ds>`` stage, on one dataset with a sequence (user
history) feature::

    train split, in order -> iterations of P x b samples (device d trains samples d b .. d b + b)
    profile: the lookups of the first ``profile_batches`` iterations -> p_r per row (per occurrence;
             unseen rows share the Good-Turing missing mass)
    plans at the base topology: tw, rw (baseline), cw, twrw, hot_dp, flexshard
        (hot_dp and flexshard: cut points by the planner within RW's memory)
    replay: the next ``replay_batches`` iterations through every plan -> bytes per device pair,
        all-to-all seconds (forward + backward), memory (weights + the largest buffers)
    curve:  every replicated fraction f: t1 = f N, the best t2 (expected, no memory limit)
    sweeps: devices (8..64) and the slow node's speed, every plan re-planned and replayed

Outputs (``results/flexshard/<ds>/``): ``plans.csv``, ``fraction_curve.csv``,
``device_sweep.csv``, ``skew_sweep.csv``, ``link_traffic.csv`` (the base replay's bytes per
device pair for RW and FlexShard), ``summary.json``. Everything is deterministic (no wall clock).
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
from workbench.sharding.traffic import expected_traffic, memory, replay_traffic, traffic_summary
from workbench.utils.errors import UserError
from workbench.utils.validation import ConfigError

log = logging.getLogger(__name__)

LABELS = {"tw": "table-wise (TW)", "rw": "row-wise (RW)", "cw": "column-wise (CW)",
          "twrw": "table-row-wise (TWRW)", "hot_dp": "hot rows data-parallel (HugeCTR-style)",
          "flexshard": "FlexShard (tiered)"}
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


def estimate_probability(counts: np.ndarray, estimator: str = "good_turing") -> np.ndarray:
    """Each row's share of the lookups from profiled ``counts``.

    ``frequency``: ``count / total``. ``good_turing``: the unseen rows share the missing mass
    ``m = n1 / n`` (rows seen exactly once over all lookups, Good 1953) evenly, and the seen rows
    get ``(1 - m) count / total``; with every row seen (or none seen once) it is the frequency.
    """
    counts = np.asarray(counts, dtype=float)
    total = counts.sum()
    if total <= 0:
        raise ValueError("the profile saw no lookups")
    p = counts / total
    unseen = counts == 0
    if estimator == "frequency" or not unseen.any():
        return p
    missing = float((counts == 1).sum()) / total
    p *= 1.0 - missing
    p[unseen] = missing / unseen.sum()
    return p


def profile_probability(data: SequenceLookups, exp: FlexShardConfig,
                        devices: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The profile of the first ``exp.profile_batches`` iterations of ``devices`` x
    ``exp.per_device_batch`` samples: ``(counts per row, access probability per row,
    lookups per device per iteration)``."""
    profile = [data.iteration(t, devices, exp.per_device_batch)[1]
               for t in range(exp.profile_batches)]
    counts = np.bincount(np.concatenate(profile), minlength=data.rows)
    return (counts, estimate_probability(counts, exp.probability_estimator),
            float(np.mean([r.size for r in profile])) / devices)


def row_wise_baseline(probability: np.ndarray, topo: Topology, lookups: float,
                      row_bytes: int) -> tuple[np.ndarray, float]:
    """Row-wise sharding, the baseline: its expected traffic and its largest device's
    memory (weights + buffers), the limit FlexShard's planner must stay within."""
    rw = row_wise(probability.size, topo)
    traffic = expected_traffic(rw, probability, lookups, row_bytes, topo)
    return traffic, float(memory(rw, traffic, row_bytes, topo)["total"].max())


def build_plans(exp: FlexShardConfig, probability: np.ndarray, topo: Topology,
                lookups: float, row_bytes: int,
                extra_cuts: np.ndarray | Sequence[int] = ()) -> dict[str, Any]:
    """Every configured plan at ``topo``, the planner's searches and RW's memory limit."""
    n = probability.size
    rw = row_wise(n, topo)
    rw_traffic, rw_memory = row_wise_baseline(probability, topo, lookups, row_bytes)
    limit = rw_memory if exp.memory_limit == "rw" else None
    cuts = candidate_cuts(n, exp.candidate_cuts, extra_cuts)
    rw_seconds = traffic_summary(rw_traffic, topo)["seconds"]
    order = rank_order(probability)
    searches = {  # name -> [(search, tier-2 owners weighted by bandwidth)]
        "flexshard": [(evaluate_cuts(probability, topo, lookups, row_bytes, cuts, weighted=w,
                                     order=order), w) for w in (True, False)],
        "hot_dp": [(evaluate_cuts(probability, topo, lookups, row_bytes, cuts, node_tier=False,
                                  weighted=False, order=order), False)]}
    plans: dict[str, Plan] = {}
    for name in exp.plans:
        if name in searches:
            plans[name] = _planned(name, searches[name], probability, topo, limit, rw_seconds, rw,
                                   order)
        else:
            plans[name] = {"tw": lambda: table_wise(n, 0), "rw": lambda: rw,
                           "cw": lambda: column_wise(n, exp.cw_shards, 0, topo),
                           "twrw": lambda: table_row_wise(n, topo, 0)}[name]()
    return {"plans": plans, "searches": {k: v[0][0] for k, v in searches.items()},
            "rw_memory": rw_memory, "limit": limit}


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
        replay = range(exp.profile_batches, exp.profile_batches + exp.replay_batches)
        n = data.rows
        extra_cuts = np.rint(np.asarray(exp.replicated_fractions) * n)

        built = build_plans(exp, probability, base, lookups, row_bytes, extra_cuts)
        plan_rows, matrices = _plan_rows(built, data, base, replay, exp, probability, lookups,
                                         row_bytes, {"devices": base.devices})
        plans = pd.DataFrame(plan_rows)
        curve = fraction_curve(exp, built, n)
        rw_seconds = float(plans.loc[plans["plan"] == "rw", "expected_seconds"].iloc[0])
        curve["savings_vs_rw_ms"] = (rw_seconds - curve["seconds"]) * 1e3

        swept: dict[tuple, list[dict]] = {}  # a topology met twice is planned once

        def sweep_point(topo: Topology, extra: dict[str, Any]) -> list[dict]:
            key = (topo.nodes, topo.devices_per_node, topo.inter_bps.tobytes())
            if key not in swept:
                swept[key] = _plan_rows(build_plans(exp, probability, topo, lookups, row_bytes),
                                        data, topo, replay, exp, probability, lookups,
                                        row_bytes, {})[0]
            return [{**extra, **row} for row in swept[key]]

        sweeps: dict[str, list[dict[str, Any]]] = {"device_sweep": [], "skew_sweep": []}
        slow_cfg = replace(topology, slow_nodes=max(1, topology.slow_nodes))
        for devices in exp.device_sweep:
            topo = Topology.from_config(topology, nodes=devices // topology.devices_per_node)
            sweeps["device_sweep"] += sweep_point(topo, {"devices": devices})
        for speed in exp.skew_sweep:
            topo = Topology.from_config(slow_cfg, slow_factor=speed)
            sweeps["skew_sweep"] += sweep_point(topo, {
                "devices": topo.devices, "slow_factor": speed,
                "slow_nodes": slow_cfg.slow_nodes})

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
            "inter_traffic_reduction": 1 - by.loc["flexshard", "replay_inter_bytes"]
            / by.loc["rw", "replay_inter_bytes"],
            "traffic_reduction": 1 - by.loc["flexshard", "replay_bytes"]
            / by.loc["rw", "replay_bytes"],
            "latency_speedup": (by.loc["rw", "replay_seconds"]
                                / by.loc["flexshard", "replay_seconds"]
                                if by.loc["flexshard", "replay_seconds"] > 0 else None),
            "whole_table_replicated": bool(by.loc["flexshard", "t1"] == n),
            "memory_vs_rw": by.loc["flexshard", "replay_memory"] / by.loc["rw", "replay_memory"]}
        plans.to_csv(tmp / "plans.csv", index=False, float_format="%.6g")
        curve.to_csv(tmp / "fraction_curve.csv", index=False, float_format="%.6g")
        for name, rows in sweeps.items():
            pd.DataFrame(rows).to_csv(tmp / f"{name}.csv", index=False, float_format="%.6g")
        links.to_csv(tmp / "link_traffic.csv", index=False, float_format="%.6g")
        write_json(tmp / "summary.json", summary)
    log.info("%s: FlexShard t1 = %d, t2 = %d; %.1f%% less inter-node traffic, all-to-all "
             "latency %s lower than RW, memory %.2fx RW's", processed.name,
             summary["flexshard"]["t1"], summary["flexshard"]["t2"],
             100 * summary["inter_traffic_reduction"],
             "inf (no communication)" if summary["latency_speedup"] is None
             else f"{summary['latency_speedup']:.2f}x", summary["memory_vs_rw"])
