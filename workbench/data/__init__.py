"""Layer 1, data: dataset registry and resumable verified downloads (``registry``, ``download``),
raw-format parsers (``parsers``), the Criteo-calibrated synthetic default (``synthetic``), the one
columnar schema (``schema``), encoding and splits (``preprocess``), the download / preprocess
stages (``pipeline``), global embedding keys (``keys``) and RecD's session-clustered partitions
(``partition``). Imports only ``workbench.utils``."""
