"""Layer 6, experiments: one module per pipeline stage (``dataset_stats``, ``het_cache``,
``het_train``, ``het_time``, ``esd``, ``dedup``, ``recd``), each a ``run(...)`` that writes its
results directory whole; their config schemas are in ``config``. Imports ``training`` and
lower; never ``workbench.config`` (each stage takes the parts of the configuration it uses)."""
