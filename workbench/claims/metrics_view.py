r"""The verdict counts and what a change did to the claims, as short tables (``make metrics``).

``reports/claims_metrics.json`` (the report stage's DVC metrics: the register's version, the
count of measurements per state, and per claim its mean, interval, seeds and state) is one
record that ``dvc metrics show`` prints as a single row of every field. This reads the same file
and prints what a reader asks of it:

    make metrics                 the counts per state, then each claim: state, value, interval
    make metrics REV=HEAD~1      against the file at a git revision: the counts before -> after,
                                 each claim whose state or value changed, or "no change"

``python -m workbench.claims.metrics_view [--diff REV] [--file PATH]`` is the command behind it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.utils.errors import UserError, one_line
from workbench.utils.paths import REPO_ROOT

METRICS = Path("reports") / "claims_metrics.json"


def read(path: Path) -> dict[str, Any]:
    """The metrics record at ``path``.

    Raises:
        UserError: no such file (the report stage writes it: ``make repro``), or not the
            report's record.
    """
    if not path.is_file():
        raise UserError(f"{path}: no claims metrics; the report stage writes them "
                        "(make repro, or dvc repro report)")
    return _parsed(path.read_text(), str(path))


def at_revision(rev: str, root: Path = REPO_ROOT) -> dict[str, Any]:
    """The metrics record committed at git revision ``rev``.

    Raises:
        UserError: the revision is unknown or holds no ``reports/claims_metrics.json``.
    """
    done = subprocess.run(["git", "show", f"{rev}:{METRICS.as_posix()}"], cwd=root,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise UserError(f"REV={rev}: git has no {METRICS} there ({done.stderr.strip()}); give "
                        "a commit that holds the report, e.g. REV=HEAD~1")
    return _parsed(done.stdout, f"{rev}:{METRICS}")


def _parsed(text: str, where: str) -> dict[str, Any]:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"{where}: not JSON ({err}); rerun the report stage") from None
    if not isinstance(record, dict) or not {"counts", "claims"} <= set(record):
        raise UserError(f"{where}: not the report's claims metrics (no counts and claims); "
                        "rerun the report stage")
    return record


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(line.format(*map(str, r)).rstrip() for r in [header, *rows])


def _value(claim: dict[str, Any]) -> str:
    mean, low, high = claim.get("mean"), claim.get("ci_low"), claim.get("ci_high")
    if mean is None:
        return "-"
    if low is None or high is None or low == high:
        return f"{mean:.4g}"
    return f"{mean:.4g} [{low:.4g}, {high:.4g}]"


def show(record: dict[str, Any]) -> str:
    """The counts per state and one line per claim."""
    counts = record["counts"]
    total = sum(counts.values())
    head = (f"register v{record.get('register_version', '?')}: {total} measurements")
    states = _table(["state", "count"], [[k.replace("_", " "), v] for k, v in counts.items()])
    claims = _table(["claim", "state", "value [95% interval]", "seeds"],
                    [[key, c.get("state", "-"), _value(c), c.get("seeds", "-")]
                     for key, c in sorted(record["claims"].items())])
    return f"{head}\n\n{states}\n\n{claims}"


def diff(before: dict[str, Any], after: dict[str, Any], rev: str) -> str:
    """The counts before -> after and each claim whose state or value changed."""
    keys = sorted(set(before["counts"]) | set(after["counts"]))
    counts = [[k.replace("_", " "), before["counts"].get(k, 0), after["counts"].get(k, 0)]
              for k in keys if before["counts"].get(k, 0) != after["counts"].get(k, 0)]
    changed = []
    for key in sorted(set(before["claims"]) | set(after["claims"])):
        old, new = before["claims"].get(key), after["claims"].get(key)
        if old == new:
            continue
        changed.append([key, "-" if old is None else f"{old.get('state')}: {_value(old)}",
                        "-" if new is None else f"{new.get('state')}: {_value(new)}"])
    if not counts and not changed and before.get("register_version") == \
            after.get("register_version"):
        return f"no change: the claims metrics equal those at {rev}"
    parts = [f"against {rev} (register v{before.get('register_version', '?')} -> "
             f"v{after.get('register_version', '?')})"]
    parts.append(_table(["state", rev, "now"], counts) if counts
                 else "counts per state: no change")
    parts.append(_table(["claim", rev, "now"], changed) if changed
                 else "every claim's state and value: no change")
    return "\n\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workbench.claims.metrics_view [--diff REV] [--file PATH]``."""
    parser = argparse.ArgumentParser(prog="python -m workbench.claims.metrics_view",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--diff", metavar="REV", help="compare with the file at git REV")
    parser.add_argument("--file", type=Path, default=REPO_ROOT / METRICS,
                        help=f"the metrics file (default: {METRICS})")
    args = parser.parse_args(argv)
    try:
        now = read(args.file)
        print(diff(at_revision(args.diff), now, args.diff) if args.diff else show(now))
    except UserError as err:
        print(f"metrics: {one_line(err)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
