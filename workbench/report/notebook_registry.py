"""The notebook registry: every figure notebook, what it reads and what it lets you turn.

One [`NotebookSpec`][] per ``notebooks/<name>.py``, beside the stage registry
([`workbench.stages.registry`][]); everything else about a notebook follows from it:

    NOTEBOOKS[name] --reads--> notebook_config checks results/<stage>/<dataset>/ before it runs
                    --reads, params--> dvc.yaml's notebook@<name>: its own results and params
                                       only, so a change to one stage reruns the notebooks
                                       that read it (tests/test_dvc_pipeline.py holds dvc.yaml
                                       to `dvc_items`)
                    --knobs, explore--> workbench.explorers: the widgets' ranges; the table
                                       of explorers in docs/notebooks.md (explorer_table)
    names(): pipeline.notebooks' default and its allowed values

A notebook's ``reads`` are the stages whose results it shows, each with the config key naming
its dataset(s) (a notebook's ``dataset`` parameter sets every such key, and ``also``);
``uses`` are results it reads whole (the clock's calibration); ``params`` the configuration
sections it reads beyond those stages' own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from workbench.arguments import Arg, arg, key
from workbench.claims import register as reg


@dataclass(frozen=True)
class Reads:
    """A stage whose results a notebook reads (``results/<stage>/<dataset>/``).

    Attributes:
        stage: the stage's command-line name (``het-train``).
        key: the config key naming the dataset(s) it ran on.
        summary: the file that says the stage ran.
    """

    stage: str
    key: str
    summary: str = "summary.json"

    @property
    def results(self) -> str:
        """The stage's results folder, relative to the project (``results/het_train``)."""
        return f"results/{self.stage.replace('-', '_')}"


@dataclass(frozen=True)
class Explore:
    """A notebook's explorer in one table row.

    Attributes:
        knobs: its widgets (the notebook's parameters of the same names).
        live: the [`workbench.api`][] call it reruns and what it plots (Markdown).
    """

    knobs: tuple[str, ...]
    live: str


@dataclass(frozen=True)
class NotebookSpec:
    """One figure notebook.

    Attributes:
        name: ``notebooks/<name>.py``; its section is ``reports/<name>/``.
        reads: the stages whose per-dataset results it shows.
        explore: its explorer, in words.
        knobs: its explorer's numeric or fixed-choice knobs (the notebook's parameters of the
            same names) and what each accepts.
        also: config keys that follow its ``dataset`` parameter without a stage of their own.
        uses: other result folders it reads whole.
        params: the configuration it reads (DVC params): the sections of the stages it reads
            and any other it shows.
    """

    name: str
    reads: tuple[Reads, ...]
    explore: Explore
    knobs: Mapping[str, Arg] = field(default_factory=dict)
    also: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    params: tuple[str, ...] = ()

    def results(self) -> list[str]:
        """Every result folder it reads (DVC deps), in order."""
        return list(dict.fromkeys([r.results for r in self.reads] + list(self.uses)))


def _nb(name: str, reads: tuple[Reads, ...], explore: Explore, **kw: object) -> NotebookSpec:
    return NotebookSpec(name, reads, explore, **kw)  # type: ignore[arg-type]


#: Every figure notebook, in report order (the default ``pipeline.notebooks``).
NOTEBOOKS: dict[str, NotebookSpec] = {nb.name: nb for nb in (
    _nb("datasets", (Reads("dataset-stats", "pipeline.datasets", "stats.json"),),
        Explore(('dataset', 'samples', 'top_fraction'),
                "`access_skew`: share of lookups against fraction of rows, HET's 10% -> "
                '90% marked'),
        knobs={"samples": arg(int, 1),
               "top_fraction": key("experiments.dataset_stats.skew_claim_fraction")},
        params=("pipeline.datasets", "experiments.dataset_stats", "datasets")),
    _nb("het", (Reads("het-cache", "experiments.het_cache.datasets"),),
        Explore(('policy', 'cache_ratio', 'bound'),
                '`replay_cache` over cache ratios: rows moved per key, miss rate'),
        knobs={"policy": key("experiments.het_cache.policy"),
               "cache_ratio": key("experiments.het_cache.cache_ratio"),
               "bound": key("experiments.het_cache.claim_bound")},
        uses=("results/het_epoch",),
        params=("experiments.het_cache", "experiments.het_epoch")),
    _nb("het_train", (Reads("het-train", "experiments.het_train.dataset"),
                      Reads("het-time", "experiments.het_time.dataset")),
        Explore(('bound', 'cache_ratio'),
                '`train(mechanisms=["het"])` against no cache: test AUC against emulated time'),
        knobs={"bound": key("experiments.het_train.cache_bounds[]"),
               "cache_ratio": key("cache.ratio"), "steps": arg(int, 1)},
        uses=("results/het_scale", "results/het_epoch", "results/het_long",
              "results/calibration"),
        params=("experiments.het_train", "experiments.het_time", "experiments.het_scale",
                "experiments.het_epoch", "experiments.het_long", "models", "cluster")),
    _nb("esd", (Reads("esd", "experiments.esd.dataset"),),
        Explore(('bandwidth_spread', 'cache_ratio', 'per_worker'),
                '`dispatch` with the trained dispatchers: transmission cost per batch, '
                'change against random (at most 40 warm-up batches: not always at '
                'steady state)'),
        knobs={"bandwidth_spread": key("experiments.esd.bandwidth_spread"),
               "cache_ratio": key("experiments.esd.cache_ratio"),
               "per_worker": key("experiments.esd.per_worker")},
        params=("experiments.esd",)),
    _nb("recd", (Reads("dedup", "experiments.recd.datasets"),
                 Reads("recd", "experiments.recd.datasets")),
        Explore(('dedup_group', 'batch_size'),
                '`ikjt` on the clustered and shuffled partitions: dedup factor per batch'),
        knobs={"batch_size": key("experiments.recd.train_batch_size"), "batches": arg(int, 1)},
        params=("experiments.recd",)),
    _nb("hotline", (Reads("hotline-popularity", "experiments.hotline.popularity_datasets"),
                    Reads("hotline", "experiments.hotline.dataset")),
        Explore(('hot_fraction', 'profile_rate'),
                '`hot_tier`: popular inputs and hot-lookup share against the budget'),
        knobs={"hot_fraction": key("experiments.combined.hot_fraction"),
               "profile_rate": key("experiments.hotline.profile_rate")},
        params=("experiments.hotline",)),
    _nb("flexshard", (Reads("flexshard", "experiments.flexshard.datasets"),),
        Explore(('replicated_fraction', 'devices', 'per_device'),
                '`flexshard`: memory against all-to-all savings, relative to row-wise'),
        knobs={"replicated_fraction": key("experiments.combined.replicated_fraction"),
               "devices": key("experiments.flexshard.device_sweep[]"),
               "per_device": key("experiments.flexshard.per_device_batch")},
        also=("experiments.flexshard.claims_dataset",),
        uses=("results/flexshard_stream",),  # the claims' streamed run (a dataset of your own
        #                                      has none: the notebook shows its split's run)
        params=("experiments.flexshard", "topology")),
    # the live run's links: every worker's link is max_bandwidth_gbps (spread 1); a log slider
    # cannot show a latency of 0
    _nb("distributed", (Reads("distributed-check", "experiments.het_train.dataset"),),
        Explore(('bandwidth_gbps', 'latency_ms'),
                "`train` (4 steps, the check's 2 workers, with and without HET): "
                'emulated ms per iteration, compute and communication (no processes)'),
        knobs={"bandwidth_gbps": key("experiments.combined.max_bandwidth_gbps"),
               "latency_ms": arg(float, 0.0, None, lo_open=True), "steps": arg(int, 1)},
        params=("experiments.distributed_check", "experiments.het_train")),
    _nb("combined", (Reads("combined", "experiments.combined.dataset"),),
        Explore(('mechanisms', 'bandwidth_spread', 'cache_ratio', 'hot_fraction'),
                '`train` with the chosen mechanisms against none: test AUC against emulated time'),
        knobs={"bandwidth_spread": key("experiments.combined.bandwidth_spread"),
               "cache_ratio": key("experiments.combined.cache_ratio"),
               "hot_fraction": key("experiments.combined.hot_fraction"),
               "steps": arg(int, 1)},
        params=("experiments.combined",)),
)}

#: The most result folders and params sections one notebook reads: dvc.yaml's slots per item.
RESULT_SLOTS = 6
PARAM_SLOTS = 7


def names() -> list[str]:
    """Every registered notebook, in report order."""
    return list(NOTEBOOKS)


def claims_module(name: str) -> str:
    """The [`workbench.claims`][] module measuring notebook ``name``'s claims (the register's
    entries of its section), as a path; ``measurement.py`` for a notebook without claims.

    Raises:
        ValueError: its claims are measured in more than one module.
    """
    modules = {e.measure.partition(".")[0] for e in reg.load().entries
               if e.section == name and e.measure}
    if len(modules) > 1:
        raise ValueError(f"notebook {name}: claims measured in {sorted(modules)}: one module "
                         "per notebook (add a slot to dvc.yaml's notebook stage)")
    return f"workbench/claims/{modules.pop() if modules else 'measurement'}.py"


def dvc_items() -> dict[str, dict[str, str]]:
    """dvc.yaml's ``notebook`` foreach: per notebook the claims module measuring its claims
    (``c1``), its result folders ``r1..`` and params sections ``p1..`` in fixed slots (DVC
    cannot interpolate a list), a short list padded with its first entry (DVC reads a repeated
    entry once)."""
    items = {}
    for nb in NOTEBOOKS.values():
        results, params = nb.results(), list(nb.params)
        if len(results) > RESULT_SLOTS or len(params) > PARAM_SLOTS:
            raise ValueError(f"notebook {nb.name}: more than {RESULT_SLOTS} result folders or "
                             f"{PARAM_SLOTS} params sections (raise the slots and dvc.yaml)")
        results += results[:1] * (RESULT_SLOTS - len(results))
        params += params[:1] * (PARAM_SLOTS - len(params))
        items[nb.name] = ({"c1": claims_module(nb.name)}
                          | {f"r{i}": r for i, r in enumerate(results, 1)}
                          | {f"p{i}": p for i, p in enumerate(params, 1)})
    return items


def explorer_table() -> str:
    """The Markdown table of the explorers (``docs/notebooks.md`` shows it; a test holds it)."""
    lines = ["| notebook | knobs (widgets and `-p` parameters) | live run (`workbench.api`) and "
             "plot |", "| --- | --- | --- |"]
    lines += [f"| `{nb.name}` | {', '.join(f'`{k}`' for k in nb.explore.knobs)} | "
              f"{nb.explore.live} |" for nb in NOTEBOOKS.values()]
    return "\n".join(lines)
