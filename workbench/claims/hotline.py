"""Hotline's claims (v2's speedup, v1 against the hybrid), modelled from the ``hotline`` stage.

Reads ``results/hotline/<ds>/``: ``summary.json`` (the trained steps' counts evaluated by the
time model on each server of ``workbench/conf/hardware``) and ``conditions.csv`` (every server
re-evaluated at each host rate and in each rows unit). Both claims are the time model's (the
paper's hardware): a modelled value, never a measurement on the paper's machine.

* ``hotline.speedup`` (v2) on the newest server, ``hotline.v1_hybrid`` on the oldest: Hotline's
  modelled epoch speedup over the hybrid; the host rate and the gather unit are the conditions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.claims.measurement import EntryLike, Measurement, Results

NOTE = ("modelled, not measured: our time model with assumed efficiencies "
        "(workbench/conf/hardware); the paper's hardware and baselines' internals are unknown; "
        "a deterministic model of the trained steps (n = 1). Measured on an NVIDIA H200 "
        "(results/hotline_cuda/, docs/hotline_cuda.md), Hotline took longer than the hybrid; "
        "the accelerator path has since been rebuilt (the split made on a planner thread during "
        "the previous step, one fused gather, the micro-batch step capturable as CUDA graphs) "
        "and not yet measured on a GPU: on a machine with one, `python "
        "benchmarks/hotline_cuda.py` measures it and refits the launch and split costs")


def summary(res: Results) -> dict[str, Any]:
    """The ``hotline`` stage's summary."""
    return res.json("hotline", res.cfg.experiments.hotline.dataset, "summary.json")


def setting(res: Results) -> str:
    """The trained run's setting (dataset, model, hot set, device)."""
    s = summary(res)
    return (f"{s['dataset']}: {s['train_samples']:,} train samples, DLRM D = "
            f"{s['embedding_dim']}, batch {s['batch_size']:,}; hot set {s['hot_rows']:,} of "
            f"{s['table_rows']:,} rows ({100 * s['budget_fraction']:.1f}% of the table bytes = "
            f"FAE's {s['budget_mb_full']:g} MiB at full Criteo scale), "
            f"{100 * s['popular_fraction']:.1f}% of the inputs popular; {s['device']}, "
            f"{s['threads']} compute thread(s) + 1 gather thread")


def server_of(res: Results, entry: EntryLike) -> str:
    """The server a claim is modelled on: v1's is the oldest configured, v2's the newest."""
    hardware = res.cfg.experiments.hotline.hardware
    return hardware[0] if entry.key == "hotline.v1_hybrid" else hardware[-1]


def host_points(res: Results, server: str) -> dict[str, list[dict[str, Any]]]:
    """The modelled speedup at each host rate and in each gather unit on ``server``."""
    exp = res.cfg.experiments.hotline
    conditions = res.csv("hotline", exp.dataset, "conditions.csv")
    at = conditions[(conditions["server"] == server) & (conditions["scheme"] == "hotline")]
    committed_rate = summary(res)["servers"][server]["host_gbps"]
    return {"host rate": [{"value": r["host_gbps"], "values": [r["speedup"]]}
                          for _, r in at[at["rows_unit"] == exp.rows_unit].iterrows()],
            "gather unit": [{"value": r["rows_unit"], "values": [r["speedup"]]}
                            for _, r in at[np.isclose(at["host_gbps"], committed_rate)]
                            .iterrows()]}


def speedup(res: Results, entry: EntryLike) -> Measurement:
    """Hotline's modelled speedup over the hybrid on the claim's server."""
    server, servers = server_of(res, entry), summary(res)["servers"]
    value = summary(res)["speedup_modelled"][server]["hotline"]
    return Measurement(
        entry.key, f"{value:.2f}x modelled",
        f"{servers[server]['label']}, host {servers[server]['host_gbps']:g} GB/s, rows per "
        f"{res.cfg.experiments.hotline.rows_unit}; " + setting(res),
        {"values": [value]}, host_points(res, server), NOTE)
