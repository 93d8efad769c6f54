"""Reproduce and check: every recomputed claim against the committed claims table.

``make check`` copies the committed ``reports/claims.csv`` aside, recomputes the stages the
claims are measured from (``dvc repro -f`` of [`claim_stages`][], the register's
``measured_by`` stages, with what they depend on; no notebook runs) and runs this module, which
measures every claim from ``results/`` ([`workbench.claims`][]), judges it by the register
and reports claim by claim whether the recomputed value lies inside the committed 95% interval
and whether the state changed:

    key                       committed                    recomputed   inside  state
    het.table1_time_to_target 2.73x [2.61, 2.85] (n = 5)   2.70x        yes     direction only
    recd.train                1.35x [1.20, 1.50] (n = 3)   1.62x        NO      reproduced -> ...

A committed value of one deterministic run is an interval of width 0: the recomputed value must
equal it (to a relative 1e-6). Exit status: 0 when no state changed, 1 when one did (the values
outside their interval are reported either way: for a wall-clock claim they say how far this
machine is from the committed one), 2 on unreadable input.

``workbench check --results DIR`` (``python -m workbench.claims.check --results DIR``) judges
any results folder of the same layout, e.g. one copied from another machine or cluster, against
the register and the committed report: every claim measured from ``DIR`` by the same code, its
state, whether its value equals the committed one (``value``: ``=``, or ``DIFFERS``: a rerun on
other hardware, or an edited file) and whether it lies in the committed interval. A claim whose
files are missing or malformed in ``DIR`` gets one line saying which file and why; the others
are still judged. A copy of this repository's ``results/`` reproduces every committed value and
state.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.claims import register as reg
from workbench.utils.errors import MissingInputError, UserError, WorkbenchError

REL_TOL = 1e-6  # a deterministic value "equals" the committed one to this relative tolerance


def _num(value: object) -> float | None:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def read(path: Path) -> pd.DataFrame:
    """A claims table, indexed by key.

    Raises:
        MissingInputError: the file is missing or has no ``key`` and ``state`` columns.
    """
    if not Path(path).is_file():
        raise MissingInputError(f"{path}: no claims table there (make check copies the "
                                "committed reports/claims.csv before recomputing)")
    frame = pd.read_csv(path)
    if not {"key", "state"} <= set(frame.columns):
        raise MissingInputError(f"{path}: a claims table needs the columns 'key' and 'state' "
                                f"(found {list(frame.columns)}); it predates the register")
    return frame.set_index("key")


def claim_stages(register: reg.Register | None = None, key: str | None = None) -> list[str]:
    """The stages the claims (or the claim ``key``) are measured from (the register's
    ``measured_by``), in order.

    Raises:
        MissingInputError: ``key`` is no claim of the register (the message names the closest).
    """
    register = register or reg.load()
    entries = list(register.entries)
    if key is not None:
        keys = [e.key for e in entries]
        if key not in keys:
            import difflib

            near = difflib.get_close_matches(key, keys, n=1)
            raise MissingInputError(f"{key!r} is no claim of the register"
                                    + (f" (did you mean {near[0]!r}?)" if near else "")
                                    + "; reports/costs.md and reports/claims.csv list them")
        entries = [e for e in entries if e.key == key]
    return list(dict.fromkeys(stage for e in entries if e.kind != "not_comparable"
                              for stage in e.stages))


def claim_targets(key: str | None = None, register: reg.Register | None = None) -> list[str]:
    """[`claim_stages`][] as the runner's targets (``python -m workbench.repro`` expands a
    foreach group's name to its items): what ``--stages``, ``make check`` and ``make claim`` run.

    Raises:
        MissingInputError: ``key`` is no claim of the register.
        UserError: the claim is measured by no stage (an empty target list would rerun the
            whole pipeline).
    """
    stages = claim_stages(register, key)
    if not stages:
        raise UserError(f"claim {key!r} is measured by no stage (the register judges it not "
                        "comparable, with its reason: reports/claims.csv); pick a measured "
                        "claim from reports/costs.md")
    return stages


def measured_table(cfg: Any, register: reg.Register | None = None,
                   tolerant: bool = False) -> pd.DataFrame:
    """The claims table measured from the results ``cfg`` locates, no notebook run: one row per
    register entry (register order), judged by the register; indexed by key.

    Args:
        cfg: the configuration (``cfg.paths.results`` is the folder read).
        register: the claims register (default: the package's).
        tolerant: a claim whose inputs are missing or malformed gets the state ``-`` and its
            error line in ``problem`` instead of stopping the whole table.
    """
    from dataclasses import asdict

    from workbench.claims import measure
    from workbench.claims.measurement import Results
    from workbench.claims.record import CLAIM_COLUMNS, measured_row, register_claim

    register = register or reg.load()
    res, rows = Results(cfg), []
    for e in register.entries:
        if not getattr(e, "measure", ""):
            rows.append(asdict(register_claim(e)))
            continue
        absent = [st for st in e.stages if not res.path(st).is_dir()]
        if tolerant and absent:  # a measure may degrade gracefully on a missing stage: don't
            rows.append({"key": e.key, "state": "-", "problem": (
                f"{res.path(absent[0])}/ not found: the {absent[0]} stage's results are not "
                "in this folder")})
            continue
        try:
            rows.append(measured_row(e, measure(e, res)))
        except (MissingInputError, WorkbenchError, KeyError, ValueError, TypeError,
                IndexError) as err:
            if not tolerant:
                raise
            rows.append({"key": e.key, "state": "-", "problem": _problem(err)})
    columns = [*CLAIM_COLUMNS, *(["problem"] if tolerant else [])]
    return pd.DataFrame(rows).reindex(columns=columns).set_index("key")


def _problem(err: Exception) -> str:
    """One line for a claim that could not be measured."""
    if isinstance(err, MissingInputError | WorkbenchError):
        return str(err).splitlines()[0]
    return f"malformed input ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"


def compare(committed: pd.DataFrame, current: pd.DataFrame) -> pd.DataFrame:
    """One row per claim of either table: the committed mean and interval, the recomputed mean,
    whether it lies inside (None: nothing to compare), both states and whether it changed."""
    rows = []
    for key in dict.fromkeys([*committed.index, *current.index]):
        old = committed.loc[key] if key in committed.index else None
        new = current.loc[key] if key in current.index else None
        lo = hi = mean = None
        if old is not None:
            lo, hi = _num(old.get("ci_low")), _num(old.get("ci_high"))
        if new is not None:
            mean = _num(new.get("mean"))
        inside = None
        if lo is not None and hi is not None and mean is not None:
            slack = REL_TOL * max(abs(lo), abs(hi), 1e-12)
            inside = lo - slack <= mean <= hi + slack
        old_state = "-" if old is None else str(old["state"])
        new_state = "-" if new is None else str(new["state"])
        old_mean = None if old is None else _num(old.get("mean"))
        problem = None if new is None else new.get("problem")
        problem = problem if isinstance(problem, str) else None
        same = None
        if problem is None and (old_mean is not None or mean is not None):
            same = (old_mean is not None and mean is not None
                    and abs(mean - old_mean) <= REL_TOL * max(abs(old_mean), 1e-12))
        rows.append({"key": key, "committed_mean": old_mean,
                     "committed_low": lo, "committed_high": hi,
                     "committed_seeds": None if old is None else _num(old.get("seeds")),
                     "recomputed_mean": mean, "inside": inside, "same_value": same,
                     "committed_state": old_state, "recomputed_state": new_state,
                     "changed": problem is None and old_state != new_state,
                     "problem": problem})
    return pd.DataFrame(rows)


def _g(v: object) -> str:
    x = _num(v)
    return "-" if x is None else f"{x:.4g}"


def render(table: pd.DataFrame) -> str:
    """The comparison as text: one line per claim, then the counts."""
    lines = [f"{'claim':34} {'committed [95% interval] (n)':36} {'recomputed':>10}  "
             f"{'value':7} {'inside':6}  state"]
    for r in table.itertuples():
        interval = (f"{_g(r.committed_mean)} [{_g(r.committed_low)}, {_g(r.committed_high)}] "
                    f"(n = {_g(r.committed_seeds)})" if r.committed_low is not None else "-")
        inside = "-" if r.inside is None else ("yes" if r.inside else "NO")
        value = ("missing" if isinstance(r.problem, str) else "-" if r.same_value is None
                 else "=" if r.same_value else "DIFFERS")
        state = (r.committed_state if not r.changed
                 else f"{r.committed_state} -> {r.recomputed_state}")
        lines.append(f"{r.key:34} {interval:36} {_g(r.recomputed_mean):>10}  {value:7} "
                     f"{inside:6}  {state}")
        if isinstance(r.problem, str):
            lines.append(f"{'':34} ^ {r.problem}")
    judged = table["inside"].dropna()
    differ = table["same_value"].dropna()
    lines += ["", f"{len(table)} claims: {int(judged.sum())} inside their committed interval, "
                  f"{int((~judged.astype(bool)).sum())} outside, "
                  f"{len(table) - len(judged)} with nothing to compare; "
                  f"{int((~differ.astype(bool)).sum())} value(s) differ from the committed, "
                  f"{int(table['problem'].notna().sum())} could not be measured; "
                  f"{int(table['changed'].sum())} state(s) changed."]
    return "\n".join(lines)


def measure_folder(folder: Path, params: Path | None) -> pd.DataFrame:
    """The claims measured from ``folder`` (tolerant: per-claim problems)."""
    from workbench.config import load
    from workbench.utils.paths import REPO_ROOT

    folder = folder.expanduser().resolve()
    if not folder.is_dir():
        raise MissingInputError(f"{folder}: no such folder (give a results folder: the layout "
                                "of results/, <stage>/<dataset>/...)")
    stages = {p.name for p in folder.iterdir() if p.is_dir()}
    known = set(claim_stages())
    if not stages & known:
        raise MissingInputError(f"{folder}: none of the claims' stage folders is in it "
                                f"(expected some of {', '.join(sorted(known))}); is it a "
                                "results folder?")
    if params is None and (REPO_ROOT / "params.yaml").is_file():
        params = REPO_ROOT / "params.yaml"
    return measured_table(load([f"paths.results={folder}"], params), tolerant=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m workbench.claims.check --committed OLD [--params P | --current NEW]``, or
    ``--stages`` (print [`claim_stages`][]); see the module."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--committed", type=Path,
                        help="the claims table before the recompute (a copy)")
    parser.add_argument("--params", type=Path,
                        help="measure every claim from the results this params file locates "
                             "(no notebook runs; the default)")
    parser.add_argument("--current", type=Path,
                        help="compare with this claims table instead of measuring")
    parser.add_argument("--results", type=Path,
                        help="judge this results folder (the layout of results/, e.g. a copy "
                             "from another machine) against the register and the committed "
                             "report (default --committed: reports/claims.csv)")
    parser.add_argument("--stages", action="store_true",
                        help="print the stages the claims are measured from, and exit")
    parser.add_argument("--claim", metavar="KEY",
                        help="only this claim: --stages prints its stages, the table shows its "
                             "line (make claim KEY=...)")
    args = parser.parse_args(argv)
    if args.stages:
        try:
            stages = claim_targets(args.claim)
        except UserError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(" ".join(stages))
        return 0
    if args.results is not None and args.committed is None:
        from workbench.utils.paths import REPO_ROOT

        args.committed = REPO_ROOT / "reports" / "claims.csv"
    if args.committed is None:
        parser.error("--committed is required (the claims table before the recompute)")
    try:
        if args.current is not None:
            current = read(args.current)
        elif args.results is not None:
            current = measure_folder(args.results, args.params)
        else:
            from workbench.config import load
            current = measured_table(load(params=args.params or Path("params.yaml")))
        table = compare(read(args.committed), current)
    except (MissingInputError, FileNotFoundError, WorkbenchError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.claim is not None:
        if args.claim not in set(table["key"]):
            print(f"error: {args.claim!r} is no claim of either table", file=sys.stderr)
            return 2
        table = table[table["key"] == args.claim]
    print(render(table))
    if ("problem" in table and table["problem"].notna().any()
            and table["recomputed_mean"].isna().all()):  # the not-comparable rows have none
        where = args.results if args.results is not None else "the results"
        print(f"error: nothing in {where} could be measured"
              + (f" for {args.claim!r}" if args.claim else "")
              + " (each claim's reason is printed under it): no claim was checked",
              file=sys.stderr)
        return 2
    return 1 if table["changed"].any() else 0


if __name__ == "__main__":
    sys.exit(main())
