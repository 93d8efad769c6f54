"""Layer 8, report: the papermill runner for the jupytext notebooks (``notebook``), report
sections, claims and provenance assembled into ``reports/README.md`` (``sections``), the verdict
rules that grade each claim in direction and magnitude (``verdict``), the catalogue of the
papers' headline claims the report must account for (``catalogue``), and the one seaborn theme
with byte-deterministic figures (``plotting``). Imports ``workbench.config`` and ``utils``."""
