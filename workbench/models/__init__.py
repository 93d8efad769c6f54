"""Layer 4, models: the compact CTR models and RecD's DLRM.

Embedding tables of the CTR models live outside them: a parameter server or a cache supplies
the rows. Imports ``sparse`` and lower.

| module | what it holds |
| --- | --- |
| ``ctr`` | DLRM, WDL, DeepFM and DCN, with their FLOP counts |
| ``hetu`` | WDL, DeepFM and DCN as Hetu's ``examples/ctr`` builds them |
| ``recipe`` | training recipes (ours, Hetu's): the step, the draw, the metric |
| ``layers`` | their blocks |
| ``recd`` | RecD's DLRM with a history tower on IKJT batches |
| ``torchrec_dlrm`` | the same DLRM on TorchRec's own EmbeddingBagCollection |
| ``config`` | the config schema |
"""
