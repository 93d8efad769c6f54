"""Layer 1, data: from a public source to the one columnar schema, with the partitions and
profiles the papers' systems read.

Imports only ``workbench.utils``.

| module | what it holds |
| --- | --- |
| ``registry`` | the dataset registry, the real samples' pinned sources included |
| ``source`` | what a source is: its files, checksums, upstream derivations, archive members |
| ``download`` | resumable, verified downloads from mirrors or the network |
| ``transfer`` | one file over HTTP into its ``.part``: resume, rate bound, verify, place |
| ``verify`` | digests and the acquisition's errors |
| ``archive`` | safe archive extraction |
| ``formats`` | the raw formats: the reader (``delimited``, ``engine``) and one module per format |
| ``synthetic`` | the Criteo-calibrated synthetic default |
| ``synthetic_keys`` | its keys alone, drawn in chunks or into a memory-mapped file |
| ``schema`` | the one columnar schema |
| ``preprocess`` | encoding and splits in memory |
| ``streaming`` | the same out of core |
| ``pipeline`` | the download and preprocess stages |
| ``keys`` | global embedding keys |
| ``partition`` | RecD's session-clustered partitions |
| ``popularity`` | FAE's access profiles and hot sets |
| ``config`` | the config schema of a dataset |
"""
