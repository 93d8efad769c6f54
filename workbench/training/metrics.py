"""Evaluation metrics of a training run, numpy only (the claims' measures read them without
torch): ROC AUC by rank sum, Hetu's mean per-batch AUC, and the emulated time to a target AUC
interpolated between evaluations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def _rank_sum_auc(labels: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """ROC AUC of each row of ``[rows, n]`` 0/1 ``labels`` and ``scores`` by the rank-sum
    (Mann-Whitney) formula, ties averaged; NaN for a row with one class."""
    y = np.asarray(labels) > 0.5
    n_pos = y.sum(axis=1)
    n_neg = y.shape[1] - n_pos
    ranks = pd.DataFrame(np.asarray(scores).T).rank(method="average").to_numpy().T
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = (np.where(y, ranks, 0.0).sum(axis=1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return np.where((n_pos > 0) & (n_neg > 0), auc, np.nan)


def auc_score(labels: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC by the rank-sum (Mann-Whitney) formula, ties averaged; NaN with one class."""
    labels = np.asarray(labels)
    if not len(labels):
        return math.nan
    return float(_rank_sum_auc(labels[None], np.asarray(scores)[None])[0])


def batched_auc(labels: np.ndarray, scores: np.ndarray, batch: int) -> float:
    """Hetu's validation AUC: the mean ROC AUC of every full batch of ``batch`` consecutive
    samples, the last partial batch dropped (``examples/ctr/run_hetu.py`` 39-60; Hetu's loader
    drops it: [`workbench.models.recipe`][]).

    A batch with one class has no AUC (sklearn's ``roc_auc_score`` raises there; Hetu's Criteo
    batches always hold both): it is left out of the mean.

    Args:
        labels: 0/1 labels, in the test split's order.
        scores: scores or logits (AUC is rank-based).
        batch: samples per batch (Hetu: 128).

    Returns:
        The mean per-batch AUC; NaN when no full batch holds both classes.

    Example:
        >>> batched_auc(np.array([0, 1, 0, 1]), np.array([0.1, 0.9, 0.2, 0.8]), 2)
        1.0
    """
    if batch < 1:
        raise ValueError(f"batch = {batch}: must be >= 1")
    full = len(labels) // batch * batch
    aucs = _rank_sum_auc(np.asarray(labels[:full]).reshape(-1, batch),
                         np.asarray(scores[:full]).reshape(-1, batch))
    aucs = aucs[~np.isnan(aucs)]
    return float(aucs.mean()) if len(aucs) else math.nan


def time_to_target(metrics: pd.DataFrame, target: float, column: str = "time_s") -> float:
    """Emulated seconds until test AUC reaches ``target``, interpolated between evaluations.

    AUC is only known at evaluations; between the last evaluation below the target and the
    first at or above it, AUC is taken as linear in time (the training start counts as an
    evaluation at time 0 with AUC 0.5), so systems whose iterations take different times get
    different times to target even when they cross it at the same evaluation.

    Args:
        metrics: `Trainer.fit`'s evaluations, in order.
        target: the AUC to reach.
        column: the time column (``time_s``; ``iteration`` gives iterations to target).

    Returns:
        The interpolated time, or NaN if the target is never reached.
    """
    auc = np.concatenate([[0.5], metrics["test_auc"].to_numpy(np.float64)])
    when = np.concatenate([[0.0], metrics[column].to_numpy(np.float64)])
    hit = np.flatnonzero(auc >= target)
    if not len(hit):
        return math.nan
    i = int(hit[0])
    if i == 0:
        return 0.0
    frac = (target - auc[i - 1]) / (auc[i] - auc[i - 1])
    return float(when[i - 1] + frac * (when[i] - when[i - 1]))
