"""Config schema of the trainer's baseline dispatch (``workbench/conf/dispatch/``).

The cost-aware dispatchers (LAIA, ESD, HybridDis) are configured by the ESD experiment
([`workbench.experiments.config.EsdConfig`][]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class DispatchConfig:
    """Which sample of a global batch goes to which worker.

    Attributes:
        name: dispatcher (``contiguous``: consecutive slices; ``random``: a seeded permutation).
    """

    name: Literal["contiguous", "random"] = "contiguous"
