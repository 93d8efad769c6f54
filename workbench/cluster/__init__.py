"""Layer 2, the emulated edge cluster: HET's bounded-staleness caches (``cache``, numba kernels on
the arrays of ``linked_list``), W workers over a parameter server (``edge_cluster``) and the clock
that turns their counters into bytes and seconds (``time_model``). Imports ``data`` and
``utils``."""
