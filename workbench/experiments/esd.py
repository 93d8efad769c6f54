"""ESD experiments: transmission cost per dispatcher, decision time, and end-to-end training.

**Our formalisation of ESD** ([`workbench.dispatch.cost_model`][],
[`workbench.dispatch.hybriddis`][]): the paper's method section is unavailable.

* ``cost.csv``: mean weighted transmission cost per batch (seconds of row transfers over each
  worker's own link, summed over workers: ``sum_j rows_j x D x 4 / B_j``), the BSP makespan
  (the slowest worker's communication seconds) and the rows moved, per dispatcher, for sweeps
  over the number of workers, the cache ratio, the bandwidth spread (fastest / slowest link,
  log-spaced in between) and the samples per worker. Every run first warms its caches with its
  own dispatcher until they are full and the hit rate is stable ([`warm_up`][]; the warm-up
  length and whether steady state was reached are in the table), then measures ``batches``.
* ``decision.csv``: decision seconds per batch and cost per dispatcher at the base setting
  (quality vs decision time, and which solver hybriddis chose), and hybriddis' in its budget and
  predictor sweeps.
* ``exact_times.csv``: every exact solve of every sweep (esd_exact's and hybriddis'): its
  variables V = N x W and wall seconds, the measurements HybridDis' ``fitted`` predictor
  (``exact_time_fit``, committed) is fitted to, and its residuals on this run.
* ``train.csv`` / ``train_summary.json``: the model trained end to end through the cluster with
  each of ``train_dispatchers`` (test AUC against emulated time; time to target); the summary's
  ``replicates`` holds each dispatcher's time to target in ``train_replicates`` runs at the base
  spread (seed + r: a new initialisation and data order each; replicate 0 is the main run);
  ``train_replicates.csv`` every replicate's evaluations (AUC and emulated time).
* ``train_modes.csv``: every end-to-end run (each dispatcher at each of ``train_spreads``)
  clocked in each dense synchronisation mode of ``train_dense_modes``
  ([`workbench.cluster.dense_sync`][]; exact: the counters and compute of a run do not
  depend on time): the time to target, the step, the share of it the dense synchronisation
  takes (the AllReduce past backward; in ``ps`` the dense push and pull over the slowest link,
  part of its exchange), and the speedup against random and LAIA; also with the dense bytes
  scaled by each of ``train_dense_scales`` (a what-if: a smaller dense part, or one
  synchronised off the edge links), which moves the dense share continuously. The dispatchers
  gain only on the embedding traffic, so the dense share bounds their speedup: the figure shows
  the speedup against it.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.construction import clock_cluster, edge_cluster_config
from workbench.cluster.edge_cluster import EdgeCluster
from workbench.cluster.time_model import ComputeCost
from workbench.data.config import DatasetConfig
from workbench.data.keys import read_keys, table_rows
from workbench.data.schema import DatasetMeta
from workbench.dispatch.base import run_dispatch
from workbench.dispatch.registry import DispatcherSpec, SolverOptions, make_dispatcher
from workbench.experiments.config import EsdConfig, HetTrainConfig
from workbench.experiments.context import RunContext, say_if_reversed
from workbench.experiments.sizing import fitting, require_global_batch
from workbench.models.config import ModelConfig

if TYPE_CHECKING:  # the trainer imports torch: loaded by the training only
    from workbench.training.components import ClusterSetup

log = logging.getLogger(__name__)
VALUE_DIM = 4  # width of the rows the replay holds (its counters do not depend on it)


def edge_cluster(exp: EsdConfig, links: ClusterConfig, rows: int, cache_ratio: float,
                 wire_dim: int) -> EdgeCluster:
    """The emulated edge cluster of one ESD point: ``links`` ([`edge_cluster_config`][]),
    LRU HET caches of ``cache_ratio`` with read and write bound ``exp.bound``, holding
    ``VALUE_DIM``-wide rows and clocking every byte and second at ``wire_dim`` (the model's D:
    ``transfer_s``, ``comm_s`` and the makespan alike)."""
    return EdgeCluster(links, CacheConfig(policy="lru", ratio=cache_ratio, read_bound=exp.bound,
                                          write_bound=exp.bound), rows, VALUE_DIM,
                       wire_dim=wire_dim)


def worker_capacities(cluster: ClusterConfig, per_worker: int, mode: str) -> np.ndarray:
    """Samples per worker of a global batch of ``W x per_worker``.

    ``equal``: ``per_worker`` each. ``proportional``: shares proportional to a worker's rate
    ``1 / (1 / speed_j + B_max / B_j)`` (compute and link both count; a worker half as fast in
    both gets half the samples), rounded by largest remainder, at least one each, same total.
    """
    workers = cluster.workers
    if mode == "equal":
        return np.full(workers, per_worker, dtype=np.int64)
    speed = np.array(cluster.per_worker("speed"), dtype=np.float64)
    bw = np.array(cluster.per_worker("bandwidth_gbps"), dtype=np.float64)
    rate = 1.0 / (1.0 / speed + bw.max() / bw)
    total = workers * per_worker
    share = 1 + rate / rate.sum() * (total - workers)
    caps = np.floor(share).astype(np.int64)
    left = total - caps.sum()
    caps[np.argsort(-(share - caps), kind="stable")[:left]] += 1
    return caps


def warm_up(cluster: EdgeCluster, keys: np.ndarray, disp, exp: EsdConfig,
            wire_dim: int) -> tuple[int, bool, float]:
    """Dispatch with ``disp`` until every cache is full and its hit rate is stable.

    Steady state: every worker's cache holds ``capacity`` lines, and the hit rate over the last
    ``warmup_window`` batches (1 - miss pulls / unique keys read, all workers) differs from the
    window before by at most ``warmup_tolerance``. At most ``warmup_max`` batches.

    Returns:
        ``(batches run, steady state reached, hit rate of the last window)``.
    """
    from workbench.cluster.cache import C_INDEX

    window, done, last = exp.warmup_window, 0, None
    hit = float("nan")
    while done < exp.warmup_max:
        before = cluster.counters()
        run_dispatch(cluster, keys, disp, window, wire_dim=wire_dim, start=done)
        done += window
        delta = cluster.counters() - before
        unique = delta[:, C_INDEX["unique_read"]].sum()
        hit = 1.0 - delta[:, C_INDEX["miss_pulls"]].sum() / max(unique, 1)
        full = all(c.size >= c.capacity for c in cluster.caches)
        if full and last is not None and abs(hit - last) <= exp.warmup_tolerance:
            return done, True, hit
        last = hit
    return done, False, hit


def solver_options(exp: EsdConfig, predictor: str | None = None) -> SolverOptions:
    """The ESD solvers' settings of this stage: the shared ones (``dispatcher_options``, at
    HybridDis' ``predictor``, by default the committed one) and HybridDis' look-ahead
    (``hybrid_lookahead``, this stage's own)."""
    return SolverOptions(**exp.dispatcher_options(predictor), lookahead=exp.hybrid_lookahead)


@dataclass(frozen=True)
class EsdPoint:
    """One setting of the ESD sweeps ([`one_run`][]).

    Attributes:
        workers: W.
        per_worker: samples per worker of a global batch.
        cache_ratio: every worker's cache, as a fraction of the table.
        spread: fastest / slowest link bandwidth.
        capacity: ``equal`` or ``proportional`` shares ([`worker_capacities`][]).
        budget_fraction: HybridDis' budget, as a fraction of one iteration's compute.
        predictor: HybridDis' time predictor of the exact solver.
    """

    workers: int
    per_worker: int
    cache_ratio: float
    spread: float
    capacity: str
    budget_fraction: float
    predictor: str

    @classmethod
    def base(cls, exp: EsdConfig) -> EsdPoint:
        """The base setting of ``exp``."""
        return cls(workers=exp.workers, per_worker=exp.per_worker, cache_ratio=exp.cache_ratio,
                   spread=exp.bandwidth_spread, capacity=exp.capacity,
                   budget_fraction=exp.hybrid_budget_fraction, predictor=exp.hybrid_predictor)


def one_run(keys: np.ndarray, rows: int, exp: EsdConfig, dispatcher: str, point: EsdPoint, *,
            wire_dim: int, seed: int, compute: ComputeCost) -> tuple[dict[str, Any], list[dict]]:
    """Warm the caches to steady state with one dispatcher, then measure ``exp.batches``.

    HybridDis' budget is ``point.budget_fraction`` x one iteration's compute of the train model
    on the slowest-loaded worker (``compute``: the calibrated clock); ``point.capacity`` is
    ``equal`` or ``proportional`` ([`worker_capacities`][])."""
    links = edge_cluster_config(exp, point.workers, point.spread)
    cluster = edge_cluster(exp, links, rows, point.cache_ratio, wire_dim)
    caps = worker_capacities(links, point.per_worker, point.capacity)
    disp = make_dispatcher(dispatcher, cluster, caps, solver_options(exp, point.predictor),
                           wire_dim=wire_dim, seed=seed)
    budget = point.budget_fraction * float(compute.seconds(caps).max())
    disp.set_budget(budget)
    warm, steady, hit = warm_up(cluster, keys, disp, exp, wire_dim)
    kept = run_dispatch(cluster, keys, disp, exp.batches, wire_dim=wire_dim, start=warm)
    transfer = np.array([r["transfer_s"].sum() for r in kept])
    makespan = np.array([r["comm_s"].max() for r in kept])
    rows_moved = np.array([(r["pulled_rows"] + r["pushed_rows"]).sum() for r in kept])
    methods = pd.Series([r["method"] for r in kept]).value_counts().to_dict()
    per_worker_comm = np.mean([r["comm_s"] for r in kept], axis=0)
    return {"dispatcher": dispatcher, "workers": point.workers, "per_worker": point.per_worker,
            "cache_ratio": point.cache_ratio, "spread": point.spread,
            "capacity": point.capacity, "budget_fraction": point.budget_fraction,
            "predictor": point.predictor,
            "capacities": " ".join(map(str, caps)),
            "worker_comm_s": " ".join(f"{c:.6g}" for c in per_worker_comm),
            "warmup_batches": warm, "steady": steady, "warm_hit_rate": hit,
            "budget_s": budget,
            "charged_s_per_batch": float(np.mean([r["charged_s"] for r in kept])),
            "transfer_s_per_batch": float(transfer.mean()),
            "makespan_s_per_batch": float(makespan.mean()),
            "rows_per_batch": float(rows_moved.mean()),
            "methods": ";".join(f"{k}:{v}" for k, v in sorted(methods.items()))}, kept


DEDUP_PROBE = ((8, 2), (16, 2), (16, 4), (32, 4), (64, 8), (128, 8))  # (samples, workers)


def dedup_ilp_probe(keys: np.ndarray, rows: int, exp: EsdConfig, wire_dim: int,
                    seed: int) -> pd.DataFrame:
    """Up to which size the deduplicated ILP is exact within ``exp.time_limit_s``, here.

    The base setting's caches are warmed to steady state by ``esd_heuristic``; the next batch's
    cost model output is cut to its first N samples and first W workers (equal capacities) for
    each size of [`DEDUP_PROBE`][] that fits the base batch, plus the whole base batch. Each
    is solved by [`solve_dedup_ilp`][workbench.dispatch.exact.solve_dedup_ilp] under the time limit
    and by the regret + swap heuristic, twice: the first pass is not kept (on a cold numba cache it
    compiles the start plans' kernels, which had cost rows their time limit). Proven optimality
    depends on this machine's speed (as the decision times do): the rows say how long each solve
    took.
    """
    from workbench.dispatch.exact import solve_dedup_ilp
    from workbench.dispatch.heuristic import regret_swap
    from workbench.dispatch.hybriddis import EsdDispatcher

    links = edge_cluster_config(exp, exp.workers, exp.bandwidth_spread)
    cluster = edge_cluster(exp, links, rows, exp.cache_ratio, wire_dim)
    caps = worker_capacities(links, exp.per_worker, "equal")
    disp = make_dispatcher("esd_heuristic", cluster, caps,
                           SolverOptions(heuristic_rounds=exp.heuristic_rounds),
                           wire_dim=wire_dim, seed=seed)
    assert isinstance(disp, EsdDispatcher)  # its cost model prices the probed batch
    warm, _, _ = warm_up(cluster, keys, disp, exp, wire_dim)
    n_all = int(caps.sum())
    batch = keys[np.arange(warm * n_all, (warm + 1) * n_all) % len(keys)]
    sizes = [(n, w) for n, w in DEDUP_PROBE if n < n_all and w <= exp.workers and n % w == 0]
    out = []
    for timed in (False, True):  # the first pass loads (cold: compiles) what the rows time
        for n, w in [*sizes, (n_all, exp.workers)]:
            A, indptr, indices = disp.cost_model.batch(batch[:n])
            A = A[:w]
            cap = np.full(w, n // w) if (n, w) != (n_all, exp.workers) else caps
            ilp = solve_dedup_ilp(A, indptr, indices, cap, exp.time_limit_s)
            heur = regret_swap(A, indptr, indices, cap, exp.heuristic_rounds)
            if timed:
                out.append({"samples": n, "workers": w, "proven_optimal": ilp.optimal,
                            "plan": ilp.method, "wall_s": ilp.seconds,
                            "time_limit_s": exp.time_limit_s, "mip_gap": ilp.mip_gap,
                            "ilp_cost": ilp.objective, "heuristic_cost": heur.objective,
                            "heuristic_over_ilp": heur.objective / ilp.objective - 1
                            if ilp.objective > 0 else 0.0})
    return pd.DataFrame(out)


def run(ctx: RunContext, exp: EsdConfig, *, train: HetTrainConfig, dataset: DatasetConfig,
        model: ModelConfig, cluster: ClusterConfig) -> None:
    """The ``esd`` stage: sweeps, decision times, end-to-end training; writes ``out`` whole.

    Args:
        ctx: where it reads and writes, the seed, the clock's calibration, progress bars.
        exp: the experiment's settings.
        train: the training run lengths (epochs, evaluation, sample caps) of HET's experiments.
        dataset: the dataset (its ``target_auc``).
        model: the model trained end to end (``models.<exp.train_model>``); its embedding
            width sets the bytes of a row on the wire.
        cluster: the clock's settings (``compute``, ``software``, ``overlap``, ``gflops``) of the
            end-to-end training; the links are ESD's own ([`edge_cluster_config`][]).
    """
    processed, out, seed, calibration, progress = (ctx.processed, ctx.out, ctx.seed,
                                                   ctx.calibration, ctx.progress)
    from tqdm.auto import tqdm

    from workbench.utils.io import atomic_dir, write_json

    if exp.embedding_dim is not None:  # the stage's D (Herald's recipe), not the model's
        model = dataclasses.replace(model, embedding_dim=exp.embedding_dim)
    meta = DatasetMeta.read(processed)
    keys = read_keys(processed, meta)
    rows = table_rows(meta)
    wire_dim = model.embedding_dim
    samples = min(len(keys), train.max_train_samples or len(keys))
    require_global_batch(samples, exp.workers, exp.per_worker, meta.name,
                         "experiments.esd.workers", "experiments.esd.per_worker")
    skipped: dict[str, list[int]] = {}
    worker_sweep = fitting("experiments.esd.worker_sweep", exp.worker_sweep,
                           lambda w: samples >= w * exp.per_worker, skipped)
    batch_sweep = fitting("experiments.esd.batch_sweep", exp.batch_sweep,
                          lambda b: samples >= exp.workers * b, skipped)
    base = EsdPoint.base(exp)
    change = dataclasses.replace
    points = [("base", base)]
    points += [("workers", change(base, workers=w)) for w in worker_sweep]
    points += [("cache_ratio", change(base, cache_ratio=c)) for c in exp.cache_sweep]
    points += [("spread", change(base, spread=s)) for s in exp.spread_sweep]
    points += [("per_worker", change(base, per_worker=b)) for b in batch_sweep]
    points += [("capacity", change(base, capacity=c)) for c in exp.capacity_sweep]
    # the budget and the predictor only matter to hybriddis: their sweeps run it alone
    points += [("budget", change(base, budget_fraction=f)) for f in exp.budget_sweep]
    points += [("predictor", change(base, predictor=p)) for p in exp.predictor_sweep]
    alone = ("budget", "predictor")
    runs_of = {sweep: [d for d in exp.dispatchers if sweep not in alone or d == "hybriddis"]
               for sweep, _ in points}
    from workbench.training.clock import ModelShape, clock_costs

    cluster_cfg = clock_cluster(exp, cluster)
    compute, software = clock_costs(cluster_cfg, calibration, ModelShape(
        exp.train_model, model, len(meta.dense), len(meta.categorical)))
    rows_out, decisions, solves = [], [], []
    done: dict[tuple[str, EsdPoint], dict[str, Any]] = {}
    bar = tqdm(total=sum(len(runs_of[sweep]) for sweep, _ in points), disable=not progress,
               desc="esd")
    for sweep, point in points:
        for name in runs_of[sweep]:
            key = (name, point)
            if key not in done:
                done[key], records = one_run(keys, rows, exp, name, point, seed=seed,
                                             wire_dim=wire_dim, compute=compute)
                solves += [{"sweep": sweep, "dispatcher": name, "workers": point.workers,
                            "samples": int(sum(len(s) for s in r["samples"])),
                            "variables": int(sum(len(s) for s in r["samples"])) * point.workers,
                            "exact_s": r["exact_s"]}
                           for r in records if np.isfinite(r["exact_s"])]
                if sweep in ("base", "budget", "predictor"):
                    decisions += [{"dispatcher": name, "sweep": sweep,
                                   "predictor": point.predictor,
                                   "budget_fraction": point.budget_fraction,
                                   "budget_s": done[key]["budget_s"], "batch": t,
                                   "method": r["method"],
                                   "decision_s": r["decision_s"], "charged_s": r["charged_s"],
                                   "transfer_s": float(r["transfer_s"].sum())}
                                  for t, r in enumerate(records)]
            rows_out.append({"sweep": sweep, **done[key]})
            bar.update()
    bar.close()
    cost = pd.DataFrame(rows_out)
    probe = dedup_ilp_probe(keys, rows, exp, wire_dim, seed)
    from workbench.training.components import ClusterSetup

    def setup_at(spread: float) -> ClusterSetup:
        links = clock_cluster(exp, cluster, spread)
        return ClusterSetup(links, CacheConfig(policy="lru", ratio=exp.cache_ratio), compute,
                            software, worker_capacities(links, exp.per_worker, exp.capacity))

    train_frame, modes_frame, curves, train_summary = train_end_to_end(ctx, meta, exp, train, model,
                                                               dataset.target_auc, setup_at)
    summary = {"dataset": meta.name, "table_rows": rows, "samples": int(len(keys)),
               "wire_dim": wire_dim, **dataclasses.asdict(exp), "train": train_summary,
               "skipped": skipped,
               "formalisation": "ours (the ESD paper's method section is unavailable)"}
    summary["dataset"] = meta.name  # the data it ran on, not the config's pipeline dataset
    with atomic_dir(out) as tmp:
        cost.to_csv(tmp / "cost.csv", index=False, float_format="%.6g")
        # decision seconds are wall-clock measurements (machine-dependent, reported, never
        # used in a decision: hybriddis' switch uses the configured predictor)
        pd.DataFrame(decisions).to_csv(tmp / "decision.csv", index=False, float_format="%.6g")
        # the exact solver's wall seconds per solve (machine-dependent, like decision.csv): the
        # data the fitted predictor is fitted to, and its residuals on this run
        pd.DataFrame(solves).to_csv(tmp / "exact_times.csv", index=False, float_format="%.6g")
        train_frame.to_csv(tmp / "train.csv", index=False, float_format="%.6g")
        modes_frame.to_csv(tmp / "train_modes.csv", index=False, float_format="%.6g")
        curves.to_csv(tmp / "train_replicates.csv", index=False, float_format="%.8g")
        # wall-clock bound like decision.csv: whether a solve is proven depends on the machine
        probe.to_csv(tmp / "dedup_ilp.csv", index=False, float_format="%.6g")
        write_json(tmp / "summary.json", summary)


def train_end_to_end(ctx: RunContext, meta: DatasetMeta, exp: EsdConfig,
                     train_exp: HetTrainConfig, model: ModelConfig, target: float,
                     setup_at: Callable[[float], ClusterSetup]
                     ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Train ``model`` through the edge cluster with each train dispatcher at each spread, and
    clock every run in each dense synchronisation mode.

    Args:
        ctx: the run's data, seed and progress bars.
        meta: the dataset's schema.
        exp: the experiment's settings (the dispatchers, spreads, modes, the cache bound, the
            solvers).
        train_exp: the training run lengths (epochs, evaluation, sample caps).
        model: the model trained (its batch becomes ``exp.workers x exp.per_worker``).
        target: the AUC whose time to reach is recorded.
        setup_at: the edge links at a bandwidth spread ([`clock_cluster`][]) with the LRU
            caches, the clock's calibrated costs and the workers' capacities.

    Returns:
        ``train.csv`` (the evaluations of the base spread's runs, clocked in the cluster's
        mode), ``train_modes.csv`` (per dispatcher, spread and dense mode: the time to target,
        the step, the dense synchronisation's share of it, the speedup against ``random`` and
        ``laia``), ``train_replicates.csv`` (every replicate's evaluations at the base spread:
        test AUC and emulated time per evaluated iteration, from which the claim reads the time
        to any target and the steady-state time per iteration) and the summary.
    """
    from workbench.cluster.edge_cluster import reclock
    from workbench.cluster.time_model import Links
    from workbench.training.clock import clock_summary
    from workbench.training.components import Mechanisms, ModelSpec, SystemKind, SystemSpec
    from workbench.training.metrics import time_to_target
    from workbench.training.trainer import Trainer, load_split

    base = setup_at(exp.bandwidth_spread)
    assert base.compute is not None and base.software is not None  # the calibrated clock
    model_cfg = dataclasses.replace(model, batch_size=exp.workers * exp.per_worker)
    train = load_split(ctx.processed, meta, "train", train_exp.max_train_samples)
    test = load_split(ctx.processed, meta, "test", train_exp.max_test_samples)
    shape = ModelSpec(model_cfg, len(meta.dense), len(meta.categorical), table_rows(meta))
    options = solver_options(exp)

    def cache_trainer(setup: ClusterSetup, name: str, seed: int) -> Trainer:
        """The Cache s=bound trainer of ``shape`` on ``setup``, dispatched by ``name``."""
        system = SystemSpec(f"Cache s={exp.bound}", SystemKind.CACHE, exp.bound)
        return Trainer(shape, system, setup, DispatcherSpec(name, options),
                       Mechanisms(budget_fraction=exp.hybrid_budget_fraction), seed=seed)

    spreads = list(dict.fromkeys([exp.bandwidth_spread, *exp.train_spreads]))
    modes = list(dict.fromkeys([base.cluster.dense_mode, *exp.train_dense_modes]))
    latencies = list(dict.fromkeys([exp.latency_ms, *exp.train_latencies_ms]))
    frames: list[pd.DataFrame] = []
    curves: list[pd.DataFrame] = []
    by_mode: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"target_auc": target, "runs": [], "spreads": spreads,
                               "dense_mode": base.cluster.dense_mode, "dense_modes": modes,
                               "dense_sync": base.cluster.dense_sync().describe(),
                               "clock": clock_summary(base.cluster, base.compute, base.software)}
    for spread in spreads:
        setup = setup_at(spread)
        for name in exp.train_dispatchers:
            trainer = cache_trainer(setup, name, ctx.seed)
            metrics = trainer.fit(train, test, epochs=train_exp.epochs,
                                  eval_every=train_exp.eval_every, progress=ctx.progress)
            assert trainer.cluster is not None  # a cache system always has its cluster
            history = trainer.cluster.history()
            at = metrics["iteration"].to_numpy() - 1  # the evaluation after iteration k
            for mode, scale, latency in itertools.product(modes, exp.train_dense_scales,
                                                          latencies):
                dense_bytes = scale * trainer.dense_bytes
                clocked = reclock(history, Links.from_config(
                    dataclasses.replace(setup.cluster, dense_mode=mode,  # type: ignore[arg-type]
                                        latency_ms=[latency]),
                    setup.software), model_cfg.embedding_dim, dense_bytes)
                elapsed = clocked["step_s"].cumsum().to_numpy()[at] + metrics["decision_s"]
                if mode == "ps":  # inside the exchanges: the slowest link's push + pull
                    slowest = min(setup.cluster.per_worker("bandwidth_gbps")) * 1e9 / 8
                    clocked["dense_s"] = np.minimum(2 * dense_bytes / slowest,
                                                    clocked["step_s"])
                # the embedding exchange the step saw: what is neither compute nor dense sync
                embedding = (clocked["step_s"] - clocked["dense_s"]
                             - clocked["compute_s"]).clip(lower=0.0)
                by_mode.append({
                    "dispatcher": name, "spread": spread, "dense_mode": mode,
                    "dense_scale": scale, "latency_ms": latency,
                    "time_to_target_s": time_to_target(metrics.assign(time_s=elapsed), target),
                    "time_s": float(elapsed.iloc[-1]),
                    "step_s": float(clocked["step_s"].mean()),
                    "dense_exposed_s": float(clocked["dense_s"].mean()),
                    "dense_total_s": float(clocked["dense_total_s"].mean()),
                    "dense_share": float(clocked["dense_s"].sum() / clocked["step_s"].sum()),
                    "embedding_share": float(embedding.sum() / clocked["step_s"].sum())})
            if spread != exp.bandwidth_spread:
                continue
            metrics.insert(0, "dispatcher", name)
            frames.append(metrics)
            curves.append(_curve(metrics, 0, ctx.seed))
            decided = getattr(trainer.dispatcher, "decided", {})  # the ESD dispatchers'
            summary["runs"].append({"dispatcher": name,
                                    "methods": dict(sorted(decided.items())),
                                    "time_to_target_s": time_to_target(metrics, target),
                                    "final_auc": float(metrics["test_auc"].iloc[-1]),
                                    "time_s": float(metrics["time_s"].iloc[-1]),
                                    "decision_s": float(metrics["decision_s"].iloc[-1])})
    summary["replicates"] = [{"replicate": 0, "seed": ctx.seed, "dispatcher": r["dispatcher"],
                              "time_to_target_s": r["time_to_target_s"]}
                             for r in summary["runs"]]
    for r in range(1, exp.train_replicates):
        order = np.random.default_rng(ctx.seed + r).permutation(len(train))
        data = train.take(order)
        for name in exp.train_dispatchers:
            trainer = cache_trainer(base, name, ctx.seed + r)
            metrics = trainer.fit(data, test, epochs=train_exp.epochs,
                                  eval_every=train_exp.eval_every, progress=ctx.progress)
            summary["replicates"].append({"replicate": r, "seed": ctx.seed + r,
                                          "dispatcher": name,
                                          "time_to_target_s": time_to_target(metrics, target)})
            curves.append(_curve(metrics.assign(dispatcher=name), r, ctx.seed + r))
    times = {r["dispatcher"]: r["time_s"] for r in summary["runs"]}
    for reference in ("random", "laia"):
        if "hybriddis" in times and reference in times:
            say_if_reversed(log, f"HybridDis against {reference}", times["hybriddis"],
                            times[reference], "the ESD paper's (claim esd.speedup)")
    modes_frame = pd.DataFrame(by_mode)
    for reference in ("random", "laia"):
        if reference in exp.train_dispatchers:
            cols = ["spread", "dense_mode", "dense_scale", "latency_ms"]
            ref = modes_frame[modes_frame["dispatcher"] == reference].set_index(cols)[
                "time_to_target_s"]
            keys = pd.MultiIndex.from_frame(modes_frame[cols])
            modes_frame[f"speedup_vs_{reference}"] = (
                ref.reindex(keys).to_numpy() / modes_frame["time_to_target_s"].to_numpy())
    return (pd.concat(frames, ignore_index=True), modes_frame,
            pd.concat(curves, ignore_index=True), summary)


def _curve(metrics: pd.DataFrame, replicate: int, seed: int) -> pd.DataFrame:
    """One run's evaluations as ``train_replicates.csv`` keeps them."""
    return metrics.loc[:, ["dispatcher", "iteration", "test_auc", "time_s", "decision_s"]].assign(
        replicate=replicate, seed=seed)
