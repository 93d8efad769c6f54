"""A section's page: the Markdown a notebook writes beside its ``section.json``, a pure
function of that file ([`page`][]), so the ``report`` stage rewrites a missing or outdated page
to the same bytes the notebook would have written ([`write_page`][]).

    section.json --page--> title, the claims in full (### Claim <n>), ## Results (figures,
                           tables, notes in the notebook's order, each with the files it is
                           drawn from), ## Provenance (commit, configuration digest, outputs)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workbench.claims.record import item_anchor, shown_in, verdict_text
from workbench.utils.errors import UserError
from workbench.utils.io import write_text

PAGE_FILE = "README.md"  # the section's page, beside its section.json
PAGE_MARK = "from the run outputs; do not edit."  # in every page a notebook writes


def claim_anchor(number: int) -> str:
    """The anchor of the ``number``-th claim (from 1) on its section's page, e.g. ``claim-3``:
    the slug Markdown renderers (GitHub, GitLab, VS Code) give its heading ``### Claim 3``."""
    return f"claim-{number}"


def _setting_once(item: Mapping[str, Any], shown: dict[str, str]) -> str:
    """A figure's or table's setting, or a link to the first item on the page with the same
    one (``shown``: setting -> that item's anchor, filled as the page is written)."""
    first = shown.setdefault(item["setting"], item_anchor(item))
    return item["setting"] if first == item_anchor(item) else f"as [above](#{first})"


def page(section: dict[str, Any]) -> str:
    """The Markdown page of one section, from its ``section.json`` contents alone.

    Title, a line linking the report's index and the notebook, the intro, every claim row in
    full (paper value, ours, verdict, rule, setting, note, catalogue key) under a heading
    ``### Claim <n>`` (anchor [`claim_anchor`][]), then under ``## Results`` the figures
    (relative image links), tables (Markdown, with a link to the CSV) and notes in the order
    the notebook added them. Links are relative to the section's folder, which sits one level
    under the repository root (``reports/<nb>/``, ``scratch/<nb>/``).

    Args:
        section: the loaded ``section.json`` (``name``, ``title``, ``intro``, ``items``,
            ``claims``).

    Returns:
        The page text; the same ``section`` always gives the same text.
    """
    name = section["name"]
    lines = [f"# {section['title']}", "",
             f"A section of the [reproduction report](../README.md), written by the notebook "
             f"[`notebooks/{name}.py`](../../notebooks/{name}.py) {PAGE_MARK}", ""]
    if section["intro"]:
        lines += [section["intro"], ""]
    claims = section["claims"]
    if claims:
        lines += ["## Claims", "",
                  "Paper values: [P] from the paper's full text, [A] from its abstract. The "
                  "verdict holds in the setting given; the rule says how it was decided "
                  "(`workbench/claims/verdict.py`).", ""]
        first: dict[tuple[str, str], int] = {}  # (field, text) -> the claim that shows it

        def once(field: str, text: str, number: int) -> str:
            """``text``, or a link to the earlier claim that shows the same (a long setting
            repeated on every card is shown once per page)."""
            text = _one_line(text)
            earlier = first.setdefault((field, text), number)
            return text if earlier == number else \
                f"as [claim {earlier}](#{claim_anchor(earlier)})"

        for number, c in enumerate(claims, 1):
            lines += [f"### Claim {number}", "", f"**{c['paper']}:** {_one_line(c['claim'])}",
                      "", f"- **Paper:** {_one_line(c['paper_value'])}",
                      f"- **Ours:** {_one_line(c['measured'])}",
                      f"- **Verdict:** {verdict_text(c)}"]
            if c.get("rule"):
                lines.append(f"- **Rule:** {_one_line(c['rule'])}")
            lines.append(f"- **Setting:** {once('setting', c['setting'], number)}")
            if c.get("seeds"):
                lines.append(f"- **Seeds:** {c['seeds']}")
            if c.get("assumed"):
                lines.append(f"- **Assumed:** {once('assumed', c['assumed'], number)}")
            if c.get("holds"):
                lines.append(f"- **Holds:** {_one_line(c['holds'])}")
            if c.get("note"):
                lines.append(f"- **Note:** {_one_line(c['note'])}")
            shown = shown_in(section, number)
            if shown:
                lines.append("- **Shown in:** " + ", ".join(
                    f"[{'figure' if i['kind'] == 'figure' else 'table'} "
                    f"*{_one_line(i['caption'])[:60].rstrip()}*](#{item_anchor(i)})"
                    for i in shown))
            if c.get("key"):
                lines.append(f"- **Register:** `{c['key']}` (`workbench/conf/claims.yaml`)")
            lines.append("")
    if section["items"]:
        lines += ["## Results", ""]
    found = section.get("lineage", {})
    shown_setting: dict[str, str] = {}  # an item's setting -> the first item showing it
    for item in section["items"]:
        if item["kind"] in ("figure", "table"):
            numbers = item.get("claims", [])
            lines += [f'<a id="{item_anchor(item)}"></a>', ""]
            if numbers:
                lines += ["*Shows " + ", ".join(f"[claim {n}](#{claim_anchor(n)})"
                                                for n in numbers) + ".*", ""]
        if item["kind"] == "figure":
            lines += [f"**{item['caption']}**", "", f"![{item['caption']}]({item['file']})", "",
                      f"*Setting:* {_setting_once(item, shown_setting)}", ""]
        elif item["kind"] == "table":
            lines += [f"**{item['caption']}** ([CSV]({item['file']}))", "", item["markdown"], ""]
            if item["setting"]:
                lines += [f"*Setting:* {_setting_once(item, shown_setting)}", ""]
        else:
            lines += [item["text"], ""]
        if "reads" in item:
            lines += [f"*Drawn from:* {drawn_from(item['reads'], found.get('outputs', []))}", ""]
    if found:
        lines += lineage_lines(found)
    return "\n".join(lines)


def _short(md5: str) -> str:
    return md5[:10] if md5 else "-"


def drawn_from(files: list[str], outputs: list[dict[str, Any]]) -> str:
    """One line naming an item's files, grouped by the stage output holding them, with the
    stage and the output's ``dvc.lock`` hash (a file no stage writes is named alone)."""
    if not files:
        return "no results file (the register's numbers or the notebook's own)"
    parts, left = [], list(files)
    for out in outputs:
        inside = [f for f in left if f.startswith(out["path"] + "/")]
        if inside:
            names = ", ".join(f"`{f[len(out['path']) + 1:]}`" for f in inside)
            parts.append(f"{names} of `{out['path']}` (stage `{out['stage']}`, dvc.lock "
                         f"`{_short(out['md5'])}`)")
            left = [f for f in left if f not in inside]
    parts += [f"`{f}` (no stage output)" for f in left]
    return "; ".join(parts)


def lineage_lines(found: dict[str, Any]) -> list[str]:
    """The page's ``## Provenance``: commit, configuration digest, the stage outputs read."""
    dirty = found.get("dirty")
    state = ("" if dirty == 0 else " (git state unknown)" if dirty is None
             else f" with {dirty} modified source(s)")
    sections = ", ".join(f"`{k}`" for k in found.get("config_sections", [])) or "all of it"
    lines = ["## Provenance", "",
             f"Drawn at commit `{found['commit']}`{state}"
             + (f"; configuration sha256 `{found['config_sha256']}` (over {sections})."
                if found.get("config_sha256") else "."), ""]
    if found.get("outputs"):
        lines += ["| stage output | stage | dvc.lock md5 | when drawn |",
                  "| --- | --- | --- | --- |"]
        lines += [f"| `{o['path']}` | `{o['stage']}` | `{_short(o['md5'])}` | "
                  f"{'as recorded' if o['current'] else 'differs from dvc.lock'} |"
                  for o in found["outputs"]]
        lines.append("")
    if found.get("also_read"):
        lines += ["Also read (for the claims and the text): "
                  + ", ".join(f"`{f}`" for f in found["also_read"]) + ".", ""]
    return lines


def write_page(out_dir: Path, section: dict[str, Any]) -> bool:
    """Write ``out_dir/README.md``, the [`page`][] of ``section``, unless it already holds
    exactly that text (an unchanged page keeps its file untouched).

    Returns:
        Whether the file was (re)written.

    Raises:
        UserError: ``out_dir`` holds a ``README.md`` (or a link) that no notebook wrote: it is
            never overwritten.
    """
    path = Path(out_dir) / PAGE_FILE
    text = page(section)
    if path.is_symlink() or path.exists():
        try:
            old = path.read_text(encoding="utf-8") if path.is_file() else ""
        except (OSError, UnicodeDecodeError):
            old = ""
        if old == text:
            return False
        if path.is_symlink() or PAGE_MARK not in old:
            raise UserError(f"{path} is not a page a notebook wrote (a file of yours?): it is "
                            f"left as it is; give out_dir a folder of its own, e.g. "
                            f"out_dir=scratch/{section.get('name', 'section')}")
    write_text(path, text)
    return True


def _one_line(text: str) -> str:
    """``text`` with its line breaks folded into spaces (one Markdown list item)."""
    return " ".join(str(text).split())
