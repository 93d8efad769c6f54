"""The catalogue of the five papers' headline claims: what the report must account for.

Data only. Every entry is one claim of a paper (sources: the papers; [P] read in the
full text, [A] from the abstract). The ``report`` stage holds the notebooks' claim rows against
it (``sections.collect``)::

    built claim, its notebook in the report, no row with its key  -> CatalogueError
    row whose key is not in the catalogue                         -> CatalogueError
    claim not built                                               -> a "not built" row

so a claim cannot silently drop out of the report: a notebook that cannot measure a built claim
in its setting still adds its row, as ``not comparable`` with the reason. Several rows may share
a key (one per dataset, model or measurement of the same claim).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CatalogueClaim:
    """One headline claim of a paper.

    Attributes:
        key: the id notebooks put on their rows (``Claim(key=...)``), ``<paper>.<claim>``.
        paper: short paper name.
        claim: the claim in words, with its figure or table.
        paper_value: the paper's number with its source tag.
        built: whether the workbench builds the mechanism the claim is about.
        section: the notebook whose section must report it (None when not built).
        missing: what is not built (the rule text of the ``not built`` row).
    """

    key: str
    paper: str
    claim: str
    paper_value: str
    built: bool
    section: str | None = None
    missing: str = ""


CATALOGUE: tuple[CatalogueClaim, ...] = (
    CatalogueClaim("het.fig2_share", "HET", "communication takes most of the epoch time "
                   "(TensorFlow, one worker, embeddings on a remote PS; Fig. 2)",
                   "WDL 76%, DFM 73%, DCN 73% [P]", True, "het_train"),
    CatalogueClaim("het.fig3_skew", "HET", "the top 10% of embedding rows receive 90% of the "
                   "updates on Criteo (Fig. 3)", "90% [P]", True, "datasets"),
    CatalogueClaim("het.table1_time_to_target", "HET", "Cache s=100 reaches the target AUC "
                   "faster than Hybrid without cache (Table 1, Fig. 6)",
                   "4.46-5.14x on Criteo (WDL 5.14x) [P]", True, "het_train"),
    CatalogueClaim("het.table1_tf_parallax", "HET", "Cache s=100 reaches the target AUC faster "
                   "than TF Parallax (Table 1)", "6.37-20.68x [P]", True, "het_train"),
    CatalogueClaim("het.table2_staleness", "HET", "final AUC falls as the staleness bound grows, "
                   "sharply only when unbounded (Table 2)",
                   "WDL 79.64 / 79.62 / 78.84 / 74.61 for s = 0 / 100 / 10k / inf [P]", True,
                   "het_train"),
    CatalogueClaim("het.fig7a_comm", "HET", "Cache s=100 cuts embedding communication time "
                   "against Hybrid without cache at 1 Gb/s (Fig. 7a; WDL's 8.2x is the 'up to "
                   "88% less communication' headline, 1 - 1/8.2)",
                   "WDL 8.2x, DFM 7.9x, DCN 7.4x [P]", True, "het_train"),
    CatalogueClaim("het.fig7b_comm", "HET", "Cache s=100 cuts communication time against Hybrid "
                   "without cache at 10 Gb/s (Fig. 7b)", "WDL 1.8x, DFM 1.9x, DCN 2.3x [P]",
                   True, "het_train"),
    CatalogueClaim("het.fig8_lfu_lru", "HET", "LFU has a lower cache miss rate than LRU at "
                   "every cache size (Fig. 8)", "lower by 1-8 points at 3/5/10/15% [P]", True,
                   "het"),
    CatalogueClaim("het.fig8_lfuopt", "HET", "the light LFU (LFUOpt) keeps a miss rate close to "
                   "LFU's (Sec. 4)", "close to LFU [P, text]", True, "het"),
    CatalogueClaim("het.fig9a_workers", "HET", "Cache s=100 keeps scaling with the number of "
                   "workers (WDL, Fig. 9a)", "~12.4x at 32 workers [P, read off the plot]", True,
                   "het_train"),
    CatalogueClaim("het.fig9c_dim", "HET", "the PS baselines' per-epoch time stays far above "
                   "Cache s=100's as the embedding width grows (WDL, Fig. 9c)",
                   "TF PS 12.5x..22.8x, TF Parallax 8.6x..16.5x, D = 128..4096 [P]", True,
                   "het_train"),
    CatalogueClaim("esd.cost", "ESD", "lower embedding transmission cost than state-of-the-art "
                   "dispatching", "up to 36.76% [A]", True, "esd"),
    CatalogueClaim("esd.speedup", "ESD", "faster end-to-end DLRM training",
                   "up to 1.74x [A]", True, "esd"),
    CatalogueClaim("recd.train", "RecD", "training throughput with IKJTs over KJTs",
                   "up to 2.49x [A] (2.48x in the arXiv/MLSys abstract)", True, "recd"),
    CatalogueClaim("recd.preprocess", "RecD", "preprocessing throughput with IKJTs over KJTs",
                   "1.79x [A]", True, "recd"),
    CatalogueClaim("recd.storage", "RecD", "storage efficiency of session-clustered data",
                   "3.71x [A]", True, "recd"),
    CatalogueClaim("hotline.speedup", "Hotline", "lower end-to-end training time than the "
                   "Intel-optimized CPU-GPU DLRM (v2, ISCA'24)", "2.2x on average [A]", True,
                   "hotline"),
    CatalogueClaim("hotline.v1_hybrid", "Hotline", "training speedup over the Intel-optimized "
                   "CPU-GPU DLRM (v1)", "3x [A]", True, "hotline"),
    CatalogueClaim("hotline.v1_gpu_only", "Hotline", "training speedup over a "
                   "HugeCTR-optimized GPU-only baseline (v1)", "1.8x [A]", True, "hotline"),
    CatalogueClaim("flexshard.a2a_traffic", "FlexShard", "less global all-to-all traffic than "
                   "row-wise sharding", "over 85% [A]", True, "flexshard"),
    CatalogueClaim("flexshard.comm_latency", "FlexShard", "better end-to-end training "
                   "communication latency than row-wise sharding", "almost 6x [A]", True,
                   "flexshard"),
)
