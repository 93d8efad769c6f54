"""Layer 3, sharding of sequence embedding tables over a two-level topology: FlexShard and the
plans it is compared with. Imports only ``utils``.

* ``topology``: a two-level accelerator topology and the time of one all-to-all on it
* ``plans``: the plans (table-, row-, column-, table-row-wise, hot-row data parallel, FlexShard's
  tiers): where each row lives and where a lookup goes
* ``traffic``: a plan's all-to-all traffic, expected and replayed, and its memory
* ``planner``: FlexShard's cut points: how many hot rows to replicate everywhere and per node
* ``config``: the config schema (``workbench/conf/topology/``)
"""
