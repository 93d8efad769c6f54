"""Benchmark: sparse (row-indexed) vs dense table gradients, per training step, one core.

Issue 19: ``pooled_lookup`` used to give the table a dense ``[num_rows, D]`` gradient, so every
step wrote and read the whole table (the backward's zero-filled gradient, Adagrad's state and
parameter sweep); on a large table that swamps the rest of the step and with it the compute the
IKJT's dedup saves. Every contender below does the full step: forward, backward, and an
``Adagrad(lr=0.05)`` step applying the real per-id gradients of a BCE loss.

1. **Lookup step** on one ``1,000,000 x 16`` table (float32) read by 4 pooled features (sum),
   batch 4,096: each sample's list per feature holds 1..4 ids (``rng.integers(1, 5)``), ids
   ``rng.zipf(1.05, n) % rows`` with ``rng = numpy.random.default_rng(0)``; the 4 features'
   bags are summed per sample and dotted with a fixed vector to a logit (labels
   ``rng.integers(0, 2, B)``); 4 such batches are cycled. Contenders, each on its own copy of
   the same initial table, timed in alternating rounds:

   * ``ours_sparse``: :func:`~workbench.sparse.lookup.pooled_lookup` (``sparse=True``);
   * ``ours_dense``: the same with ``sparse=False`` (the old path);
   * ``torch_embedding_bag``: plain torch, ``nn.EmbeddingBag(rows, 16, mode="sum",
     sparse=True)`` fed the same ids and offsets as tensors.

   After timing, the three tables must agree (same steps, same data): a check that each did the
   same work.
2. **RecD training step** (:class:`~workbench.models.recd.RecDModel` through
   :class:`~workbench.training.recd_trainer.RecDTrainer`, Adagrad) on the session-like batch of
   ``benchmarks/ikjt_conversion.py`` (``session_batch(4096, seed=0)``: sessions of 4..12
   samples sharing ``user_id``, ``user_country`` and a 20-id ``user_history``), ids taken modulo
   the table sizes: ``user_id`` and ``item_id`` tables of 1,000,000 rows (``user_history`` reads
   ``item_id``'s table through a sequence tower), ``user_country`` 200, ``item_category``
   5,000; D = 16, no dense features, top MLP 64, one batch repeated. KJT vs IKJT (dedup groups
   of the conversion benchmark) x sparse vs dense gradients, four models from one seed, timed in
   alternating rounds. The IKJT/KJT speed-up with sparse gradients measures dedup; with dense
   ones the table sweeps, equal on both paths, dilute it.

Times are wall seconds per step (``repeat_seconds``: each round runs every contender once);
the JSON holds median/min/max (``spread``) and, for each ratio, the spread of the per-round
ratios (rounds are paired). ``torch.set_num_threads(1)``, pinned to one core.

Usage: python benchmarks/embedding_backward.py [--repeats 15]
       [--out benchmarks/results/embedding_backward.json]
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable

import numpy as np
import torch
from torch.nn import functional as F

# run as a script: benchmarks/ is on sys.path (the session batch of the conversion benchmark)
from ikjt_conversion import GROUPS, session_batch
from workbench.models.recd import FeatureSpec, RecDModel
from workbench.sparse.jagged_tensor import JaggedTensor, KeyedJaggedTensor
from workbench.sparse.lookup import pooled_lookup
from workbench.training.recd_trainer import RecDTrainer
from workbench.utils.io import write_json
from workbench.utils.timing import bench_parser, paired_ratio, pin_one_core, repeat_seconds, spread

LR = 0.05
SEED = 0
LOOKUP = {"rows": 1_000_000, "dim": 16, "batch": 4096, "features": 4, "ids_per_list": [1, 4],
          "zipf_a": 1.05, "batches": 4}
RECD = {"batch": 4096, "dim": 16, "top_mlp": [64], "seq_heads": 2, "max_history": 20,
        "rows": {"user_id": 1_000_000, "user_country": 200, "user_history": 1_000_000,
                 "item_id": 1_000_000, "item_category": 5_000},
        "sequence": {"user_history": "item_id"}, "groups": GROUPS}


def summarise(times: dict[str, list[float]], samples: int) -> dict[str, dict[str, object]]:
    """Per contender: seconds per step and samples/s, each as median/min/max."""
    return {name: {"seconds": spread(t), "samples_per_s": spread([samples / s for s in t])}
            for name, t in times.items()}


# ------------------------------------------------------------------------------------------------
# 1. lookup + backward + Adagrad on a 1M-row table


def lookup_batches(rng: np.random.Generator) -> list[tuple[JaggedTensor, torch.Tensor]]:
    """``LOOKUP["batches"]`` batches: the F features' lists as one jagged tensor of ``F * B``
    lists (feature-major, as a KJT's values; the features share the table) and labels."""
    rows, batch, feats = LOOKUP["rows"], LOOKUP["batch"], LOOKUP["features"]
    low, high = LOOKUP["ids_per_list"]
    out = []
    for _ in range(LOOKUP["batches"]):
        lengths = rng.integers(low, high + 1, size=feats * batch)
        ids = rng.zipf(LOOKUP["zipf_a"], int(lengths.sum())) % rows
        labels = torch.from_numpy(rng.integers(0, 2, batch).astype(np.float32))
        out.append((JaggedTensor(ids.astype(np.int64), lengths.astype(np.int64)), labels))
    return out


def lookup_step(table: torch.Tensor, optimizer: torch.optim.Optimizer, head: torch.Tensor,
                lookup: Callable[[JaggedTensor], torch.Tensor],
                batches: list[tuple[JaggedTensor, torch.Tensor]]) -> Callable[[], float]:
    """One training step per call, cycling through ``batches``: pooled bags -> per-sample sum
    over the features -> logit -> BCE; backward; optimizer step."""
    state = {"i": 0}
    feats, batch, dim = LOOKUP["features"], LOOKUP["batch"], LOOKUP["dim"]

    def step() -> float:
        jt, labels = batches[state["i"] % len(batches)]
        state["i"] += 1
        pooled = lookup(jt).view(feats, batch, dim).sum(dim=0)          # [B, D]
        loss = F.binary_cross_entropy_with_logits(pooled @ head, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        with torch.sparse.check_sparse_tensor_invariants(enable=False):
            optimizer.step()
        return float(loss.detach())

    return step


def lookup_benchmark(repeats: int) -> dict[str, object]:
    """Part 1: ours (sparse, dense) vs ``nn.EmbeddingBag(sparse=True)``, alternating rounds."""
    rng = np.random.default_rng(SEED)
    rows, dim = LOOKUP["rows"], LOOKUP["dim"]
    batches = lookup_batches(rng)
    gen = torch.Generator().manual_seed(SEED)
    init = torch.empty(rows, dim).uniform_(-rows ** -0.5, rows ** -0.5, generator=gen)
    head = torch.randn(dim, generator=gen)
    tables = {"ours_sparse": torch.nn.Parameter(init.clone()),
              "ours_dense": torch.nn.Parameter(init.clone())}
    bag = torch.nn.EmbeddingBag(rows, dim, mode="sum", sparse=True)
    with torch.no_grad():
        bag.weight.copy_(init)
    tensors = {id(jt): (torch.from_numpy(jt.values()), torch.from_numpy(jt.offsets()[:-1]))
               for jt, _ in batches}
    runs = {
        name: lookup_step(table, torch.optim.Adagrad([table], lr=LR), head,
                          lambda jt, t=table, sp=(name == "ours_sparse"):
                          pooled_lookup(t, jt, "sum", sparse=sp), batches)
        for name, table in tables.items()}
    runs["torch_embedding_bag"] = lookup_step(
        bag.weight, torch.optim.Adagrad(bag.parameters(), lr=LR), head,
        lambda jt: bag(*tensors[id(jt)]), batches)
    times = repeat_seconds(runs, repeats, warmup=True)
    # Same data, same steps: the same parameters. The sparse path is Adagrad's sparse step, as
    # torch's bag: equal to 1e-6. The dense path steps the whole table (a fused addcdiv), which
    # rounds otherwise, and the loss couples the rows, so a rounding difference grows over the
    # steps: 1.6e-5 on 1 element of 16M on an AMD EPYC (2026-11-26), under 1e-6 on an Intel
    # Xeon. A wrong update is off by the step's scale (lr = 0.05): 1e-4 still catches it.
    for name, table in tables.items():
        torch.testing.assert_close(table.detach(), bag.weight.detach(), rtol=1e-4,
                                   atol=1e-6 if name == "ours_sparse" else 1e-4,
                                   msg=f"{name} diverged from the torch baseline")
    ids = [jt.values().size for jt, _ in batches]
    return {
        "setting": {**LOOKUP, "ids_per_batch": ids, "optimizer": f"Adagrad(lr={LR})",
                    "generator": "numpy default_rng(0): lengths integers(1, 5), "
                                 "ids zipf(1.05) % rows, labels integers(0, 2)"},
        "results": summarise(times, LOOKUP["batch"]),
        "ratios": {"ours_sparse_over_baseline_seconds": paired_ratio(
                       times, "ours_sparse", "torch_embedding_bag"),
                   "dense_over_sparse_seconds": paired_ratio(times, "ours_dense",
                                                             "ours_sparse")},
    }


# ------------------------------------------------------------------------------------------------
# 2. RecD training step: KJT vs IKJT x sparse vs dense


def recd_inputs() -> tuple[KeyedJaggedTensor, torch.Tensor]:
    """The session batch with every key's ids taken modulo its table, and labels."""
    kjt, _ = session_batch(RECD["batch"], seed=SEED)
    rows = RECD["rows"]
    kjt = KeyedJaggedTensor.from_jt_dict({
        k: JaggedTensor(kjt[k].values() % rows[k], kjt[k].lengths()) for k in kjt.keys()})
    labels = np.random.default_rng(SEED).integers(0, 2, kjt.batch_size).astype(np.float32)
    return kjt, torch.from_numpy(labels)


def recd_model(sparse_gradients: bool) -> RecDModel:
    """The benchmark's RecD model (one seed: the four contenders start equal)."""
    seq = RECD["sequence"]
    features = [FeatureSpec(k, n, "sequence" if k in seq else "pooled", table=seq.get(k))
                for k, n in RECD["rows"].items()]
    return RecDModel(0, features, GROUPS, RECD["dim"], [], RECD["top_mlp"],
                     seq_heads=RECD["seq_heads"], seq_max_length=RECD["max_history"], seed=SEED,
                     sparse_gradients=sparse_gradients)


def recd_benchmark(repeats: int) -> dict[str, object]:
    """Part 2: RecDTrainer steps on the KJT and on its IKJT, sparse and dense gradients."""
    kjt, labels = recd_inputs()
    model = recd_model(True)
    ikjt = model.dedup(kjt)
    if ikjt.expand() != kjt:
        raise AssertionError("the IKJT does not expand to the KJT")
    inputs = {"kjt": kjt, "ikjt": ikjt}
    runs = {}
    for grads in ("sparse", "dense"):
        for layout, batch in inputs.items():
            trainer = RecDTrainer(recd_model(grads == "sparse"), LR, "adagrad")
            runs[f"{layout}_{grads}"] = (lambda t=trainer, b=batch: t.step(None, b, labels))
    times = repeat_seconds(runs, repeats, warmup=True)
    work = {layout: {k: v for k, v in model.work(batch).items() if k != "groups"}
            for layout, batch in inputs.items()}
    return {
        "setting": {**RECD, "optimizer": f"Adagrad(lr={LR})", "dense_features": 0,
                    "batch_source": "ikjt_conversion.session_batch(4096, seed=0), ids modulo "
                                    "the table rows; labels default_rng(0).integers(0, 2)",
                    "dedup_factor": {"+".join(g): ikjt.dedup_factor(g) for g in GROUPS}},
        "work": work,
        "results": summarise(times, RECD["batch"]),
        "ratios": {
            "ikjt_speedup_sparse": paired_ratio(times, "kjt_sparse", "ikjt_sparse"),
            "ikjt_speedup_dense": paired_ratio(times, "kjt_dense", "ikjt_dense"),
            "dense_over_sparse_kjt": paired_ratio(times, "kjt_dense", "kjt_sparse"),
            "dense_over_sparse_ikjt": paired_ratio(times, "ikjt_dense", "ikjt_sparse")},
    }


def show(title: str, part: dict[str, object]) -> None:
    """Print a part's median milliseconds per contender and its median ratios."""
    ms = ", ".join(f"{k} {v['seconds']['median'] * 1e3:.1f}" for k, v in part["results"].items())
    ratios = ", ".join(f"{k} {v['median']:.2f}" for k, v in part["ratios"].items())
    print(f"{title}: median ms {ms}; ratios {ratios}")


def main() -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    pin_one_core()
    torch.set_num_threads(1)
    lookup = lookup_benchmark(args.repeats)
    show("lookup step, 1M x 16 table, batch 4096", lookup)
    recd = recd_benchmark(args.repeats)
    show("RecD step, batch 4096", recd)
    write_json(args.out, {
        "benchmark": "embedding_backward",
        "timing": f"seconds per step, {args.repeats} alternating rounds after one warm-up "
                  "round; median/min/max; ratios: spread of the per-round ratios",
        "repeats": args.repeats,
        "machine": {"python": platform.python_version(), "torch": torch.__version__,
                    "numpy": np.__version__, "processor": platform.processor(),
                    "cpus": os.cpu_count(), "threads": 1, "pinned_cores": 1},
        "lookup": lookup,
        "recd_step": recd,
    })


if __name__ == "__main__":
    main()
