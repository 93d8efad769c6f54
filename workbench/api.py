"""The few calls a researcher types in a notebook cell; each answers in seconds with a tidy frame.


    from workbench import api
    cfg = api.config(["experiments.esd.bandwidth_spread=100"])  # Hydra overrides, validated
    data = api.load(cfg, train_samples=8192)                     # a processed dataset's splits
    api.replay_cache(data.train.keys, data.rows, policy="lfu", cache_ratio=0.05, bound=10)
    api.dispatch(data, ["random", "laia", "hybriddis"], cfg, bandwidth_spread=100)
    api.train(data, cfg, steps=40, mechanisms=["esd", "het", "recd"])

| call | what it runs | returns |
| --- | --- | --- |
| ``config`` | compose ``workbench/conf/`` (or read a params file) + overrides | WorkbenchConfig |
| ``load`` | a processed dataset's train / test splits | [`Data`][] |
| ``cluster`` | the emulated edge cluster of the config (links, caches) | EdgeCluster |
| ``replay_cache`` | samples' keys through HET caches, one setting per call | DataFrame, 1 row |
| ``dispatch`` | dispatchers on ESD's edge cluster, warmed, then measured | DataFrame, 1 / disp. |
| ``train`` | N steps through the cluster with any mechanisms on | DataFrame per eval |
| ``ikjt`` | batches of a table as RecD IKJTs: dedup per group | DataFrame per group |
| ``access_skew`` | share of lookups taken by the top fractions of rows | DataFrame / fraction |
| ``hot_tier`` | Hotline's hot set per budget: popular inputs, hot hits | DataFrame / budget |
| ``flexshard`` | FlexShard's replicated tier against row-wise sharding | DataFrame / fraction |

Every call is deterministic for a given config and seed. The pipeline's stages call the same
experiment functions at full size; these run small variants of them.

Every call checks its numbers before any work ([`workbench.arguments`][]): a parameter that
stands for a config key has that key's range (``cache_ratio``: ``cache.ratio``'s ``(0, 1]``), the
``**knobs`` of ``dispatch`` and ``train`` are validated as their config section is, and NaN is
refused; a bad one stops with one line naming the call, the parameter, its value and the range:

    ArgumentError: api.replay_cache: cache_ratio = 5.0: must be a number > 0.0 and <= 1.0
    (as config key cache.ratio)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.arguments import ArgumentError, arg, check, key, replace
from workbench.cluster.config import CachePolicy
from workbench.config import WorkbenchConfig
from workbench.config import load as load_config
from workbench.utils.errors import MissingInputError

__all__ = ["Data", "config", "load", "cluster", "replay_cache", "dispatch", "train", "ikjt",
           "access_skew", "hot_tier", "flexshard"]


def preprocessed(cfg: WorkbenchConfig, name: str) -> bool:
    """Whether dataset ``name`` is preprocessed under the config's ``paths.data``."""
    from workbench.data.pipeline import is_preprocessed

    return is_preprocessed(cfg.paths.resolve("data"), name)


def _processed(cfg: WorkbenchConfig, name: str) -> Path:
    """``data/processed/<name>``.

    Raises:
        FileNotFoundError: the dataset is not preprocessed (names the command that makes it).
    """
    from workbench.data.pipeline import prepare_advice, processed_dir

    processed = processed_dir(cfg.paths.resolve("data"), name)
    if not preprocessed(cfg, name):
        raise MissingInputError(f"{processed} holds no preprocessed dataset: "
                                f"{prepare_advice(processed)}")
    return processed


def _check_table_memory(where: str, rows: int, per_row: int) -> None:
    """Refuse a ``rows``-row table whose per-row arrays (at least ``per_row`` bytes a row)
    would not fit this machine's memory, before anything is allocated.

    Raises:
        ArgumentError: naming ``rows``, the bytes and the fix (relabel the keys).
    """
    from workbench.utils.io import physical_memory

    have = physical_memory()
    if have is not None and rows * per_row > have:
        raise ArgumentError(f"{where}: rows = {rows:,}: the table's per-row arrays would take "
                            f"at least {rows * per_row / 2**30:,.1f} GiB, more than this "
                            f"machine's {have / 2**30:,.1f} GiB of memory; relabel the keys to "
                            "0..U-1 (np.unique(keys, return_inverse=True)) and pass rows = U")


def _checked_keys(where: str, keys: Any, rows: int) -> np.ndarray:
    """``keys`` as an integer ``[n, F]`` array whose keys lie in ``0..rows-1``.

    Raises:
        ArgumentError: another shape or dtype, no sample, or a key outside the table.
    """
    keys = np.asarray(keys)
    if keys.ndim != 2 or keys.dtype.kind not in "iu" or not keys.size:  # not timedelta64
        raise ArgumentError(f"{where}: keys of shape {keys.shape} and dtype {keys.dtype}: must "
                            "be integer keys [samples, features] with at least one sample "
                            "(load(...).train.keys)")
    lo, hi = keys.min(), keys.max()
    if lo < 0 or hi >= rows:
        raise ArgumentError(f"{where}: keys hold {lo if lo < 0 else hi}, outside the table's "
                            f"rows 0..{rows - 1}: pass rows = the table's rows (load(...).rows)")
    return keys


def config(overrides: Sequence[str] | None = None,
           params: Path | str | None = None) -> WorkbenchConfig:
    """The validated configuration: ``workbench/conf/`` composed (or ``params``, a composed
    params file, read) with Hydra ``overrides`` such as ``"experiments.esd.bandwidth_spread=100"``.
    """
    return load_config(list(overrides or []), params)


@dataclass
class Data:
    """A processed dataset in memory.

    Attributes:
        name: the dataset.
        train: the train split (dense, global keys ``[n, F]``, labels).
        test: the test split.
        meta: the dataset's schema (features, cardinalities).
        rows: rows of the concatenated embedding table.
    """

    name: str
    train: Any
    test: Any
    meta: Any
    rows: int


def load(cfg: WorkbenchConfig, dataset: str | None = None, train_samples: int | None = 16384,
         test_samples: int | None = 4096) -> Data:
    """The first ``train_samples`` / ``test_samples`` of a processed dataset.

    Args:
        cfg: the configuration (its ``paths.data``).
        dataset: a key of ``datasets`` (default: ``experiments.combined.dataset``).
        train_samples: train samples kept (None: all).
        test_samples: test samples kept (None: all).

    Raises:
        FileNotFoundError: the dataset is not preprocessed (names the command that makes it).
        ArgumentError: a sample count below 1.
    """
    from workbench.data.keys import table_rows
    from workbench.data.schema import DatasetMeta
    from workbench.training.trainer import load_split

    samples = arg(int, 1).or_none()
    check("api.load", train_samples=(train_samples, samples), test_samples=(test_samples, samples))
    name = dataset or cfg.experiments.combined.dataset
    processed = _processed(cfg, name)
    meta = DatasetMeta.read(processed)
    return Data(name, load_split(processed, meta, "train", train_samples),
                load_split(processed, meta, "test", test_samples), meta, table_rows(meta))


def cluster(cfg: WorkbenchConfig, rows: int, dim: int | None = None):
    """The emulated edge cluster of ``cfg.cluster`` with ``cfg.cache`` on every worker.

    Args:
        cfg: e.g. ``config(["cluster=edge_tiers", "cache=lfu", "cache.ratio=0.05"])``.
        rows: rows of the table.
        dim: embedding width (default: ``cfg.model.embedding_dim``).

    Returns:
        An [`EdgeCluster`][workbench.cluster.edge_cluster.EdgeCluster]; ``read`` / ``write`` /
        ``end_iteration`` drive it, ``history()`` is its tidy per-(iteration, worker) frame.
    """
    from workbench.cluster.edge_cluster import EdgeCluster

    check("api.cluster", rows=(rows, arg(int, 1)),
          dim=(dim, key("model.embedding_dim").or_none()))
    _check_table_memory("api.cluster", rows, 8 + 4 * cfg.cluster.workers)
    return EdgeCluster(cfg.cluster, cfg.cache, rows, dim or cfg.model.embedding_dim)


def replay_cache(keys: np.ndarray, rows: int, *, policy: CachePolicy = "lru",
                 cache_ratio: float = 0.1, bound: int = 100, workers: int = 8,
                 per_worker: int = 128, epochs: int = 1, seed: int = 0,
                 warn_cold: bool = True) -> pd.DataFrame:
    """Replay samples' keys through one HET cache setting (the ``het-cache`` stage's replay).

    Consecutive slices of ``per_worker`` samples go to the ``workers`` in turn; each reads its
    keys through its cache and writes one update per occurrence, BSP. When the caches never
    fill (fewer distinct keys per worker than cache lines), a warning says that every number is
    a cold-start measurement (``warn_cold=False``: the caller says so itself).

    Args:
        keys: ``int[n, F]`` global keys in ``0..rows-1``.
        rows: rows of the table.
        policy: ``cache.policy``'s values.
        cache_ratio: cache lines per worker, share of the table (``cache.ratio``'s range).
        bound: staleness bound s of reads and writes (``cache.read_bound``'s range).
        workers: ``experiments.het_cache.workers``' range.
        per_worker: samples per worker per iteration (``experiments.het_cache.batch_size``').
        epochs: passes over the samples (>= 1).
        seed: ``seed``'s range.
        warn_cold: log a warning when the caches never fill.

    Returns:
        One row: the setting, ``miss_rate`` (reads with the caches full; NaN when they never
        filled), ``miss_rate_all`` (every read, cold start included), ``rows_pulled``,
        ``rows_pushed``, ``rows_moved``, ``rows_moved_per_key``, ``stale_pulls``,
        ``evict_pushes``, ``keys_read``.

    Raises:
        ArgumentError: a parameter outside its range, keys outside ``0..rows-1``, or fewer
            samples than one iteration of ``workers x per_worker``.
    """
    import logging

    from workbench.dispatch.base import build_trace
    from workbench.experiments.het_cache import run_once

    where = "api.replay_cache"
    check(where, rows=(rows, arg(int, 1)), policy=(policy, key("cache.policy")),
          cache_ratio=(cache_ratio, key("cache.ratio")), bound=(bound, key("cache.read_bound")),
          workers=(workers, key("experiments.het_cache.workers")),
          per_worker=(per_worker, key("experiments.het_cache.batch_size")),
          epochs=(epochs, arg(int, 1, 2**20)), seed=(seed, key("seed")))
    # the server's version and value per row, and each worker's slot index
    _check_table_memory(where, rows, 8 + 4 * workers)
    keys = _checked_keys(where, keys, rows)
    if len(keys) < workers * per_worker:
        raise ArgumentError(f"{where}: {len(keys):,} samples hold no iteration of workers = "
                            f"{workers} x per_worker = {per_worker} ({workers * per_worker:,} "
                            "samples): give more keys, or lower workers x per_worker")
    trace = build_trace(keys, workers, per_worker, seed=seed, epochs=epochs)
    res = run_once(trace, rows, policy, cache_ratio, bound, bound, "sequential")
    if warn_cold and policy != "none" and np.isnan(res.miss_rate):
        logging.getLogger(__name__).warning(
            "%s: the caches never filled (%s lines per worker, cache_ratio %g of %s rows; %s "
            "distinct keys over %s reads): miss_rate is NaN and every other number is a "
            "cold-start measurement; give more samples or a smaller cache_ratio", where,
            f"{int(np.ceil(cache_ratio * rows)):,}", cache_ratio, f"{rows:,}",
            f"{len(np.unique(keys)):,}", f"{res.keys_read:,}")
    return pd.DataFrame([{"policy": policy, "cache_ratio": cache_ratio, "bound": bound,
                          "workers": workers, "per_worker": per_worker,
                          "miss_rate": res.miss_rate, "miss_rate_all": res.miss_rate_all,
                          "rows_pulled": res.rows_pulled,
                          "rows_pushed": res.rows_pushed, "rows_moved": res.rows_moved,
                          "rows_moved_per_key": res.rows_moved / max(res.keys_read, 1),
                          "stale_pulls": res.stale_pulls, "evict_pushes": res.evict_pushes,
                          "keys_read": res.keys_read}])


def _clock(cfg: WorkbenchConfig, cluster, model_name: str, data: Data):
    """The clock's compute and software costs of ``model_name`` on ``data``'s shape: the
    committed calibration when it has them, else the FLOP model without software cost (logged:
    a live run must answer even on a machine that never ran ``make calibrate``)."""
    import logging

    from workbench.training.clock import ModelShape, clock_costs
    from workbench.utils.validation import ConfigError

    shape = ModelShape(model_name, cfg.models[model_name], len(data.meta.dense),
                       len(data.meta.categorical))
    try:
        return clock_costs(cluster, cfg.paths.resolve("results") / "calibration", shape)
    except (ConfigError, FileNotFoundError) as err:
        logging.getLogger(__name__).warning("no calibrated clock (%s): using the FLOP model "
                                            "and no software cost", err)
        flops = dataclasses.replace(cluster, compute="flops", software="off")
        return clock_costs(flops, Path("."), shape)


def dispatch(data: Data, dispatchers: Sequence[str] = ("random", "laia", "hybriddis"),
             cfg: WorkbenchConfig | None = None, *, batches: int = 10, warmup_max: int = 40,
             seed: int = 0, **esd_knobs: Any) -> pd.DataFrame:
    """Each dispatcher on ESD's edge cluster: warm the caches, then measure ``batches``.

    Args:
        data: [`load`][]'s splits (the train samples are dispatched, wrapping around).
        dispatchers: names ([`workbench.dispatch.registry.DISPATCHERS`][]).
        cfg: the configuration whose ``experiments.esd`` is the base setting (default:
            ``workbench/conf/``).
        batches: global batches measured after the warm-up.
        warmup_max: at most this many warm-up batches.
        seed: seeds the random dispatcher.
        **esd_knobs: any field of ``experiments.esd``, e.g. ``bandwidth_spread=100``,
            ``workers=16``, ``cache_ratio=0.01``, ``per_worker=32``.

    Returns:
        One row per dispatcher: ``transfer_s_per_batch`` (seconds of row transfers summed over
        workers), ``makespan_s_per_batch``, ``rows_per_batch``, the warm-up and the setting.

    Raises:
        ArgumentError: an unknown dispatcher or knob, a value outside its config key's range,
            or more samples per global batch than ``data`` holds.
    """
    from workbench.cluster.construction import clock_cluster
    from workbench.dispatch.registry import DISPATCHERS
    from workbench.experiments.esd import EsdPoint, one_run

    where = "api.dispatch"
    cfg = cfg or config()
    unknown = [d for d in dispatchers if d not in DISPATCHERS]
    if isinstance(dispatchers, str) or unknown or not dispatchers:
        raise ArgumentError(f"{where}: dispatchers = {dispatchers!r}: must be a non-empty list "
                            f"of {list(DISPATCHERS)}")
    check(where, seed=(seed, key("seed")))
    exp = replace(cfg.experiments.esd, where, "experiments.esd",
                  {"batches": batches, "warmup_max": warmup_max, **esd_knobs})
    if len(data.train) < exp.workers * exp.per_worker:
        raise ArgumentError(f"{where}: workers = {exp.workers} x per_worker = {exp.per_worker} "
                            f"samples per global batch, more than the {len(data.train):,} train "
                            f"samples of {data.name} loaded (api.load(..., train_samples=...))")
    # HybridDis' budget: a fraction of one iteration's compute of ESD's train model
    compute, _ = _clock(cfg, clock_cluster(exp, cfg.cluster), exp.train_model, data)
    wire_dim = cfg.models[exp.train_model].embedding_dim
    out = []
    for name in dispatchers:
        row, _ = one_run(data.train.keys, data.rows, exp, name, EsdPoint.base(exp),
                         wire_dim=wire_dim, seed=seed, compute=compute)
        out.append(row)
    return pd.DataFrame(out)


def train(data: Data, cfg: WorkbenchConfig | None = None, *, steps: int = 40,
          mechanisms: Sequence[str] = (), laia: bool = False, eval_every: int | None = None,
          seed: int = 0, **combined_knobs: Any) -> pd.DataFrame:
    """Train ``steps`` iterations through ESD's edge cluster with any mechanisms on.

    Args:
        data: [`load`][]'s splits (the first ``steps x workers x per_worker`` train samples).
        cfg: the configuration (``experiments.combined`` is the base; default: ``workbench/conf/``).
        steps: iterations.
        mechanisms: any of ``esd``, ``het``, ``recd``, ``hotline``, ``flexshard`` (see
            [`workbench.experiments.combined`][]).
        laia: dispatch with Herald's LAIA instead (of ESD or the baseline).
        eval_every: iterations between test evaluations (default: steps / 4).
        seed: seeds the model, the dispatcher and the profile.
        **combined_knobs: any field of ``experiments.combined``, e.g. ``cache_ratio=0.1``,
            ``bound=10``, ``hot_fraction=0.02``, ``bandwidth_spread=100``.

    Returns:
        One row per evaluation: ``iteration``, ``test_auc``, ``time_s`` (emulated),
        ``compute_s``, ``comm_s``, ``bytes``, ... and the run's settings; the frame's
        ``attrs["totals"]`` holds the ablation row of the run (bytes by kind, rows, lookups).

    Raises:
        ArgumentError: an unknown mechanism or knob, a value outside its config key's range, or
            fewer train samples than ``steps`` batches.
    """
    from workbench.experiments.combined import (
        Ablation,
        ablation_row,
        dispatcher_for,
        replicated_sets,
        run_cluster,
        train_run,
    )
    from workbench.experiments.config import MECHANISMS

    where = "api.train"
    cfg = cfg or config()
    bad = set(mechanisms) - set(MECHANISMS)
    if isinstance(mechanisms, str) or bad:
        raise ArgumentError(f"{where}: mechanisms = {mechanisms!r}: must be a list of "
                            f"{list(MECHANISMS)}")
    check(where, steps=(steps, arg(int, 1)), seed=(seed, key("seed")),
          eval_every=(eval_every, key("experiments.combined.eval_every").or_none()))
    exp = replace(cfg.experiments.combined, where, "experiments.combined",
                  {"eval_every": eval_every or max(1, steps // 4), "epochs": 1,
                   **combined_knobs})
    need = steps * exp.workers * exp.per_worker
    if len(data.train) < need:
        raise ArgumentError(f"{where}: {steps} steps of {exp.workers} x {exp.per_worker} "
                            f"samples need {need} train samples; {data.name} has "
                            f"{len(data.train)} loaded (api.load(..., train_samples=...))")
    model = cfg.models[exp.model]
    compute, software = _clock(cfg, run_cluster(exp, cfg.cluster, het=True), exp.model, data)
    sets = replicated_sets(data.train.keys, data.rows, exp, model.embedding_dim, seed)
    on = frozenset(mechanisms)
    ablation = Ablation(data.train.head(need), data.test, data.meta, exp, cfg.experiments.esd,
                        model, cfg.cluster, compute, software, sets, seed)
    metrics, history, trainer = train_run(ablation, on, laia)
    name = "+".join(m for m in MECHANISMS if m in on) or "none"
    metrics.insert(0, "run", name)
    target = exp.target_auc if exp.target_auc is not None else (
        cfg.datasets[data.name].target_auc if data.name in cfg.datasets else cfg.dataset.target_auc)
    metrics.attrs["totals"] = ablation_row(name, on, dispatcher_for(exp, on, laia), metrics,
                                           history, trainer, target)
    metrics.attrs["clock"] = compute.describe()
    return metrics


def ikjt(table, keys: Sequence[str], groups: Sequence[Sequence[str]],
         batch_size: int = 256, batches: int = 8) -> pd.DataFrame:
    """Cut a table into batches and convert each to an IKJT: the dedup factor per group.

    Args:
        table: a pyarrow Table or pandas DataFrame with one list or scalar column per key
            (a RecD partition, ``data/partitions/<dataset>/clustered/...``).
        keys: the sparse features.
        groups: RecD's dedup groups, e.g. ``[["user_id", "history"]]``; the other keys stay
            plain.
        batch_size: rows per batch.
        batches: the first this many full batches.

    Returns:
        One row per (batch, group): ``values`` (ids in the KJT), ``unique_rows``, ``rows``,
        ``empty_rows`` (no id in the group), ``dedup_factor`` (non-empty rows / unique non-empty
        rows: an empty row saves nothing; NaN when all are empty), ``ikjt_values`` (ids kept).
    """
    import pyarrow as pa

    from workbench.sparse.dedup import to_ikjt
    from workbench.sparse.reader import table_to_kjt

    check("api.ikjt", batch_size=(batch_size, key("experiments.recd.train_batch_size")),
          batches=(batches, arg(int, 1)))
    if isinstance(table, pd.DataFrame):
        table = pa.Table.from_pandas(table, preserve_index=False)
    grouped = {k for g in groups for k in g}
    plain = [k for k in keys if k not in grouped]
    out = []
    for b in range(min(batches, table.num_rows // batch_size)):
        kjt = table_to_kjt(table.slice(b * batch_size, batch_size), keys)
        inv = to_ikjt(kjt, groups, plain=plain)
        for group in groups:
            kept = sum(len(inv.values(k)) for k in group)
            total = sum(len(kjt[k].values()) for k in group)
            out.append({"batch": b, "group": "+".join(group), "rows": batch_size,
                        "unique_rows": inv.num_unique(group), "empty_rows": inv.num_empty(group),
                        "dedup_factor": inv.dedup_factor(group, skip_empty=True), "values": total,
                        "ikjt_values": kept})
    if not out:
        raise ValueError(f"{table.num_rows} rows hold no batch of {batch_size}")
    return pd.DataFrame(out)


def access_skew(keys: np.ndarray, rows: int, fractions: Sequence[float]) -> pd.DataFrame:
    """The share of all lookups taken by the most-accessed ``fractions`` of the table's rows.

    HET's Fig. 3 view (all tables pooled), on the samples given rather than a whole split
    (the ``dataset_stats`` stage's numbers).

    Args:
        keys: ``int64[n, F]`` global keys (``load(...).train.keys``).
        rows: rows of the concatenated table.
        fractions: fractions of the rows, each in ``(0, 1]`` (at least one row each).

    Returns:
        One row per fraction: ``fraction``, ``top_rows``, ``lookup_share``; ``samples`` and
        ``rows_seen`` (rows looked up at least once) of the keys.
    """
    from workbench.experiments.dataset_stats import top_share

    where = "api.access_skew"
    fractions = check(where, rows=(rows, arg(int, 1)), fractions=(
        fractions, key("experiments.dataset_stats.skew_claim_fraction").many()))["fractions"]
    _check_table_memory(where, rows, 8)  # one count per row
    keys = _checked_keys(where, keys, rows)
    counts = np.bincount(keys.ravel(), minlength=rows)
    return pd.DataFrame([{"fraction": f, "top_rows": max(1, int(np.ceil(f * rows))),
                          "lookup_share": top_share(counts, f), "samples": keys.shape[0],
                          "rows_seen": int((counts > 0).sum())} for f in fractions])


def hot_tier(keys: np.ndarray, rows: int, hot_fractions: Sequence[float], *,
             profile_rate: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """Hotline's hot set at each budget: the share of popular inputs and of lookups that hit.

    The ``hotline_popularity`` stage's measure on the samples given: a ``profile_rate`` profile
    (drawn with replacement, FAE) and a full pass count the accesses per row; the hot set is
    the most-counted rows that fit the budget; an input is popular iff all its lookups hit it.

    Args:
        keys: ``int64[n, F]`` global keys (``load(...).train.keys``).
        rows: rows of the concatenated table.
        hot_fractions: hot-memory budgets as fractions of the table's rows.
        profile_rate: fraction of the inputs profiled, in ``(0, 1]``.
        seed: seeds the profile's draw.

    Returns:
        One row per (profile, budget): ``profile`` (``profile`` or ``full pass``),
        ``hot_fraction``, ``hot_rows``, ``popular_fraction``, ``lookup_hit_share``.
    """
    from workbench.data.popularity import (
        FLOAT_BYTES,
        hot_keys,
        hot_mask,
        popular_mask,
        profile_counts,
    )

    where = "api.hot_tier"
    hot_fractions = check(
        where, rows=(rows, arg(int, 1)),
        hot_fractions=(hot_fractions, key("experiments.combined.hot_fraction").many()),
        profile_rate=(profile_rate, key("experiments.hotline.profile_rate")),
        seed=(seed, key("seed")))["hot_fractions"]
    _check_table_memory(where, rows, 16)  # two counts per row
    keys = _checked_keys(where, keys, rows)
    counts = {"profile": profile_counts(keys, rows, profile_rate, np.random.default_rng(seed)),
              "full pass": np.bincount(keys.ravel(), minlength=rows)}
    out = []
    for profile, c in counts.items():
        for f in hot_fractions:
            # a budget of int(f x rows) rows (dim 1: a row is FLOAT_BYTES bytes)
            mask = hot_mask(hot_keys(c, int(f * rows) * FLOAT_BYTES, 1), rows)
            out.append({"profile": profile, "profile_rate": profile_rate, "hot_fraction": f,
                        "hot_rows": int(mask.sum()),
                        "popular_fraction": float(popular_mask(keys, mask).mean()),
                        "lookup_hit_share": float(mask[keys].mean())})
    return pd.DataFrame(out)


def flexshard(cfg: WorkbenchConfig, replicated_fractions: Sequence[float] | None = None, *,
              dataset: str | None = None, devices: int | None = None,
              per_device: int | None = None, node_tier: bool = False,
              candidates: int = 64) -> pd.DataFrame:
    """FlexShard's replicated tier against row-wise sharding (RW), expected from a profile.

    The ``flexshard`` stage's curve (the authors' figure) at one topology: the access
    probability of the sequence table's rows is estimated from the lookups of
    ``profile_batches`` iterations; for each fraction f the ``t1 = f N`` hottest rows are
    replicated on every device and the rest row-sharded (``hot_dp``); with ``node_tier`` also
    FlexShard's plan, whose node tier is the fastest of ``candidates`` cut points within RW's
    memory.

    Args:
        cfg: the configuration (``experiments.flexshard``, ``topology``, ``paths.data``).
        replicated_fractions: fractions of the rows (default: the experiment's).
        dataset: a dataset with a sequence feature (default: ``claims_dataset``).
        devices: devices (whole nodes of ``topology.devices_per_node``; default: the
            topology's).
        per_device: samples per device per iteration (default: ``per_device_batch``).
        node_tier: also FlexShard's plan (its cut search takes seconds on a large table).
        candidates: node-tier cut points searched.

    Returns:
        One row per (plan, fraction): ``t1``, ``t2``, ``seconds`` (expected all-to-all, forward
        + backward), ``memory`` (bytes, the largest device), ``memory_vs_rw_mib``,
        ``savings_vs_rw_ms`` and the setting.

    Raises:
        FileNotFoundError: the dataset is not preprocessed.
        ValueError: it has no sequence feature.
        ArgumentError: ``devices`` is not whole nodes, or a number is outside its range.
    """
    from workbench.experiments.flexshard import fraction_curve, row_wise_baseline
    from workbench.sharding.lookups import SequenceLookups, SplitSource
    from workbench.sharding.planner import candidate_cuts, evaluate_cuts
    from workbench.sharding.plans import rank_order
    from workbench.sharding.topology import Topology
    from workbench.sharding.traffic import traffic_summary

    where = "api.flexshard"
    # experiments.flexshard.replicated_fractions: each in [0, 1] (its schema's check_each)
    fractions_arg = dataclasses.replace(arg(float, 0.0, 1.0).many(),
                                        source="experiments.flexshard.replicated_fractions")
    check(where, replicated_fractions=(replicated_fractions, fractions_arg.or_none()),
          devices=(devices, key("experiments.flexshard.device_sweep[]").or_none()),
          per_device=(per_device, key("experiments.flexshard.per_device_batch").or_none()),
          candidates=(candidates, key("experiments.flexshard.candidate_cuts")))
    exp = cfg.experiments.flexshard
    g = cfg.topology.devices_per_node
    if devices is not None and devices % g:
        raise ArgumentError(f"{where}: devices = {devices}: must be whole nodes of "
                            f"topology.devices_per_node = {g} (a multiple of {g})")
    name = dataset or exp.claims_dataset
    processed = _processed(cfg, name)
    fractions = list(exp.replicated_fractions if replicated_fractions is None
                     else replicated_fractions)
    exp = dataclasses.replace(exp, replicated_fractions=fractions,
                              per_device_batch=per_device or exp.per_device_batch)
    data = SequenceLookups.read(processed, exp.sequence_feature)
    topo = Topology.from_config(cfg.topology, nodes=devices // g if devices else None)
    n, row_bytes = data.rows, 4 * exp.embedding_dim
    profile = SplitSource(data, exp.per_device_batch, exp.profile_batches, exp.replay_batches,
                          exp.probability_estimator).profile(topo.devices)
    counts, probability, lookups = profile.counts, profile.probability, profile.lookups
    rw_traffic, rw_memory = row_wise_baseline(probability, topo, lookups, row_bytes)
    order = rank_order(counts)  # as the stage: by the lookups profiled
    cuts = candidate_cuts(n, candidates, np.rint(np.asarray(fractions) * n))
    searches = {"hot_dp": evaluate_cuts(probability, topo, lookups, row_bytes, cuts,
                                        node_tier=False, weighted=False, order=order)}
    if node_tier:
        searches["flexshard"] = evaluate_cuts(probability, topo, lookups, row_bytes, cuts,
                                              order=order)
    curve = fraction_curve(exp, {"rw_memory": rw_memory, "searches": searches,
                                 "limit": rw_memory if exp.memory_limit == "rw" else None}, n)
    curve["savings_vs_rw_ms"] = (traffic_summary(rw_traffic, topo)["seconds"]
                                 - curve["seconds"]) * 1e3
    return curve.assign(dataset=name, table_rows=n, devices=topo.devices,
                        per_device=exp.per_device_batch)
