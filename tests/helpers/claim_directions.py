"""Whether a run's claim rows keep the directions the committed (default-profile) report shows.

Used by the notebook tests: the ``ci`` profile is for quick checks, and a quick check that
reverses a paper's direction without saying so would mislead. A claim row is matched by its
section, key, claim text and order; a direction is *shown* when the state is ``reproduced`` or
``direction only``. A row of the other run keeps it when it shows it too, or says it is ``not
comparable`` and why (its rule); a row it leaves out counts as kept only when the same section
has a ``not comparable`` row of that key (e.g. a speedup never reached its target). A row timed
by the wall clock (:attr:`Entry.wall_clock`) keeps it with a ``tie`` too: a busy machine widens
its interval across 1x, which is honest; only ``contradicted`` reverses it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.claims import register, verdict

SHOWN = (verdict.REPRODUCED, verdict.DIRECTION_ONLY)
NOT_COMPARABLE = verdict.NOT_COMPARABLE


def claim_rows(reports: Path) -> dict[tuple[str, str, str, int], dict[str, Any]]:
    """Every claim row of ``reports/*/section.json`` by (section, key, claim, occurrence)."""
    rows: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    for path in sorted(reports.glob("*/section.json")):
        seen: dict[tuple[str, str], int] = {}
        for claim in json.loads(path.read_text()).get("claims", []):
            ident = (claim["key"], claim["claim"])
            rows[(path.parent.name, *ident, seen.get(ident, 0))] = claim
            seen[ident] = seen.get(ident, 0) + 1
    return rows


def direction_losses(reference: Path, other: Path) -> list[str]:
    """The rows whose direction ``reference`` shows and ``other`` loses without saying why."""
    ref, run = claim_rows(reference), claim_rows(other)
    explained = {(k[0], k[1]) for k, c in run.items()
                 if c["state"] == NOT_COMPARABLE and c["rule"].strip()}
    timed = {e.key for e in register.load().entries if e.wall_clock}
    losses = []
    for ident, claim in ref.items():
        if claim["state"] not in SHOWN:
            continue
        got = run.get(ident)
        if got is None:
            if (ident[0], ident[1]) not in explained:
                losses.append(f"{ident}: missing (the reference shows {claim['state']})")
        elif got["state"] == NOT_COMPARABLE:
            if not got["rule"].strip():
                losses.append(f"{ident}: not comparable without a reason")
        elif got["state"] == verdict.TIE and ident[1] in timed:
            continue
        elif got["state"] not in SHOWN:
            losses.append(f"{ident}: {got['state']} ({got['rule']}) where the reference shows "
                          f"{claim['state']} ({claim['rule']})")
    return losses
