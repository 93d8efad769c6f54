"""``python -m workbench.stages``: see :mod:`workbench.stages.cli`."""

from workbench.stages.cli import main

main()
