"""Layer 9, report: the notebooks' side of the pipeline, rendering what ``claims`` records.
Imports ``claims``, ``arguments``, ``config`` and lower.

* ``notebook``: the papermill runner, and the config a notebook shows with its ``dataset`` parameter
* ``notebook_registry``: every notebook: the stages it reads, its params, knobs and explorer
  (dvc.yaml's per-notebook dependencies and the explorers follow it)
* ``sections``: a notebook's report section: figures, tables, notes and claim rows, saved as
  ``section.json``
* ``page``: the section's page ``reports/<notebook>/README.md``, a pure function of its
  ``section.json``
* ``provenance``: the commit, modified sources and package versions a report was drawn from,
  and the digest of the configuration a notebook reads
* ``index``: the one-screen index ``reports/README.md`` (verdict counts, claims table, section
  links) and ``reports/claims.csv`` (every field), the rows gathered by [`workbench.claims`][]
* ``display``: each section's figures, tables and notes shown inline in the notebook
* ``verdict_map``: per paper, the state against every assumed parameter
* ``lineage``: the pipeline's graph from ``dvc.lock``, the stage output (and its ``dvc.lock`` hash)
  a file came from, the log of what a notebook opened
* ``costs``: the claim -> command -> cost page ``reports/costs.md`` from the stages' cost records
  and ``dvc.lock``
* ``fragments``: the claim counts and values of the README and docs, generated from
  ``reports/claims.csv`` (``--check``: a test holds them)
* ``plotting``: the one seaborn theme, byte-deterministic figures, each measured for how it reads at
  the width it is shown at (text size, legends on data)
* ``palette``: one colour per system, the same in every figure
* ``explore``: the notebooks' widgets: a live run, its plot redrawn in place, in the background with
  progress
"""
