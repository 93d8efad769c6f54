"""Evaluation metrics of a training run, numpy only (the claims' measures read them without
torch): ROC AUC by rank sum, and the emulated time to a target AUC interpolated between
evaluations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def auc_score(labels: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC by the rank-sum (Mann-Whitney) formula, ties averaged; NaN with one class."""
    labels = np.asarray(labels) > 0.5
    n_pos = int(labels.sum())
    n_neg = len(labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = pd.Series(scores).rank(method="average").to_numpy()
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


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
