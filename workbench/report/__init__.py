"""Layer 8, report: the notebooks' side of the pipeline (``notebook``: the papermill runner, and
the config a notebook shows with its ``dataset`` parameter), report sections, claims and
provenance assembled into ``reports/README.md`` (``sections``), each section's figures, tables
and notes shown inline in the notebook cell that makes them (``display``), the verdict rules that
grade each claim in direction and magnitude (``verdict``), the catalogue of the papers' headline
claims the report must account for (``catalogue``), the one seaborn theme with byte-deterministic
figures (``plotting``), and the notebooks' widgets: a live run, its plot redrawn in place, in the
background with progress (``explore``). Imports ``workbench.config`` and ``utils``."""
