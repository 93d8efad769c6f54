"""Layer 2, the emulated edge cluster: W workers with HET's bounded-staleness caches over a
parameter server, the clock that turns their traffic into seconds, and its real-process twin.

Imports ``data`` and ``utils``.

| module | what it holds |
| --- | --- |
| ``cache`` | HET's per-worker embedding cache: its semantics, state and Python face |
| ``cache_step`` | the numba kernels of one step: a read, a write, the flush |
| ``cache_policy`` | the replacement policies (LRU, LFU, LFU-opt) |
| ``linked_list`` | the arrays of the policies' ordered lists |
| ``edge_cluster`` | W workers over a parameter server: the counters of every iteration |
| ``time_model`` | the clock: counters to bytes and seconds |
| ``routes`` | the dense and sparse routes a system charges |
| ``dense_sync`` | the dense synchronisation modes |
| ``accelerator_time`` | Hotline's accelerator timeline |
| ``tiered_store`` | two-tier embedding storage (accelerator and host memory) |
| ``software_cost`` | the software cost of a PS exchange |
| ``ps_protocol`` | the minimal PS protocol that cost is measured on |
| ``shard_table`` | the hash-map shard serving it |
| ``calibration`` | the committed calibration the clock reads |
| ``remote_ps`` | HET's cache protocol between real processes |
| ``wire`` | framed messages |
| ``shaped_link`` | sender-shaped links (token bucket) |
| ``edge_network`` | a real network of namespaces whose links the kernel shapes |
| ``config`` | the config schema |
| ``construction`` | clusters built from an experiment's settings (heterogeneous links, resized) |
"""
