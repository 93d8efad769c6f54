"""Layer 1, data: dataset registry (the real samples' pinned sources included) and resumable
verified downloads from mirrors or the network (``registry``, ``download``), digests and the
acquisition's errors (``verify``), safe archive extraction (``archive``), the raw formats (the
``formats`` package: the reader ``engine`` and one module per format), the Criteo-calibrated
synthetic default (``synthetic``) and its keys alone, drawn in chunks or into a memory-mapped
file (``synthetic_keys``), the one columnar schema (``schema``), encoding and splits in
memory (``preprocess``) and out of core (``streaming``), the download / preprocess stages
(``pipeline``), global embedding keys (``keys``), RecD's session-clustered partitions
(``partition``), FAE's access profiles and hot sets (``popularity``) and the config schema of a
dataset (``config``). Imports only ``workbench.utils``."""
