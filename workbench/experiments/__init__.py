"""Layer 6, experiments: one module per pipeline stage, each a ``run(...)`` that writes its results
directory whole. Imports ``training`` and lower; never ``workbench.config`` (each stage takes the
parts of the configuration it uses; [`workbench.stages.registry`][] hands them over).

* ``dataset_stats``: statistics and access skew (HET Fig. 3)
* ``het_cache``: HET cache replay: miss rates, rows moved, staleness and worker sweeps
* ``het_train``: HET training through the emulated cluster (Fig. 6, Tables 1-2)
* ``het_time``: HET time model (Fig. 2, 7, 9)
* ``het_scale``: HET's replays against the table size (1% .. 100% of Criteo Kaggle's)
* ``het_epoch``: HET's replay claims from one whole Criteo Kaggle epoch (Fig. 2, 7, 8, 9a)
* ``het_long``: HET's Tables 1-2 from long training runs (>= 10,000 iterations, seeds)
* ``calibrate``: this machine's compute per model and software cost per width (the clock)
* ``esd``: ESD's dispatchers: cost sweeps, decision time, end-to-end training
* ``combined``: the five mechanisms in one training run, and their ablation
* ``dedup``: RecD's partitions (shuffled / session-clustered), storage, dedup factors
* ``recd``: RecD's preprocessing and training throughput, KJT vs IKJT
* ``hotline``: Hotline's popularity and micro-batch pipeline against its baselines
* ``flexshard``: FlexShard's tiered sharding against the other plans of a sequence table
* ``distributed_check``: the emulated cluster against real processes (torch.distributed)
* ``config``: every stage's config schema (a light package: composing needs no torch)
* ``context``: ``RunContext``: input, output, seed, calibration, progress of one run
* ``sizing``: fitting a stage's batches and sweeps to the data it is given
"""
