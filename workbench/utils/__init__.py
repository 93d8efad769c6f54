"""Layer 0, shared utilities: atomic writes (``io``), logging with the role in the format
(``logs``), alternating best-of wall-clock timing (``timing``), repository paths (``paths``) and
the one config validator every schema uses (``validation``). Imports nothing else of the
workbench."""
