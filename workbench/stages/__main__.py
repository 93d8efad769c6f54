"""``python -m workbench.stages``: see [`workbench.stages.cli`][]."""

from workbench.stages.cli import main

main()
