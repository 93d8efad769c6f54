"""Report sections, deterministic figures and the claims table."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from workbench.claims import register as reg
from workbench.claims import verdict
from workbench.claims.record import CLAIM_COLUMNS, CatalogueError, Claim, collect, measured_claim
from workbench.report.index import ROW_WIDTH, build, clip, curve_name, write
from workbench.report.page import PAGE_FILE, page, write_page
from workbench.report.plotting import save_figure, set_theme
from workbench.report.provenance import _generated, dirty_sources
from workbench.report.sections import SECTION_FILE, Section, load_sections
from workbench.utils.paths import REPO_ROOT


def _figure() -> plt.Figure:
    set_theme()
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [3, 1, 2])
    return fig


TEST_REGISTER = """
version: 7
claims:
  - key: het.a
    paper: HET
    claim: claim a
    paper_value: "8.2x [P]"
    basis: paper
    paper_setting: the paper's
    ours: {dataset: toy, unit: x}
    measured_by: {stage: s, file: f.csv, column: c}
    section: demo
    seeds: 1
    rule: {kind: factor, paper: 8.2}
    assumed:
      - {name: knob, unit: us, committed: 1, range: [1, 4], why: unknown}
  - key: het.b
    paper: HET
    claim: claim b
    paper_value: "8.2x [P]"
    basis: paper
    paper_setting: the paper's
    ours: {dataset: toy}
    measured_by: {stage: s, file: f.csv, column: c}
    section: demo
    seeds: 3
    rule: {kind: factor, paper: 8.2}
  - key: esd.c
    paper: ESD
    claim: claim c
    paper_value: "8.2x [A]"
    basis: formalisation
    paper_setting: unknown
    ours: {dataset: toy}
    measured_by: {stage: s, file: f.csv, column: c}
    section: demo
    seeds: 1
    rule: {kind: factor, paper: 8.2}
  - key: esd.nc
    paper: ESD
    claim: claim nc
    paper_value: "1.74x [A]"
    basis: formalisation
    paper_setting: unknown
    ours: {dataset: toy}
    measured_by: {stage: s, file: "-", column: "-"}
    section: demo
    seeds: 1
    rule: {kind: not_comparable, reason: no TF here}
"""


@pytest.fixture
def test_register(monkeypatch: pytest.MonkeyPatch) -> reg.Register:
    """A four-claim register for a ``demo`` section, in place of the package's."""
    register = reg.parse(TEST_REGISTER)
    monkeypatch.setattr(reg, "load", lambda path=None: register)
    return register


def _measure_all(sec: Section, a: float = 2.81, b: list[float] | None = None,
                 c: float = 0.9) -> None:
    sec.measure("het.a", text=f"{a}x", setting="toy", values=[a], note="small",
                conditions={"knob": [{"value": 1, "values": [a]}, {"value": 2, "values": [6.0]},
                                     {"value": 4, "values": [7.0]}]})
    sec.measure("het.b", text="b", setting="toy", values=b or [6.0, 6.2, 6.4])
    sec.measure("esd.c", text=f"{c}x", setting="toy", values=[c])


def test_figures_are_byte_deterministic(tmp_path: Path) -> None:
    a = save_figure(_figure(), tmp_path / "a.png").read_bytes()
    b = save_figure(_figure(), tmp_path / "b.png").read_bytes()
    assert a == b
    pdf1 = save_figure(_figure(), tmp_path / "a.pdf").read_bytes()
    pdf2 = save_figure(_figure(), tmp_path / "b.pdf").read_bytes()
    assert pdf1 == pdf2


def test_section_roundtrip_index_and_page(tmp_path: Path, test_register: reg.Register) -> None:
    reports = tmp_path / "reports"
    sec = Section("demo", "Demo section", reports / "demo", intro="Our formalisation.")
    sec.figure(_figure(), "curve", "A curve", setting="toy", reads=())
    sec.table(pd.DataFrame({"x": [1, 2], "y": [0.5, 0.25]}), "tab", "A table", reads=())
    _measure_all(sec)
    sec.save()
    params = tmp_path / "params.yaml"
    params.write_text("seed: 0\n")
    text = build(reports, ["demo"], params, tmp_path)
    assert "| HET" in text and "| direction only |" in text
    assert "| not comparable (our formalisation) |" in text  # the register writes esd.nc
    assert "[demo #1](demo/README.md#claim-1)" in text
    assert f"register v{reg.load().version}" in text
    assert "seed: 0" not in text and "[`params.yaml`](../params.yaml)" in text
    # the page holds what the index leaves out: the rule with its numbers, notes, figures
    saved = json.loads((reports / "demo" / SECTION_FILE).read_text())
    assert saved["claims"][0]["paper_value"] == "8.2x [P]"
    assert saved["claims"][0]["state"] == "direction only" and "verdict" not in saved["claims"][0]
    body = (reports / "demo" / PAGE_FILE).read_text()
    assert body == page(saved)
    assert body.startswith("# Demo section\n") and "Our formalisation." in body
    assert "### Claim 1\n" in body and "### Claim 3\n" in body
    assert "- **Rule:** direction only: 2.81x; its gain is 0.25x the paper's" in body
    assert "- **Holds:** knob 1-4 us: direction only at 1 us; reproduced at 2-4 us" in body
    assert "- **Note:** small" in body and "- **Setting:** toy" in body
    assert "![A curve](curve.png)" in body and "*Setting:* toy" in body
    assert "**A table** ([CSV](tab.csv))" in body and "| 0.25 |" in body
    assert "its gain is 0.25x" not in text  # the rule stays behind the link


def test_measure_judges_by_the_register(test_register: reg.Register) -> None:
    sec = Section("demo", "Demo", None)
    row = sec.measure("het.b", text="b", setting="toy", values=[6.0, 6.2])
    assert row.state == "not comparable" and "2 seed(s) ran; the register asks for 3" in row.rule
    row = sec.measure("het.b", text="b", setting="toy", values=[6.0, 6.2, 6.4])
    assert row.state == "reproduced" and row.seeds == 3 and row.ci_low < 6.2 < row.ci_high
    with pytest.raises(KeyError, match="het.typo"):
        sec.measure("het.typo", text="-", setting="-", values=[1.0])
    with pytest.raises(reg.RegisterError, match="not among its assumed"):
        sec.measure("het.a", text="-", setting="-", values=[2.0],
                    conditions={"other": [{"value": 1, "values": [2.0]}]})


def test_a_claim_is_judged_once_per_sweep_point_and_once_for_its_row(
        test_register: reg.Register, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    judge = reg.judge
    monkeypatch.setattr(reg, "judge", lambda *a, **k: calls.append(a[1]) or judge(*a, **k))
    points = [{"value": v, "values": [8.0 + v]} for v in (1, 2, 4)]
    row = Section("demo", "Demo", None).measure("het.a", text="a", setting="toy", values=[8.2],
                                                conditions={"knob": points})
    assert len(calls) == len(points) + 1  # the holds text reads the points' stored states
    assert row.holds.startswith("reproduced throughout knob 1-4")


def test_hand_run_writes_its_page_into_scratch(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.utils import paths

    monkeypatch.setattr(paths, "SCRATCH_DIR", tmp_path / "scratch")
    sec = Section("demo", "Demo")  # out_dir None: a notebook run by hand
    sec.note("a note")
    sec.save()
    assert sec.out_dir == tmp_path / "scratch" / "demo"
    assert (sec.out_dir / PAGE_FILE).read_text() == page(
        json.loads((sec.out_dir / SECTION_FILE).read_text()))


def test_write_page_rewrites_only_a_missing_or_outdated_page(tmp_path: Path,
                                                            test_register: reg.Register) -> None:
    sec = Section("demo", "Demo", tmp_path / "demo")
    _measure_all(sec)
    sec.save()
    path = tmp_path / "demo" / PAGE_FILE
    saved = json.loads((tmp_path / "demo" / SECTION_FILE).read_text())
    assert not write_page(tmp_path / "demo", saved)  # Section.save wrote these bytes
    path.unlink()
    assert write_page(tmp_path / "demo", saved) and path.read_text() == page(saved)
    path.write_text(page({**saved, "title": "An older title"}))  # a page of ours, outdated
    assert write_page(tmp_path / "demo", saved) and path.read_text() == page(saved)


def test_missing_section_names_the_stage(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="notebook stage for 'absent'"):
        build(tmp_path, ["absent"], tmp_path / "p.yaml", tmp_path)


def test_pipes_inside_cells_are_escaped(tmp_path: Path, test_register: reg.Register) -> None:
    sec = Section("demo", "Demo", tmp_path / "demo")
    _measure_all(sec)
    sec.measure("het.a", text="max |a - b| = 0", setting="toy", values=[2.0])
    sec.claims = sec.claims[1:]  # the row with a pipe replaces het.a's first row
    sec.table(pd.DataFrame({"x": ["p|q"]}), "t", "T", reads=())
    sec.save()
    (tmp_path / "p.yaml").write_text("seed: 0\n")
    text = build(tmp_path, ["demo"], tmp_path / "p.yaml", tmp_path)
    assert "max \\|a - b\\| = 0" in text
    assert "p\\|q" in (tmp_path / "demo" / PAGE_FILE).read_text()


def _demo(reports: Path, claims: list[Claim]) -> None:
    sec = Section("demo", "Demo", reports / "demo")
    for claim in claims:
        sec.claim(claim)
    sec.save()


def test_claim_needs_a_verdict_or_a_valid_state() -> None:
    with pytest.raises(ValueError, match="not one of"):
        Claim("HET", "c", "1x [P]", "1x", "toy")
    with pytest.raises(ValueError, match="not one of"):
        Claim("HET", "c", "1x [P]", "1x", "toy", state="holds")
    row = Claim("HET", "c", "2x [P]", "2x", "toy", state="reproduced", rule="by hand")
    assert (row.state, row.rule) == ("reproduced", "by hand")


def test_index_opens_with_counts_then_claims_then_sections(tmp_path: Path,
                                                          test_register: reg.Register) -> None:
    reports = tmp_path / "reports"
    sec = Section("demo", "Demo", reports / "demo")
    _measure_all(sec, a=2.81, b=[6.0, 6.2, 6.4], c=0.9)
    sec.save()
    (tmp_path / "p.yaml").write_text("seed: 0\n")
    text = build(reports, ["demo"], tmp_path / "p.yaml", tmp_path)
    counts, rules, claims, sections = (text.index("## Verdicts"), text.index("verdict rules"),
                                       text.index("## Claims"), text.index("## Sections"))
    assert counts < rules < claims < sections < text.index("## Provenance")
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in text[counts:rules].splitlines()[2:] if line.startswith("|")]
    assert rows[0][:4] == ["verdict", "measurements", "HET", "ESD"]
    assert [r[:4] for r in rows[2:]] == [
        ["reproduced", "1", "1", "0"], ["direction only", "1", "1", "0"], ["tie", "0", "0", "0"],
        ["modelled", "0", "0", "0"], ["contradicted", "1", "0", "1"],
        ["not comparable", "1", "0", "1"],
        ["not built", "0", "0", "0"], ["**total**", "**4**", "2", "2"]]
    for state in verdict.STATES:
        assert f"| {state} |" in text[counts:rules]
        assert f"- **{state}**:" in text[rules:claims]
    header = [h.strip() for h in text[claims:].split("\n")[4].strip("|").split("|")]
    assert header == ["paper", "claim", "paper value", "ours", "verdict", "holds", "details"]
    assert "- [Demo](demo/README.md): 3 claims (1 reproduced, 1 direction only, " \
           "1 contradicted)" in text
    assert "[`reports/notebooks/demo.ipynb`](notebooks/demo.ipynb)" in text


def _claims_table(text: str) -> list[str]:
    block = text[text.index("## Claims"):text.index("## Sections")]
    return [line for line in block.splitlines() if line.startswith("|")]


def test_long_cells_are_clipped_behind_the_link(tmp_path: Path,
                                                test_register: reg.Register) -> None:
    long = "word " * 400
    reports = tmp_path / "reports"
    sec = Section("demo", "Demo", reports / "demo")
    _measure_all(sec)
    sec.claims[0].measured = "2.81x " + long + "| a pipe"
    sec.claims[0].setting = "setting " + long
    sec.save()
    (tmp_path / "p.yaml").write_text("seed: 0\n")
    text = build(reports, ["demo"], tmp_path / "p.yaml", tmp_path)
    table = _claims_table(text)
    assert len(table) == 6 and max(map(len, table)) <= ROW_WIDTH
    assert "word\u2026" in table[2]
    body = (reports / "demo" / PAGE_FILE).read_text()
    assert long.strip() + " | a pipe" in body  # the page keeps the measurement in full
    assert clip("a b `code span` c", 12) == "a b\u2026" and clip("short", 5) == "short"
    assert len(clip("x" * 50, 10)) == 10


def test_index_of_the_committed_sections(tmp_path: Path) -> None:
    """The committed sections give a one-screen index: small, narrow claim rows, params linked,
    every linked page present, the same bytes twice."""
    from workbench.config import load

    if not (REPO_ROOT / "params.yaml").exists():
        pytest.skip("no params.yaml (make params writes it)")
    names = list(load(params=REPO_ROOT / "params.yaml").pipeline.notebooks)
    committed = REPO_ROOT / "reports"
    if not all((committed / n / SECTION_FILE).exists() for n in names):
        pytest.skip("the committed report sections are not in this checkout")
    reports = tmp_path / "reports"
    for name in names:
        (reports / name).mkdir(parents=True)
        shutil.copy(committed / name / SECTION_FILE, reports / name / SECTION_FILE)
    params = tmp_path / "params.yaml"
    shutil.copy(REPO_ROOT / "params.yaml", params)
    pages = write(reports, names, params, tmp_path)
    assert sorted(p.parent.name for p in pages) == sorted(names)  # none existed: all written
    first = (reports / "README.md").read_bytes()
    text = first.decode()
    assert len(first) < 40_000
    assert max(map(len, _claims_table(text))) <= ROW_WIDTH
    assert "[`params.yaml`](../params.yaml)" in text
    embedded = {line for line in set(params.read_text().splitlines()) & set(text.splitlines())
                if len(line.strip()) > 20}
    assert not embedded and "```yaml" not in text  # the params file is linked, not embedded
    assert str(tmp_path) not in text and str(REPO_ROOT) not in text
    links = re.findall(r"\]\(([\w.-]+/README\.md)(?:#([\w-]+))?\)", text)
    assert {target for target, _ in links} == {f"{n}/{PAGE_FILE}" for n in names}
    for target, anchor in links:  # every anchor lands: a claim's heading, an item's anchor
        body = (reports / target).read_text()
        assert not anchor or (f"### Claim {anchor.split('-')[1]}\n" in body
                              if anchor.startswith("claim-") else f'<a id="{anchor}"></a>' in body)
    assert write(reports, names, params, tmp_path) == []  # pages up to date: untouched
    assert (reports / "README.md").read_bytes() == first  # deterministic
    csv = pd.read_csv(reports / "claims.csv")
    assert list(csv.columns) == CLAIM_COLUMNS
    assert len(csv) == len(collect(load_sections(reports, names)))


def test_report_refuses_a_section_older_than_the_results_it_read(
        tmp_path: Path, test_register: reg.Register) -> None:
    reports = tmp_path / "reports"
    sec = Section("demo", "Demo", reports / "demo")
    _measure_all(sec)
    sec.save()
    path = reports / "demo" / SECTION_FILE
    saved = json.loads(path.read_text())
    saved["lineage"]["outputs"] = [{"path": "results/s/toy", "md5": "a" * 32 + ".dir",
                                    "stage": "s", "current": True}]
    path.write_text(json.dumps(saved))
    (tmp_path / "p.yaml").write_text("seed: 0\n")
    lock = "schema: '2.0'\nstages:\n  s:\n    cmd: x\n    outs:\n    - path: results/s/toy\n"
    (tmp_path / "dvc.lock").write_text(lock + f"      md5: {'a' * 32}.dir\n")
    write(reports, ["demo"], tmp_path / "p.yaml", tmp_path)  # the hash it read: current
    (tmp_path / "dvc.lock").write_text(lock + f"      md5: {'b' * 32}.dir\n")
    with pytest.raises(CatalogueError, match=r"reports/demo read results/s/toy \(read at a{12}, "
                                             r"dvc.lock now b{12}\): rerun its notebook \(dvc "
                                             r"repro notebook@demo\)"):
        write(reports, ["demo"], tmp_path / "p.yaml", tmp_path)


def test_report_writes_metrics_curves_and_maps(tmp_path: Path,
                                               test_register: reg.Register) -> None:
    reports = tmp_path / "reports"
    sec = Section("demo", "Demo", reports / "demo")
    _measure_all(sec)
    sec.save()
    (tmp_path / "p.yaml").write_text("seed: 0\n")
    write(reports, ["demo"], tmp_path / "p.yaml", tmp_path)
    metrics = json.loads((reports / "claims_metrics.json").read_text())
    assert metrics["register_version"] == 7
    assert metrics["counts"] == {"reproduced": 1, "direction_only": 1, "tie": 0,
                                 "modelled": 0, "contradicted": 1, "not_comparable": 1,
                                 "not_built": 0}
    assert metrics["claims"]["het.b"]["seeds"] == 3 and metrics["claims"]["het.b"]["reproduced"]
    curve = pd.read_csv(reports / "claims_curves" / "het.a--knob.csv")
    assert list(curve.columns) == ["value", "measured", "state"] and len(curve) == 3
    assert sorted(p.name for p in (reports / "verdict_maps").iterdir()) == ["ESD.png",
                                                                            "HET.png"]
    csv = pd.read_csv(reports / "claims.csv")
    assert list(csv["key"]) == ["het.a", "het.b", "esd.c", "esd.nc"]  # the register's order
    assert csv.loc[3, "verdict"] == "not comparable (our formalisation)"


def _twice(sec: Section) -> None:
    _measure_all(sec)
    sec.measure("het.a", text="again", setting="another dataset", values=[3.0])


def _one_short(sec: Section) -> None:
    sec.measure("het.a", text="-", setting="toy", values=[2.0])


def _unknown_key(sec: Section) -> None:
    sec.claim(Claim("HET", "a", "8.2x [P]", "2.81x", "toy", verdict.factor(2.81, 8.2),
                    key="het.typo"))


@pytest.mark.parametrize(("rows", "error"), [
    (_twice, r"two or more rows for one claim: het\.a"),
    (_one_short, r"het\.b .*notebooks/demo\.py"),
    (_unknown_key, "het.typo")], ids=["two rows", "a missing row", "an unknown key"])
def test_rows_that_disagree_with_the_register_are_an_error(
        tmp_path: Path, test_register: reg.Register, rows: Any, error: str) -> None:
    reports = tmp_path / "reports"
    sec = Section("demo", "Demo", reports / "demo")
    rows(sec)
    sec.save()
    with pytest.raises(CatalogueError, match=error):
        collect(load_sections(reports, ["demo"]))


def test_report_rejudges_from_the_register(tmp_path: Path, test_register: reg.Register,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    reports = tmp_path / "reports"
    sec = Section("demo", "Demo", reports / "demo")
    _measure_all(sec)
    sec.save()
    # a new register version moves the paper's value: the stored rows are judged again
    changed = reg.parse(TEST_REGISTER.replace("rule: {kind: factor, paper: 8.2}\n    assumed",
                                              "rule: {kind: factor, paper: 3.0}\n    assumed"))
    claims = collect(load_sections(reports, ["demo"]), changed)
    assert claims[0]["key"] == "het.a" and claims[0]["state"] == "reproduced"


def test_package_register_is_consistent() -> None:
    register = reg.load()
    keys = register.keys()
    assert len(keys) == len(set(keys)) and register.version >= 1
    for e in register.entries:
        assert e.key.split(".")[0] == e.paper.lower()
        assert ("[P" in e.paper_value) or ("[A]" in e.paper_value)
        assert ("[A]" in e.paper_value) == e.formalisation
        if e.kind != "not_comparable":
            assert e.assumed, f"{e.key} names no assumed parameter"
    # AUC, time-to-target and wall-clock claims run at least 3 seeds (HET averaged 5 runs)
    assert register["het.table1_time_to_target"].seeds == 3  # the long runs (issue 49)
    assert register["het.table2_staleness"].seeds == 3
    assert all(register[k].seeds >= 3 for k in ("esd.speedup", "recd.train",
                                                "recd.preprocess"))


@pytest.mark.parametrize(("text", "match"), [
    ("claims: [{key: x}]", "missing field"),
    ("version: 1\nclaims: 3", "a list 'claims'"),
    ("claims: [\n  - {key: a", "line"),
])
def test_bad_register_is_a_one_line_error(text: str, match: str) -> None:
    with pytest.raises(reg.RegisterError, match=match) as err:
        reg.parse(text)
    assert "\n" not in str(err.value)


def test_bad_rule_or_range_names_the_claim() -> None:
    bad_rule = TEST_REGISTER.replace("rule: {kind: factor, paper: 8.2}\n    assumed",
                                     "rule: {kind: factor, paper: 1.0}\n    assumed")
    with pytest.raises(reg.RegisterError, match="claim 'het.a': rule"):
        reg.parse(bad_rule)
    bad_range = TEST_REGISTER.replace("committed: 1, range: [1, 4]", "committed: 9, range: [1, 4]")
    with pytest.raises(reg.RegisterError, match="committed 9 lies outside the range"):
        reg.parse(bad_range)
    twice = TEST_REGISTER.replace("key: het.b", "key: het.a")
    with pytest.raises(reg.RegisterError, match="duplicate key"):
        reg.parse(twice)


def test_an_entry_names_the_register_version_that_rewrote_it() -> None:
    """An entry's ``version`` (default 1) is the claims table's ``register`` column, never above
    the register's own; every HET entry was rewritten at v2 or later (issue 49: the paper's
    setting; v3: the long runs; v7: Fig. 8 at the paper's scale)."""
    register = reg.parse(TEST_REGISTER)
    assert register["het.a"].register == "v1"
    rewritten = reg.parse(TEST_REGISTER.replace("    paper_setting: the paper's\n",
                                                "    paper_setting: the paper's\n"
                                                "    version: 7\n", 1))
    assert rewritten["het.a"].register == "v7"
    for bad, match in (("version: 8", "above the register's"), ("version: 0", ">= 1")):
        with pytest.raises(reg.RegisterError, match=match):
            reg.parse(TEST_REGISTER.replace("    paper_setting: the paper's\n",
                                            f"    paper_setting: the paper's\n    {bad}\n", 1))
    committed = reg.load()
    assert committed.version >= 4
    assert {e.register for e in committed.entries if e.paper == "HET"} == {"v2", "v3", "v7"}


def test_a_value_from_a_time_model_is_modelled_never_reproduced() -> None:
    """An entry with ``evidence: modelled`` gets the state ``modelled`` whatever its rule gives
    (the rule's outcome on the model stays in the text), its verdict-map cells too; the
    committed claims table has no reproduced row among such entries (issue 50)."""
    from workbench.report import verdict_map

    text = TEST_REGISTER.replace("    paper_setting: the paper's\n",
                                 "    paper_setting: the paper's\n    evidence: modelled\n", 1)
    entry = reg.parse(text)["het.a"]
    assert entry.modelled and reg.judge(entry, {"values": [8.0]}).state == "reproduced"
    row = measured_claim(entry, text="8x", setting="s", measurement={"values": [8.0]},
                                  conditions={"knob": [{"value": 1, "values": [8.0]}]})
    assert row.state == "modelled"
    assert "on the time model, reproduced" in row.rule
    assert row.holds.startswith("on the time model: reproduced")
    cells = verdict_map.rows_of([asdict(row) | {"state": "modelled"}], reg.parse(text), "HET")
    assert {state for _, c in cells for _, state, _ in c} == {"modelled"}
    with pytest.raises(reg.RegisterError, match="evidence 'guessed' is not one of"):
        reg.parse(text.replace("evidence: modelled", "evidence: guessed"))
    table = pd.read_csv(REPO_ROOT / "reports" / "claims.csv").set_index("key")
    modelled = [e.key for e in reg.load().entries if e.modelled]
    assert {"hotline.speedup", "hotline.v1_hybrid", "flexshard.comm_latency"} <= set(modelled)
    assert set(table.loc[modelled, "state"]) == {"modelled"}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                   check=True, capture_output=True)


def test_dirty_sources_ignore_generated_outputs(tmp_path: Path,
                                               test_register: reg.Register) -> None:
    assert _generated("results/x.csv") and _generated("dvc.lock")
    assert not _generated("dvc.yaml") and not _generated("resultsx.py")
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    for rel in ("src.py", "results/a.csv", "reports/README.md", "dvc.lock", "params.yaml"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("0\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "init")
    for rel in ("results/a.csv", "reports/README.md", "dvc.lock", "params.yaml"):
        (repo / rel).write_text("1\n")
    (repo / ".gitignore").write_text("ignored.py\n")
    _git(repo, "add", ".gitignore")
    _git(repo, "commit", "-q", "-m", "ignore")
    (repo / "ignored.py").write_text("1\n")
    (repo / "results" / "new.csv").write_text("1\n")
    assert dirty_sources(repo) == []
    (repo / "untracked.py").write_text("1\n")
    assert dirty_sources(repo) == ["untracked.py"]  # a new module changes what ran
    (repo / "untracked.py").unlink()
    (repo / "src.py").write_text("1\n")
    assert dirty_sources(repo) == ["src.py"]
    sec = Section("demo", "Demo", repo / "reports" / "demo")
    _measure_all(sec)
    sec.save()
    text = build(repo / "reports", ["demo"], repo / "params.yaml", repo)
    assert text.startswith("# Reproduction report\n\n> **WARNING: built from a working tree")
    assert "1 modified sources" in text and "\n- `src.py`\n" in text
    _git(repo, "commit", "-q", "-am", "src")
    text = build(repo / "reports", ["demo"], repo / "params.yaml", repo)
    assert "WARNING" not in text
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert f"Built from commit `{head}`" in text


def test_unknown_git_state_is_flagged(tmp_path: Path) -> None:
    assert dirty_sources(tmp_path / "nowhere") is None


def test_sections_without_states_ask_for_a_rerun(tmp_path: Path,
                                                 test_register: reg.Register) -> None:
    _demo(tmp_path, [])
    path = tmp_path / "demo" / "section.json"
    saved = json.loads(path.read_text())
    saved["claims"] = [{"paper": "HET", "claim": "c", "paper_value": "1", "measured": "1",
                        "setting": "s", "holds": True, "note": ""}]
    path.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="demo .*rerun their notebook stage"):
        collect(load_sections(tmp_path, ["demo"]))


def _entry(rule: dict, key: str = "het.x") -> reg.Entry:
    return reg.Entry(key, "HET", "c", "p", "paper", "s", {}, {}, "demo", 1, rule)


@pytest.mark.parametrize(("rule", "payload", "expected"), [
    ({"kind": "factor", "paper": 8.2}, {"values": [2.7]}, ("2.70x", reg.UNDER)),
    ({"kind": "factor", "paper": 8.2}, {"values": [9.0, 11.0]}, ("10.00x", reg.OVER)),
    ({"kind": "factor", "paper": [2.0, 3.0]}, {"values": [2.5]}, ("2.50x", reg.AT)),
    ({"kind": "factor", "paper": 0.5}, {"values": [0.4]}, ("0.40x", reg.OVER)),  # below 1x
    ({"kind": "factor", "paper": 0.5}, {"values": [1.2]}, ("1.20x", reg.UNDER)),  # wrong side
    ({"kind": "percent", "paper": 0.76, "baseline": 0.5}, {"values": [0.703]},
     ("70.3%", reg.UNDER)),
    ({"kind": "less", "paper_gap": [1, 8]}, {"a": [0.2], "b": [0.42]}, ("+22 pts", reg.OVER)),
    ({"kind": "close", "tolerance": 2.0}, {"a": [0.2], "b": [0.21]}, ("1 pts", "")),
    ({"kind": "decline", "paper": [0.80, 0.78]}, {"values": [[0.80, 0.79]]}, ("1 pts", reg.UNDER)),
    ({"kind": "factor", "paper": 8.2}, {"values": None}, ("-", "")),
])
def test_reading_says_the_value_and_its_side_of_the_paper(rule, payload, expected) -> None:
    assert reg.reading(_entry(rule), payload) == expected


def test_verdict_map_cells_carry_value_side_and_a_measured_committed_point() -> None:
    from workbench.report import verdict_map

    register = reg.parse(TEST_REGISTER)
    points = [{"value": 4, "values": [9.0]}, {"value": 1, "values": [2.0]},
              {"value": 0.3, "values": [3.0], "committed": True}]
    claims = [asdict(measured_claim(register["het.a"], text="2x", setting="-",
                                    measurement={"values": [2.0]},
                                    conditions={"knob": points})),
              asdict(measured_claim(register["het.b"], text="8.2x", setting="-",
                                    measurement={"values": [8.0, 8.4, 8.2]}, conditions={}))]
    assert [c["state"] for c in claims] == ["direction only", "reproduced"]
    (_, knob), (_, alone) = verdict_map.rows_of(claims, register, "HET")  # as recorded
    # sorted by value; the register's committed 1 and the point marked committed are outlined
    assert [(text, committed) for text, _, committed in knob] == [
        ("0.3\n3.00x v", True), ("1\n2.00x v", True), ("4\n9.00x ^", False)]
    assert alone == [("committed\n8.20x =", "reproduced", True)]


def test_a_curve_file_name_is_one_file() -> None:
    """An assumed parameter's name becomes one file name (a ``/`` made a folder)."""
    assert curve_name("NVLink/NIC ratio") == "NVLink_NIC_ratio"
    assert curve_name("slow-node NIC speed") == "slow-node_NIC_speed"
    assert curve_name("per-row cost (us)") == "per-row_cost_us_"


def test_the_index_rows_of_similar_claims_stay_distinguishable() -> None:
    from workbench.report.index import CELL_WIDTHS, clip_claim

    long = ("Cache s=100 cuts embedding communication time against Hybrid without cache at "
            "1 Gb/s (WDL; Fig. 7a; the 'up to 88% less embedding communication' headline)")
    assert clip_claim(long, 80).endswith("… (WDL; Fig. 7a)") and len(clip_claim(long, 80)) <= 80
    assert clip_claim("short (x)", 80) == "short (x)"
    from workbench.claims.counting import counted, shared_with, variants

    rows = pd.read_csv(REPO_ROOT / "reports" / "claims.csv").to_dict("records")
    groups = shared_with(rows)  # claims read from one measurement share one row
    named = [c["claim"] if len(groups[c["key"]]) == 1 else
             f"{variants([g['key'] for g in groups[c['key']]])}: {c['claim']}"
             for c in counted(rows)]
    assert any(len(g) > 1 for g in groups.values())  # Fig. 7a's three models: one row
    cells = [clip_claim(c, CELL_WIDTHS["claim"]) for c in named]
    assert len(set(cells)) == len(cells)  # every row of the index tells its claim apart
    index = (REPO_ROOT / "reports" / "README.md").read_text()
    assert all(f"| {c} |" in index for c in cells if "|" not in c)


def test_every_measured_claim_of_the_index_links_a_figure_or_table() -> None:
    index = (REPO_ROOT / "reports" / "README.md").read_text()
    rows = [line for line in index.splitlines() if "README.md#claim-" in line]
    assert rows and all("· [fig](" in r or "· [table](" in r for r in rows), \
        [r[:80] for r in rows if "· [" not in r]


def test_a_row_no_section_measures_links_its_reason() -> None:
    """The committed index: every claims row links either its claim on a section page or
    (*why*) the register's reason, which is on the page under that anchor."""
    import re

    from workbench.utils.paths import REPO_ROOT

    page = (REPO_ROOT / "reports" / "README.md").read_text()
    claims_part = page.split("## Claims", 1)[1].split("\n## ", 1)[0]
    table = [line for line in claims_part.splitlines()
             if line.startswith("| ") and not line.startswith(("| paper |", "| :--"))]
    assert table, "no claims table"
    for line in table:  # every row links its claim's page or its reason
        assert "README.md#claim-" in line or "](#why-" in line, line
    whys = re.findall(r"\]\(#(why-[\w-]+)\)", "\n".join(table))
    claims = pd.read_csv(REPO_ROOT / "reports" / "claims.csv")
    assert whys, "no row links a reason"
    for anchor in whys:
        assert f'<a id="{anchor}"></a>' in page, anchor
    assert len(whys) == len({k for k in claims[claims["state"] == "not comparable"]["key"]
                             if f"why-{k.replace('.', '-')}" in whys})


def test_a_page_shows_a_repeated_setting_once() -> None:
    """A setting (or assumption) several claim cards share is written on the first card; the
    others link it, as a figure's setting another figure repeats links the first."""
    from workbench.report.page import page

    claim = {"paper": "HET", "claim": "c", "paper_value": "1x", "measured": "1x",
             "verdict": "reproduced", "state": "reproduced", "rule": "r",
             "setting": "WDL on a long run of many words", "assumed": "speed 0.5-2x"}
    figure = {"kind": "figure", "file": "a.png", "caption": "A", "setting": "one epoch",
              "claims": [1]}
    section = {"name": "toy", "title": "Toy", "intro": "", "lineage": {},
               "claims": [claim, {**claim, "key": "x"}, {**claim, "setting": "other"}],
               "items": [figure, {**figure, "file": "b.png", "caption": "B"}]}
    text = page(section)
    assert text.count("WDL on a long run of many words") == 1
    assert text.count("- **Setting:** as [claim 1](#claim-1)") == 1
    assert "- **Setting:** other" in text
    assert text.count("speed 0.5-2x") == 1 and text.count("**Assumed:** as [claim 1]") == 2
    assert text.count("*Setting:* one epoch") == 1 and "*Setting:* as [above](#fig-a)" in text
