r"""Training recipes: how a model is initialised, shaped, stepped and scored.

A recipe is everything a training run decides besides the system it runs on: the optimizer,
what one step moves a parameter by, the initial draw, the model's shape details (biases, the
deep tower's last activation) and the evaluation metric. Two recipes:

| | ``workbench`` (ours) | ``hetu`` (HET's reference code) |
| --- | --- | --- |
| dense optimizer | ``optimizer`` at ``lr_dense`` | SGD at ``lr_dense`` |
| loss differentiated | mean over the batch B | ``sum_w mean_{i in w} l_i`` |
| row move, per occurrence | ``-lr_sparse * dl_i/de`` | ``-lr_sparse * (1/b_w) dl_i/de`` |
| initial draw | table U(+-init_scale) | every weight and row N(0, init_scale^2) |
| biases | every Linear | none (DCN's cross-layer bias only) |
| WDL / DCN tower | ReLU after every layer | no ReLU after the last |
| DeepFM | Linear(x0) + FM + MLP(x0) | dense W + 1-wide rows + FM + MLP(e) |
| test AUC | rank-sum AUC of the split | mean AUC of 128-sample batches |

(``hetu``'s row move is divided by W as well on a parameter-server path with
``divide_by_workers``.)

The ``hetu`` recipe is Hetu's ``examples/ctr`` (PKU-DAIR/Hetu a1cb1bc; the HET paper's code),
file and line:

* ``models/wdl_criteo.py``: ``learning_rate = 0.01`` (11); every table and weight
  ``init.random_normal(..., stddev=0.01)`` (12-13, 20-25); ``matmul_op`` only, no bias; ReLU
  after W1 and W2, none after W3 (27-31); ``concat(sparse, y3)`` then W4 (33-34);
  ``reduce_mean_op(loss, [0])`` over the worker's batch (38); ``SGDOptimizer`` (39).
* ``models/deepfm_criteo.py``: a first-order table of width 1 (``Embedding1``, 14-18) and a
  dense ``FM_W`` 13 x 1 (16, 19); the FM term (24-36); the deep part reads the flattened
  second-order rows only, 3328 -> 256 -> 256 -> 1 (39-48); ``lr 0.01`` (11), SGD (56).
* ``models/dcn_criteo.py``: cross layers with weight and bias N(0, 0.01^2) (8-19);
  ``x = concat(sparse, dense)`` (39); deep tower as WDL's, no ReLU after W3 (45-57);
  ``concat(cross, y3)`` then W4 (59-60); ``learning_rate = 0.003`` (32).
* ``run_hetu.py``: ``batch_size = 128`` per worker (62); validation AUC is
  ``np.mean`` of ``metrics.roc_auc_score`` per batch (39-60). The data loader drops the last
  partial batch: ``python/hetu/dataloader.py`` (126, 243-247: ``drop_last=True``).
* ``python/hetu/optimizer.py``: a dense gradient under ``Hybrid`` / ``AllReduce`` goes through
  ``allreduceCommunicate_op`` (172-174); ``SGDUpdateOp`` then moves the parameter by
  ``lr * grad`` (204-234). An ``IndexedSlices`` (embedding) gradient under ``Hybrid`` / ``PS``
  goes through ``parameterServerCommunicate_op`` (177-179).
* ``python/hetu/gpu_ops/AllReduceCommunicate.py`` (44): the NCCL reduction is a **sum**.
* ``python/hetu/gpu_ops/ParameterServerCommunicate.py``: the pushed rows are
  ``grad * learning_rate`` with ``learning_rate = -optimizer lr`` (25, 59-63), to the server
  or the worker's cache alike (69-90). Hsword/Hetu's initial commit (149095d, 2021-07-18, the
  code of the paper's time) divided that rate by ``DMLC_NUM_WORKER`` (24-25); a9c3c29
  (2021-09-28) removed the division. Both are Hetu's, so it is a switch:
  ``ModelConfig.divide_by_workers``.

The ``hetu`` step, formally. W workers; worker w holds ``b_w`` samples of the iteration
(``sum_w b_w = B``); ``l_i`` is sample i's binary cross-entropy; ``w(i)`` its worker;
``eta_d = lr_dense``, ``eta_s = lr_sparse``; ``delta = 1/W`` with ``divide_by_workers`` on a
parameter-server path, else 1:

    L_w   = (1 / b_w) sum_{i in w} l_i                   worker w's reduce_mean loss
    dense (AllReduce: Hybrid, Cache, AllReduce systems):
          theta <- theta - eta_d * sum_w dL_w/dtheta     (NCCL sum, then SGD)
    dense (PS system, dense through the server):
          theta <- theta - eta_d * delta * sum_w dL_w/dtheta   (each worker's push summed)
    embedding row e_k, per occurrence of key k in sample i (PS path: PS, Hybrid, Cache):
          e_k <- e_k - eta_s * delta * (1 / b_{w(i)}) dl_i/de_k
    embedding row (AllReduce system: gradients all-gathered, local SGD): delta = 1

The ``workbench`` step: ``theta`` by the configured optimizer on ``(1/B) sum_i l_i``;
``e_k <- e_k - eta_s * dl_i/de_k`` per occurrence (the per-sample loss's gradient).

In HET's units (the rate a ``hetu`` run would configure for the same move of a row per
occurrence) the workbench recipe's ``eta_s`` is ``eta_s * b_w``: 0.01 at ``b_w = 128`` is 1.28
(10.24 against Hetu 149095d's division by W = 8), where the paper grid-searched
{0.001, 0.01, 0.1}. [`hetu_units`][] converts.
"""

from __future__ import annotations

from enum import StrEnum


class Recipe(StrEnum):
    """A training recipe (the module docstring's table)."""

    WORKBENCH = "workbench"
    HETU = "hetu"


#: Every recipe's name.
RECIPES = tuple(r.value for r in Recipe)

#: Hetu's per-worker batch, of training and of the per-batch validation AUC
#: (``examples/ctr/run_hetu.py`` 62).
HETU_BATCH = 128

#: The models Hetu's ``examples/ctr`` defines for Criteo (``models/{wdl,deepfm,dcn}_criteo.py``).
HETU_MODELS = ("wdl", "deepfm", "dcn")


def hetu_units(recipe: Recipe | str, lr_sparse: float, per_worker: int, workers: int,
               divide_by_workers: bool = False) -> float:
    """The embedding learning rate in HET's units: a row's move per occurrence of its key,
    relative to that sample's loss gradient ``dl_i/de`` (Hetu: ``lr / b_w``, ``/ W`` with the
    division), times ``b_w`` so that Hetu's configured rate reads as itself.

    Args:
        recipe: the recipe the rate belongs to.
        lr_sparse: its configured embedding learning rate.
        per_worker: samples b_w of each worker per iteration.
        workers: W.
        divide_by_workers: Hetu 149095d's division (``hetu`` only).

    Returns:
        The rate a ``hetu`` run (without the division) would configure for the same move.

    Example:
        >>> hetu_units("workbench", 0.01, 128, 8)
        1.28
        >>> hetu_units("hetu", 0.01, 128, 8, divide_by_workers=True)
        0.00125
    """
    if Recipe(recipe) is Recipe.WORKBENCH:
        return lr_sparse * per_worker
    return lr_sparse / workers if divide_by_workers else lr_sparse
