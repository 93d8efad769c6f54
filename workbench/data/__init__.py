"""Layer 1, data: dataset registry and resumable verified downloads (``registry``, ``download``),
the raw formats (the ``formats`` package: the reader ``engine`` and one module per format), the
Criteo-calibrated synthetic default (``synthetic``), the one columnar schema (``schema``), encoding
and splits in memory (``preprocess``) and out of core (``streaming``), the download / preprocess
stages (``pipeline``), global embedding keys (``keys``), RecD's session-clustered partitions
(``partition``), FAE's access profiles and hot sets (``popularity``) and the config schema of a
dataset (``config``). Imports only ``workbench.utils``."""
