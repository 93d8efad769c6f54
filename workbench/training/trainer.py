"""Training a compact CTR model for real through the emulated edge cluster.

One iteration over a global batch of ``W x b`` samples:

    dispatcher: sample -> worker                         (workbench.dispatch.base)
    for each worker w:  rows_w = cache_w.read(keys of w's samples)   <- stale within the bound
    forward + backward of the whole batch at once, each sample with ITS worker's rows
    dense parameters: one optimizer step on the batch gradient (= AllReduce of the workers'
        gradients, BSP), or a gradient computed on parameters ``tau`` iterations old (ASP)
    for each worker w:  cache_w.write(keys, the recipe's per-occurrence row steps)
    clock: the cluster's time model on this iteration's counters + the compute cost

What one step moves is the model config's recipe ([`workbench.models.recipe`][], which holds
the formulas): under ``workbench`` (our choice) embedding rows get plain SGD on the per-sample
loss (the mean-loss gradient times the batch size) and the dense parameters the configured
optimizer on the batch's mean loss; under ``hetu`` (HET's reference code) every worker's loss is
the mean over its own samples, the dense gradient is the sum of the workers' (NCCL's sum) under
SGD, and a row moves by ``lr_sparse / b_w`` times its sample's loss gradient (``/ W`` as well on
a parameter-server path with ``divide_by_workers``); its test AUC is Hetu's mean per-batch AUC
(``test_auc``; the pooled rank-sum AUC beside it as ``test_auc_pooled``).

Three more mechanisms combine with any system (the ``combined`` experiment):

    dedup (RecD IKJT)   worker w reads each distinct key of its samples once (U_w = unique keys,
                        inverse lookup expands them per occurrence) and writes ONE update row
                        per distinct key (the occurrences' rows summed), so the cache's
                        update clock ticks once per key and iteration, not once per occurrence
    replicated rows     a hot set held by every worker outside its cache (Hotline's hot tier,
      (hot tier)        FlexShard's replicated tier): read locally, never pulled; the workers'
                        updates of the rows touched this iteration are all-reduced with the
                        dense gradient (4 D bytes per touched row joins the ring AllReduce)
    popular overlap     Hotline's micro-batches: a worker's popular samples (every key
      (Hotline)         replicated) need no transfer, so their compute hides the fetch of the
                        other samples' rows (``hidden_s`` of the clock; under prefetch every
                        compute overlaps already) Compute time comes from a
[`ComputeCost`][workbench.cluster.time_model.ComputeCost] (the committed calibration of this
machine, or the FLOP model), never from the wall clock of this run, so metrics are deterministic:
``(per_batch + per_sample x b) / speed_j`` for worker j with b samples.

A trainer is built from a handful of typed components rather than one flag per switch
([`workbench.training.components`][]: ModelSpec, SystemSpec, ClusterSetup, DispatcherSpec,
Mechanisms). The trainer builds the model and the table (seeded), the embedding store (a local
table for ``plain``, the emulated cluster's caches otherwise) and the dispatcher object once;
every iteration calls the dispatcher's ``decide``.

Systems: [`SystemKind`][workbench.training.components.SystemKind] (HET's, section 5).
"""

from __future__ import annotations

import copy
import logging
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from workbench.cluster.edge_cluster import EdgeCluster
from workbench.cluster.routes import DenseRoute, SparseRoute
from workbench.cluster.time_model import ComputeCost
from workbench.data.keys import sample_keys
from workbench.data.preprocess import read_split
from workbench.data.schema import LABEL, LABEL_FREE_STAGES, DatasetMeta
from workbench.dispatch.base import Dispatcher
from workbench.dispatch.registry import DispatcherSpec
from workbench.models.config import ModelConfig
from workbench.models.ctr import build_model, dense_parameter_count, flops_per_sample
from workbench.models.recipe import HETU_BATCH, Recipe
from workbench.training.components import (
    CONTIGUOUS,
    NO_MECHANISMS,
    ClusterSetup,
    EvalSchedule,
    Mechanisms,
    ModelSpec,
    SystemSpec,
)
from workbench.training.metrics import auc_score, batched_auc

log = logging.getLogger(__name__)


@dataclass
class Split:
    """One split as arrays: dense features, global embedding keys ``[n, F]``, labels."""

    dense: np.ndarray
    keys: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    def head(self, n: int | None) -> Split:
        """The first ``n`` samples (all when None)."""
        return self if n is None else Split(self.dense[:n], self.keys[:n], self.labels[:n])

    def take(self, order: np.ndarray) -> Split:
        """The samples in ``order`` (e.g. a permutation: another data order)."""
        return Split(self.dense[order], self.keys[order], self.labels[order])


def load_split(processed: Path, meta: DatasetMeta, split: str, limit: int | None) -> Split:
    """One encoded split as arrays (dense float32, global keys, labels).

    Raises:
        SingleClassError: the train split's labels (the first ``limit``) are all one class: no
            model could learn, and the AUC every training stage reports would be nan (a session
            log without its purchases file is labelled all 0); the stage stops before training,
            in one line. A test split is not checked (an explorer may read a single row).
    """
    from workbench.data.pipeline import SingleClassError

    frame = read_split(processed, split, columns=[LABEL, *meta.dense, *meta.categorical])
    if limit is not None:
        frame = frame.iloc[:limit]
    labels = frame[LABEL].to_numpy(np.float32)
    if split == "train" and labels.size and labels.min() == labels.max():
        raise SingleClassError(
            f"dataset {meta.name}: every {split} label of the {labels.size:,} rows read is "
            f"{float(labels[0]) + 0.0:g}, one class: AUC, which this stage reports, is undefined; "
            "give labelled data (a session log needs its purchases or buys file among "
            "dataset.files), or run the stages that need no labels "
            f"({', '.join(LABEL_FREE_STAGES)})")
    return Split(dense=frame[meta.dense].to_numpy(np.float32),
                 keys=sample_keys(frame, meta), labels=labels)


class EmbeddingStore(Protocol):
    """Where embedding rows come from and where their updates go."""

    def read(self, worker: int, keys: np.ndarray) -> np.ndarray: ...

    def write(self, worker: int, keys: np.ndarray, rows: np.ndarray) -> None: ...

    def table(self) -> np.ndarray: ...


class LocalStore:
    """A plain in-process table (the ``plain`` system): reads and SGD updates, nothing else."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values.copy()
        self._tensor = torch.from_numpy(self.values)  # shares memory with ``values``

    def read(self, worker: int, keys: np.ndarray) -> np.ndarray:
        """Rows of ``keys`` (one per occurrence)."""
        return self.values[keys]

    def write(self, worker: int, keys: np.ndarray, rows: np.ndarray) -> None:
        """Add one update row per occurrence (``index_add_``: in order on one thread)."""
        self._tensor.index_add_(0, torch.from_numpy(np.ascontiguousarray(keys)),
                                torch.from_numpy(np.ascontiguousarray(rows)))

    def table(self) -> np.ndarray:
        """The current table."""
        return self.values


class ClusterStore:
    """Embeddings through the emulated cluster's caches (every non-plain system)."""

    def __init__(self, cluster: EdgeCluster) -> None:
        self.cluster = cluster

    def read(self, worker: int, keys: np.ndarray) -> np.ndarray:
        """Worker ``worker`` reads through its cache."""
        return self.cluster.read(worker, keys)

    def write(self, worker: int, keys: np.ndarray, rows: np.ndarray) -> None:
        """Worker ``worker`` writes its updates through its cache."""
        self.cluster.write(worker, keys, rows)

    def table(self) -> np.ndarray:
        """The table as if every worker flushed now."""
        return self.cluster.snapshot()


def initial_parameters(cfg: ModelConfig, n_dense: int, n_sparse: int, table_rows: int,
                       seed: int) -> tuple[torch.nn.Module, np.ndarray]:
    """The model and the embedding table every backend starts from, fixed by ``seed``: the
    model from torch's generator seeded with ``seed``, the table (``cfg.row_width`` wide) from
    numpy's generator seeded with ``seed + 1``: uniform in ``+-cfg.init_scale`` (``workbench``
    recipe) or ``N(0, cfg.init_scale^2)`` (``hetu``)."""
    torch.manual_seed(seed)
    model = build_model(cfg, n_dense, n_sparse)
    rng = np.random.default_rng(seed + 1)
    shape = (table_rows, cfg.row_width)
    table = (rng.normal(0.0, cfg.init_scale, size=shape) if cfg.recipe == Recipe.HETU
             else rng.uniform(-cfg.init_scale, cfg.init_scale, size=shape))
    return model, table.astype(np.float32)


def dense_optimizer(cfg: ModelConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    """The configured optimizer (``cfg.optimizer`` at ``cfg.lr_dense``) of ``model``'s
    parameters."""
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=cfg.lr_dense)
    if cfg.optimizer == "adagrad":
        return torch.optim.Adagrad(model.parameters(), lr=cfg.lr_dense)
    return torch.optim.Adam(model.parameters(), lr=cfg.lr_dense)


def log_loss(labels: np.ndarray, logits: np.ndarray) -> float:
    """Mean binary cross-entropy of ``logits``."""
    return float(torch.nn.functional.binary_cross_entropy_with_logits(
        torch.from_numpy(np.array(logits, dtype=np.float32)),
        torch.from_numpy(np.array(labels, dtype=np.float32))))


class Trainer:
    """Trains one model on one system.

    Args:
        model: the model and the data's shape ([`ModelSpec`][]).
        system: the training system.
        cluster: the cluster, its caches and its clock ([`ClusterSetup`][]; ``plain`` uses
            only its speed and compute settings).
        dispatcher: how a global batch is split among workers: a baseline, or a cost-aware
            dispatcher built on the trainer's cluster ([`registry`][workbench.dispatch.registry];
            not under the ``plain`` system). Built once, with the replicated rows as the cost
            model's local tier.
        switches: the mechanism switches ([`Mechanisms`][]).
        seed: seeds the model initialisation, the table initialisation and the dispatcher.
        threads: torch intra-op threads. One by default: the emulated clock does not depend on
            wall time, one thread keeps results bit-reproducible, and on a 2-core machine
            torch's OpenMP threads contend badly with the numba cache kernels.

    Raises:
        ValueError: replicated rows under a system without a PS to bypass (or a mask of the
            wrong shape), a batch the workers cannot share, bad capacities, or a cost-aware
            dispatcher under ``plain``.
    """

    def __init__(self, model: ModelSpec, system: SystemSpec, cluster: ClusterSetup,
                 dispatcher: DispatcherSpec = CONTIGUOUS, switches: Mechanisms = NO_MECHANISMS,
                 *, seed: int = 0, threads: int = 1) -> None:
        torch.set_num_threads(threads)
        model_cfg, cluster_cfg, table_rows = model.config, cluster.cluster, model.table_rows
        replicated = switches.replicated
        if replicated is not None and (not system.kind.replicates_hot_rows
                                       or replicated.shape != (table_rows,)):
            raise ValueError("replicated rows need a cache or hybrid system (BSP over a PS) and "
                             f"a bool[{table_rows}] mask; got {system.kind.value!r}, shape "
                             f"{getattr(replicated, 'shape', None)}")
        self.cfg = model_cfg
        self.system = system
        self.switches = switches
        self.workers = 1 if system.kind.single else cluster_cfg.workers
        if model_cfg.batch_size % self.workers:
            raise ValueError(f"model.batch_size = {model_cfg.batch_size} is not divisible by "
                             f"cluster.workers = {self.workers}")
        self.per_worker = model_cfg.batch_size // self.workers
        self.capacities = (np.full(self.workers, self.per_worker, dtype=np.int64)
                           if cluster.capacities is None
                           else np.asarray(cluster.capacities, dtype=np.int64))
        if self.capacities.shape != (self.workers,) or self.capacities.min() < 0 \
                or self.capacities.sum() != model_cfg.batch_size:
            raise ValueError(f"capacities {self.capacities.tolist()}: need {self.workers} "
                             f"values >= 0 summing to the batch size {model_cfg.batch_size}")
        self.dim = model_cfg.row_width
        self.hetu = model_cfg.recipe == Recipe.HETU
        self.model, init = initial_parameters(model_cfg, model.n_dense, model.n_sparse,
                                              table_rows, seed)
        self.optimizer = dense_optimizer(model_cfg, self.model)
        self.cluster: EdgeCluster | None
        if system.kind.single:
            self.store: EmbeddingStore = LocalStore(init)
            self.cluster = None
        else:
            self.cluster = EdgeCluster(cluster_cfg, system.cache_config(cluster.cache),
                                       table_rows, self.dim, init, cluster.software)
            self.store = ClusterStore(self.cluster)
        self.dedup = switches.dedup
        self.replicated = replicated
        self.overlap_popular = switches.overlap_popular
        # every worker's copy of the replicated rows: identical after each AllReduce, so one
        self.replica = torch.from_numpy(init.copy()) if replicated is not None else None
        self.lookup_rows = 0  # embedding rows the workers looked up (per occurrence or unique)
        self.replicated_rows = 0  # replicated rows all-reduced this iteration (touched by any)
        self.replicated_synced = 0  # ... summed over iterations
        # the strategy object, built once: every iteration calls its decide()
        self.dispatcher: Dispatcher = dispatcher.build(self.cluster, self.capacities, seed=seed,
                                                       local=replicated)
        self.speed = np.array(cluster_cfg.per_worker("speed"))[: self.workers]
        self.flops = 3 * flops_per_sample(self.model, model.n_dense, model.n_sparse,
                                          model_cfg.embedding_dim)
        self.compute = (cluster.compute if cluster.compute is not None
                        else ComputeCost.from_flops(self.flops, cluster_cfg.gflops))
        self.dense_bytes = 4 * dense_parameter_count(self.model)
        self.tau = (self.workers - 1 if switches.asp_staleness is None
                    else switches.asp_staleness) if system.kind.asynchronous else 0
        # the recipe's row step; Hetu 149095d's division by W of what goes through the PS
        routes = system.kind.routes
        self.row_step = model_cfg.row_step(self.workers, not system.kind.single
                                           and routes.sparse is SparseRoute.PS)
        self.dense_scale = (model_cfg.ps_rate(self.workers) if routes.dense is DenseRoute.PS
                            else 1.0)
        self._stale_model = copy.deepcopy(self.model) if self.tau else None
        self._snapshots: deque[dict[str, torch.Tensor]] = deque()
        self.elapsed_s = 0.0
        self.compute_s = 0.0
        self.decision_s = 0.0  # decision time charged to the clock (beyond its budget)
        self._charge_s = 0.0
        # every iteration computes the same samples per worker: its compute is a constant, and
        # a cost-aware dispatcher's budget is a fraction of it (the time a decision hides behind)
        self.iteration_compute_s = self.compute.seconds(self.capacities, self.speed)
        self.decision_budget_s = switches.budget_fraction * float(
            self.iteration_compute_s.max())
        self.bytes = 0.0
        self.iterations = 0

    def _owner(self, keys: np.ndarray) -> np.ndarray:
        self.dispatcher.set_budget(self.decision_budget_s)  # hides behind the last compute
        decision = self.dispatcher.decide(keys, self.iterations)
        self._charge_s = decision.charged_s
        return decision.assignment

    def step(self, split: Split, start: int) -> float:
        """One iteration on samples ``[start, start + batch)``; returns the batch's loss."""
        batch = self.cfg.batch_size
        idx = np.arange(start, start + batch)
        keys = split.keys[idx]
        owner = self._owner(keys)
        f = keys.shape[1]
        emb = np.empty((batch, f, self.dim), dtype=np.float32)
        positions = [np.flatnonzero(owner == w) for w in range(self.workers)]
        plans = [self._read(w, keys[pos].ravel(), emb, pos) for w, pos in enumerate(positions)]
        emb_t = torch.from_numpy(emb).requires_grad_(True)
        dense_t = torch.from_numpy(split.dense[idx])
        labels_t = torch.from_numpy(split.labels[idx])
        model = self._forward_model()
        logits = model(dense_t, emb_t)
        if self.hetu:  # sum over workers of each one's mean loss (module docstring)
            per_sample = torch.nn.functional.binary_cross_entropy_with_logits(
                logits, labels_t, reduction="none")
            weight = 1.0 / np.bincount(owner, minlength=self.workers)[owner]
            objective = (per_sample * torch.from_numpy(weight.astype(np.float32))).sum()
            loss = per_sample.detach().mean()
        else:  # the batch's mean loss; rows by the per-sample loss's gradient
            objective = loss = torch.nn.functional.binary_cross_entropy_with_logits(logits,
                                                                                 labels_t)
        self.optimizer.zero_grad(set_to_none=True)
        model.zero_grad(set_to_none=True)
        objective.backward()
        self._dense_update(model)
        assert emb_t.grad is not None  # emb_t requires grad: backward() set it
        updates = self.row_step * emb_t.grad.numpy()
        touched = [self._write(w, plan, updates[pos].reshape(-1, self.dim))
                   for w, (pos, plan) in enumerate(zip(positions, plans))]
        hidden = 0.0
        if self.replicated is not None:
            self.replicated_rows = len(np.unique(np.concatenate(touched)))
            if self.overlap_popular:  # per-sample compute of each worker's popular samples
                popular = np.array([int(self.replicated[keys[pos]].all(axis=1).sum())
                                    for pos in positions])
                hidden = self.compute.seconds(popular, self.speed) \
                    - self.compute.seconds(np.zeros_like(popular), self.speed)
        self._clock(hidden)
        self.iterations += 1
        return float(loss.detach())

    def _read(self, w: int, flat: np.ndarray, emb: np.ndarray, pos: np.ndarray) -> tuple:
        """Worker ``w``'s rows of keys ``flat`` into ``emb[pos]``: replicated rows from its
        replica, the others through its store (each distinct key once under ``dedup``).

        Returns:
            ``(flat, remote, uniq, inverse)``: the keys, the positions in ``flat`` of those
            read through the store, their distinct keys and the inverse lookup (the last two
            None without dedup), for `_write`.
        """
        out = emb[pos].reshape(-1, self.dim) if len(pos) else np.empty((0, self.dim), np.float32)
        remote = (np.arange(len(flat)) if self.replicated is None
                  else np.flatnonzero(~self.replicated[flat]))
        if self.replicated is not None and len(remote) < len(flat):
            local = np.flatnonzero(self.replicated[flat])
            assert self.replica is not None  # there is a replica whenever rows are replicated
            out[local] = self.replica.numpy()[flat[local]]
        keys = flat[remote]
        uniq = inverse = None
        if self.dedup:
            uniq, inverse = np.unique(keys, return_inverse=True)
            out[remote] = self.store.read(w, uniq)[inverse]
            self.lookup_rows += len(np.unique(flat))  # replicated rows deduplicated as well
        else:
            out[remote] = self.store.read(w, keys)
            self.lookup_rows += len(flat)
        emb[pos] = out.reshape(len(pos), -1, self.dim)
        return flat, remote, uniq, inverse

    def _write(self, w: int, plan: tuple, rows: np.ndarray) -> np.ndarray:
        """Worker ``w``'s update ``rows`` (one per occurrence of ``flat``): the replicated ones
        into the replica (the AllReduce: every worker's updates summed), the others through its
        store (summed per distinct key under ``dedup``). Returns the replicated keys touched."""
        flat, remote, uniq, inverse = plan
        if self.replicated is not None and len(remote) < len(flat):
            local = np.flatnonzero(self.replicated[flat])
            assert self.replica is not None  # there is a replica whenever rows are replicated
            self.replica.index_add_(0, torch.from_numpy(flat[local]),
                                    torch.from_numpy(np.ascontiguousarray(rows[local])))
            touched = flat[local]
        else:
            touched = flat[:0]
        if uniq is None:
            self.store.write(w, flat[remote], np.ascontiguousarray(rows[remote]))
        else:
            summed = torch.zeros((len(uniq), self.dim))
            summed.index_add_(0, torch.from_numpy(inverse.ravel()),
                              torch.from_numpy(np.ascontiguousarray(rows[remote])))
            self.store.write(w, uniq, summed.numpy())
        return touched

    def _forward_model(self) -> torch.nn.Module:
        """The live model (BSP), or a copy holding parameters ``tau`` iterations old (ASP)."""
        if not self.tau:
            return self.model
        self._snapshots.append({k: v.detach().clone() for k, v in
                                self.model.state_dict().items()})
        if len(self._snapshots) > self.tau + 1:
            self._snapshots.popleft()
        assert self._stale_model is not None  # made whenever tau > 0
        self._stale_model.load_state_dict(self._snapshots[0])
        return self._stale_model

    def _dense_update(self, model: torch.nn.Module) -> None:
        if model is not self.model:  # ASP: the stale gradient updates the live parameters
            for live, stale in zip(self.model.parameters(), model.parameters()):
                live.grad = stale.grad
        if self.dense_scale != 1.0:  # Hetu 149095d: the PS path's rate / W
            for parameter in self.model.parameters():
                if parameter.grad is not None:
                    parameter.grad.mul_(self.dense_scale)
        self.optimizer.step()

    def _clock(self, hidden: np.ndarray | float = 0.0) -> None:
        compute = self.iteration_compute_s
        if self._charge_s:  # the decision overran its budget: the iteration waits for it
            self.elapsed_s += self._charge_s
            self.decision_s += self._charge_s
            self._charge_s = 0.0
        if self.cluster is None:
            self.elapsed_s += float(compute[0])
            self.compute_s += float(compute[0])
            return
        synced = self.dense_bytes + 4 * self.dim * self.replicated_rows
        self.replicated_synced += self.replicated_rows
        rec = self.cluster.end_iteration(compute, synced, self.system.kind.routes, hidden)
        if self.system.kind.asynchronous:  # ASP: workers run on their own clocks
            self.elapsed_s = float(self.cluster.clock_s.max())
            self.compute_s += float(compute.max())
        else:
            self.elapsed_s += float(rec["step_s"][0])
            self.compute_s += float(compute.max())
        self.bytes += float((rec["embedding_bytes"] + rec["meta_bytes"]
                             + rec["dense_bytes"]).sum())

    @torch.no_grad()
    def predict(self, split: Split, chunk: int = 8192) -> np.ndarray:
        """Logits of every sample of ``split`` with the current parameters and table."""
        table = self.store.table()
        if self.replicated is not None:  # the replicated rows live in the workers' replica
            assert self.replica is not None
            table[self.replicated] = self.replica.numpy()[self.replicated]
        out = []
        for start in range(0, len(split), chunk):
            sl = slice(start, start + chunk)
            emb = torch.from_numpy(table[split.keys[sl]])
            dense = torch.from_numpy(np.ascontiguousarray(split.dense[sl]))
            out.append(self.model(dense, emb).numpy())
        return np.concatenate(out) if out else np.zeros(0, np.float32)

    def _auc(self, labels: np.ndarray, logits: np.ndarray) -> dict[str, float]:
        """The recipe's test AUC (``test_auc``): rank-sum AUC over the split, or Hetu's mean
        per-batch AUC with the pooled one beside it (``test_auc_pooled``)."""
        pooled = auc_score(labels, logits)
        if not self.hetu:
            return {"test_auc": pooled}
        return {"test_auc": batched_auc(labels, logits, HETU_BATCH), "test_auc_pooled": pooled}

    def fit(self, train: Split, test: Split, epochs: int = 1,
            eval_every: int | EvalSchedule = 25, progress: bool = False) -> pd.DataFrame:
        """Train for ``epochs``; evaluate every ``eval_every`` iterations (or on an
        [`EvalSchedule`][]) and at the end.

        Returns:
            One row per evaluation: ``iteration``, ``samples``, ``epoch``, ``train_logloss``
            (mean since the previous evaluation), ``test_auc`` (the recipe's; ``hetu`` adds
            ``test_auc_pooled``), ``test_logloss``, ``time_s`` (emulated), ``compute_s``,
            ``decision_s`` (dispatch time charged beyond its budget), ``comm_s``
            (= time - compute - decision), ``bytes``.
        """
        batch = self.cfg.batch_size
        steps = len(train) // batch
        if steps == 0:
            raise ValueError(f"{len(train)} train samples hold no batch of {batch}")
        schedule = (eval_every if isinstance(eval_every, EvalSchedule)
                    else EvalSchedule(eval_every, 0, eval_every))
        rows, losses = [], []
        bar = tqdm(total=steps * epochs, disable=not progress, unit="it",
                   desc=self.system.label)
        for epoch in range(epochs):
            for step in range(steps):
                losses.append(self.step(train, step * batch))
                bar.update()
                last = epoch == epochs - 1 and step == steps - 1
                if schedule.due(self.iterations) or last:
                    logits = self.predict(test)
                    rows.append({
                        "iteration": self.iterations, "samples": self.iterations * batch,
                        "epoch": epoch + (step + 1) / steps,
                        "train_logloss": float(np.mean(losses)),
                        **self._auc(test.labels, logits),
                        "test_logloss": log_loss(test.labels, logits),
                        "time_s": self.elapsed_s, "compute_s": self.compute_s,
                        "decision_s": self.decision_s,
                        "comm_s": self.elapsed_s - self.compute_s - self.decision_s,
                        "bytes": self.bytes})
                    losses = []
        bar.close()
        return pd.DataFrame(rows)
