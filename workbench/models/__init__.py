"""Layer 4, models: the compact CTR models DLRM, WDL, DeepFM, DCN with FLOP counts (``ctr``) and
their blocks (``layers``), and RecD's DLRM with a history tower on IKJT batches (``recd``); their
config schema is ``config``. Embedding tables of the CTR models live outside them (a parameter
server or a cache supplies the rows). Imports ``sparse`` and lower."""
