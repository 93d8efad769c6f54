r"""DLRM training-systems workbench: ESD, HET, RecD, Hotline and FlexShard at laptop scale.

The package is layered; a module may import only from its own package and from packages of a
lower layer (``tests/test_layering.py`` walks every import to keep this true):

   12  cli                 the ``workbench`` console command (stage, replay, config, sweep)
   11  sweep, explorers,   Hydra multirun over any stage (joblib / cluster launchers); the
       repro, ci_project   notebooks' exploration sections (report's widgets over api);
                           ``dvc repro`` with independent stages side by side; ``make
                           check`` on the ci profile in a project of its own
   10  stages/, replay,    the stage registry and its command line; replaying your own traces;
       api                 the few calls a notebook cell makes (small live runs, tidy frames)
    9  report/             papermill runner and the notebook registry, report sections and
                           their pages, the claims register and its rules, the claims index,
                           the seaborn theme, the notebooks' exploration widgets
    8  claims/, arguments  every register entry's measure: reads ``results/``, returns the
                           value, its interval and the sweeps of its assumed parameters; the
                           range checks of api, notebook and command-line arguments (config
                           keys' ranges)
    7  config, conf/       the configuration root: composes every layer's schema; conf/ is the
                           Hydra tree (package data)
    6  experiments/        one module per experiment stage, each owning its outputs
    5  training/           the trainer through the emulated cluster; the RecD trainer; Hotline's
                           pipeline; the distributed backend (real processes, torch.distributed)
    4  models/             DLRM, WDL, DeepFM, DCN and their blocks; the RecD model
    3  dispatch/  sparse/  who trains which sample (baselines, LAIA, ESD, HybridDis) |
       sharding/           KJT / IKJT, feature transforms, RecD's reader | where each embedding
                           row lives on a two-level topology (FlexShard and its baselines)
    2  cluster/            the edge cluster: HET caches, links and clock; the cache protocol
                           between processes, framed messages, shaped links
    1  data/               sources, downloads, formats (parsers), synthetic data, schema,
                           partitions
    0  utils/              atomic I/O, logging, timing, project paths, config validation, the
                           error family

Each package's ``__init__`` says what it holds; each layer's config schema is its
``config.py``, composed by [`workbench.config`][].
"""

__version__ = "0.1.0"

#: Layer of every top-level package or module (see above): imports go to equal-named or lower.
LAYERS: dict[str, int] = {
    "utils": 0,
    "data": 1,
    "cluster": 2,
    "dispatch": 3,
    "sparse": 3,
    "sharding": 3,
    "models": 4,
    "training": 5,
    "experiments": 6,
    "config": 7,
    "claims": 8,
    "report": 9,
    "arguments": 8,
    "stages": 10,
    "replay": 10,
    "api": 10,
    "sweep": 11,
    "repro": 11,
    "ci_project": 11,
    "explorers": 11,
    "cli": 12,
}
