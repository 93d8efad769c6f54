"""Layer 8, report: the papermill runner for the jupytext notebooks (``notebook``), report
sections, claims and provenance assembled into ``reports/README.md`` (``sections``), and the one
seaborn theme with byte-deterministic figures (``plotting``). Imports ``workbench.config`` and
``utils``."""
