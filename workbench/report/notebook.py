"""Execute a jupytext percent notebook with papermill (the figure stages of the pipeline).

Notebooks live in git as ``notebooks/<name>.py`` (``# %%`` cells, one cell tagged
``parameters``). The stage converts the text notebook in memory, injects the parameters and
executes it; the notebook reads run outputs (metrics files), never recomputes experiments, and
writes its figures and ``section.json`` into ``reports/<name>/``. The executed ``.ipynb`` (which
holds per-cell timestamps, so it differs on every run) goes to ``reports/notebooks/`` and nothing
depends on it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from workbench.utils.paths import NOTEBOOK_DIR, REPO_ROOT, known_notebooks

log = logging.getLogger(__name__)


def notebook_path(name: str) -> Path:
    """``notebooks/<name>.py``, with a clear error listing the notebooks when absent."""
    path = NOTEBOOK_DIR / f"{name}.py"
    if not path.exists():
        raise FileNotFoundError(f"notebook {path} not found (known notebooks: "
                                f"{known_notebooks()})")
    return path


def execute(name: str, executed: Path, parameters: dict[str, Any], cwd: Path = REPO_ROOT,
            timeout: int = 1800) -> Path:
    """Run notebook ``name`` with ``parameters``; write the executed copy to ``executed``.

    Args:
        name: notebook name (``notebooks/<name>.py``).
        executed: path of the executed ``.ipynb``.
        parameters: values injected after the ``parameters`` cell.
        cwd: working directory of the kernel.
        timeout: per-cell timeout in seconds.

    Raises:
        papermill.PapermillExecutionError: a cell failed (the message names the cell and error).
    """
    import jupytext
    import papermill as pm

    from workbench.utils.io import atomic_path

    nb = jupytext.read(notebook_path(name))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    os.environ.setdefault("TQDM_DISABLE", "1")
    with atomic_path(executed, suffix=".ipynb") as tmp:
        pm.execute_notebook(nb, str(tmp), parameters=parameters, kernel_name="python3",
                            cwd=str(cwd), progress_bar=False, execution_timeout=timeout)
    log.info("executed %s -> %s", name, executed)
    return executed
