"""Layer 2, the emulated edge cluster: HET's bounded-staleness caches (``cache``, numba kernels on
the state and replacement policies of ``cache_policy`` and the arrays of ``linked_list``), W
workers over a parameter server (``edge_cluster``) and the clock that turns their counters into
bytes and seconds (``time_model``), a system's dense and sparse routes it charges (``routes``) and
its dense synchronisation modes (``dense_sync``), with Hotline's accelerator timeline
(``accelerator_time``) and two-tier embedding storage (``tiered_store``); the software cost of a PS
exchange (``software_cost``), measured on a minimal PS protocol (``ps_protocol``) served from a
hash-map shard (``shard_table``), and the committed calibration the clock reads (``calibration``);
HET's cache protocol between real processes (``remote_ps``) over framed messages (``wire``) through
sender-shaped links (``shaped_link``) or a real network of namespaces whose links the kernel shapes
(``edge_network``); the config schema (``config``) and the clusters built from an experiment's
settings (``construction``: heterogeneous edge links, a cluster resized). Imports ``data`` and
``utils``."""
