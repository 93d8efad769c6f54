"""Layer 0, shared utilities. Imports nothing else of the workbench.

* ``io``: atomic writes (a file or a folder appears whole or not at all)
* ``logs``: logging with the role (stage@dataset) in the format
* ``timing``: alternating best-of wall-clock timing
* ``paths``: the project root, the config root and paths relative to them
* ``validation``: the one config validator every schema uses (dataclasses from dicts, ranges)
* ``errors``: the error family: ``WorkbenchError``, ``UserError`` (one line, no traceback)
* ``bitset``: a two-level bitmap that de-duplicates and sorts integer keys (numba)
* ``prefetch``: a software prefetch for numba kernels that chase pointers
* ``dvc_lock``: detecting a damaged ``dvc.lock`` before trusting it
* ``signals``: SIGTERM and SIGHUP as ``SystemExit``, so cleanup runs on them as on Ctrl-C;
  a Ctrl-C a library wrapped, recognised
* ``torchrec``: the TorchRec install ``make torchrec`` makes (torchrec 1.8.0 on the CPU
  fbgemm-gpu-cpu 1.8.0) and the check of that pair
* ``fanout``: a stage's independent configurations on spawned processes or a Dask cluster
  (``fanout.backend``), the same results either way, every failed configuration named
"""
