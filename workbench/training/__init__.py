"""Layer 5, training: the models trained for real, on emulated and on real systems.

* ``trainer``: the trainer that runs HET's systems through the emulated cluster, and time to
  target; ``components``: the typed components it is built from
  ([`ModelSpec`][.components.ModelSpec], [`SystemSpec`][.components.SystemSpec],
  [`ClusterSetup`][.components.ClusterSetup], the [`Mechanisms`][.components.Mechanisms]
  switches; a [`DispatcherSpec`][workbench.dispatch.registry.DispatcherSpec] beside them);
* ``distributed``: the same runs on real processes (a parameter server, one process per worker,
  a dispatcher process; torch.distributed over sender-shaped links on this machine's loopback,
  or one ``torchrun`` per node of a kernel-shaped edge network): the launcher; the job it runs,
  its faults and result (``distributed_job``); what each rank executes (``ranks``); the
  forkserver the ranks of this machine fork from (``rank_server``);
* ``emulator_check``: the emulator set against real processes: an emulated run of a distributed
  job, the two compared, the per-phase and byte frames, the fitted software cost;
* ``dense_reducer``: the workers' dense gradients summed after backward (one all_reduce) or
  in DDP's buckets during backward (the real counterpart of ``cluster.dense_sync``);
* ``supervision``: how the launcher watches those processes (heartbeats, nameless files, the
  error naming the process at fault);
* ``hotline``: Hotline's micro-batch pipeline, the CPU-GPU hybrid, FAE and accelerator-only on a
  two-tier embedding store ([`TieredTrainer`][.hotline.TieredTrainer]); ``hotline_epoch``: one
  epoch of a scheme ([`train_scheme`][.hotline_epoch.train_scheme]: FAE's phases, evaluation,
  online re-profiling);
* ``microbatch_plan``: Hotline's split of a mini-batch into its popular and non-popular
  micro-batches with one sort ([`plan_minibatch`][.microbatch_plan.plan_minibatch]), made ahead on a
  thread;
* ``capture``: one micro-batch's forward and backward, eager or captured by ``torch.compile``
  (CUDA graphs on a GPU) on padded shapes ([`MicroBatchStep`][.capture.MicroBatchStep]);
* ``recd_trainer``: the RecD trainer on KJT / IKJT batches;
* ``metrics``: ROC AUC and the time to a target AUC (numpy only: the claims read them);
* ``clock``: a run's emulated clock: its compute and software costs (calibrated or from FLOPs,
  [`clock_costs`][.clock.clock_costs]) and an epoch of a dispatched trace replayed into the counters
  the clock times ([`replay_counters`][.clock.replay_counters]); every timed stage uses it.

Imports ``models`` and lower.
"""
