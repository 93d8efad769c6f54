"""Claims read from one measurement count once (workbench/claims/counting.py): in the
index, the DVC metrics, the README's and the docs' counts."""

from __future__ import annotations

import math

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.claims.counting import counted, measurement_keys, shared_with, variants
from workbench.claims.register import load
from workbench.report import fragments
from workbench.report.index import claim_lines, metrics, verdict_lines

REGISTER = load()


def _row(key: str, mean: float, state: str = "reproduced", **kw) -> dict:
    entry = REGISTER[key]
    return {"key": key, "paper": entry.paper, "claim": entry.claim,
            "paper_value": entry.paper_value, "basis": "the paper's method [P]",
            "measured": f"{mean:.2f}x", "mean": mean, "ci_low": mean, "ci_high": mean,
            "seeds": 1, "state": state, "verdict": state, "holds": "-", **kw}


def _keyed(rows: list[dict]) -> list[dict]:
    return [{**r, "measurement_id": m} for r, m in zip(rows, measurement_keys(rows, REGISTER))]


def test_one_replay_judged_for_three_models_is_one_measurement() -> None:
    rows = _keyed([_row("het.fig7a_comm.wdl", 6.245495), _row("het.fig7a_comm.deepfm", 6.245495),
                   _row("het.fig7a_comm.dcn", 6.245495), _row("het.fig7b_comm.wdl", 4.07)])
    assert [r["measurement_id"] for r in rows] == ["het.fig7a_comm.wdl"] * 3 + [
        "het.fig7b_comm.wdl"]
    assert [r["key"] for r in counted(rows)] == ["het.fig7a_comm.wdl", "het.fig7b_comm.wdl"]
    assert variants([r["key"] for r in shared_with(rows)["het.fig7a_comm.wdl"]]) == \
        "wdl/deepfm/dcn"
    # the index: one row for the three, all three paper values in it; the counts count two
    table = "\n".join(claim_lines(rows))
    assert table.count("wdl/deepfm/dcn:") == 1 and "8.2x [P] / 7.9x [P] / 7.4x [P]" in table
    assert sum(line.startswith("| HET") for line in table.splitlines()) == 2
    assert metrics(rows, REGISTER)["counts"]["reproduced"] == 2
    total = [line for line in verdict_lines(rows, REGISTER) if "**total**" in line]
    assert total and "**2**" in total[0]


def test_other_numbers_another_column_or_no_value_are_other_measurements() -> None:
    rows = _keyed([_row("het.fig7a_comm.wdl", 6.2), _row("het.fig7a_comm.deepfm", 5.6),
                   _row("het.fig2_share.wdl", 6.2), _row("het.table1_tf_parallax", math.nan),
                   _row("het.fig9c_dim.tf_ps", math.nan)])
    assert [r["measurement_id"] for r in rows] == [r["key"] for r in rows]
    assert len(counted(rows)) == 5


def test_one_measurement_judged_in_two_states_counts_in_each() -> None:
    rows = _keyed([_row("het.fig7a_comm.wdl", 6.0), _row("het.fig7a_comm.deepfm", 6.0),
                   _row("het.fig7a_comm.dcn", 6.0, state="direction only")])
    assert [r["key"] for r in counted(rows)] == ["het.fig7a_comm.wdl", "het.fig7a_comm.dcn"]
    assert len(shared_with(rows)["het.fig7a_comm.wdl"]) == 2


KEYS = [f"het.{fig}.{model}" for fig in ("fig7a_comm", "fig7b_comm", "fig2_share")
        for model in ("wdl", "deepfm", "dcn")]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from([1.0, 2.0]),
                          st.sampled_from(["reproduced", "tie"])),
                max_size=len(KEYS), unique_by=lambda t: t[0]))  # one row per register entry
def test_counts_are_the_distinct_measurement_state_pairs(spec) -> None:
    """Against brute force: a row is counted iff no earlier row has the same stage, file,
    column, numbers and state."""
    rows = _keyed([_row(k, m, s) for k, m, s in spec])
    seen, want = set(), []
    for r in rows:
        by = REGISTER[r["key"]].measured_by
        ident = (by["stage"], by["file"], by["column"], r["mean"], r["state"])
        if ident not in seen:
            seen.add(ident)
            want.append(r["key"])
    assert [r["key"] for r in counted(rows)] == want
    assert sum(len(g) for g in shared_with(rows).values()) == len(rows)


def test_the_generated_counts_say_measurements() -> None:
    claims = pd.DataFrame(_keyed([_row("het.fig7a_comm.wdl", 6.2),
                                  _row("het.fig7a_comm.deepfm", 6.2),
                                  _row("het.fig2_share.wdl", 0.7, state="tie")]))
    text = fragments.counts(claims)
    assert text.startswith("All 3 claims of the register, 2 measurements")
    assert "1 reproduced" in text and "1 tie" in text
    assert "| 3 (2 measurements): 1 reproduced, 1 tie |" in fragments.papers(claims, "docs/")
    assert fragments.table(claims, "HET").count("wdl/deepfm:") == 1
    # a table from before the column counts every row
    assert fragments.counts(claims.drop(columns="measurement_id")).startswith(
        "All 3 claims of the register, 3 measurements:")
