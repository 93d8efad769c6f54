"""Layer 3, sharding of sequence embedding tables over a two-level topology: FlexShard and the
plans it is compared with. Imports ``data`` and ``utils`` (and TorchRec, optional).

* ``topology``: a two-level accelerator topology and the time of one all-to-all on it
* ``plans``: the plans (table-, row-, column-, table-row-wise, hot-row data parallel, FlexShard's
  tiers): where each row lives and where a lookup goes
* ``traffic``: a plan's all-to-all traffic, expected and replayed, and its memory
* ``planner``: FlexShard's cut points: how many hot rows to replicate everywhere and per node
* ``lookups``: the lookups a plan is judged on and the profile it is made from: a split, or a
  generator streamed past its rows
* ``torchrec_plan``: TorchRec's own sharding planner on the same table and topology, its plan
  converted into the plans above (TorchRec imported only when it runs)
* ``config``: the config schema (``workbench/conf/topology/``)
"""
