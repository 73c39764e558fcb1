"""``envtool diff`` as people read it, in verify's one report style: a title line, then a block
per difference (``SEVERITY kind · package``, with expected (A's), found (B's) and the fix under
it), then the problems inside each input in blocks of their own. Folded at the terminal's width
(100 in a pipe), never cutting a package spec across lines: a grep of the output finds each."""

from __future__ import annotations

from envtool.judge import critical
from envtool.judge.comparison import Comparison
from envtool.judge.findings import Finding
from envtool.models import Environment
from envtool.report.labels import folded_text
from envtool.report.text import visible
from envtool.report.verdict_text import finding_block, plural
from envtool.report.verify import finding_entry


def _inside(
    a: Environment, b: Environment, c: Comparison
) -> list[tuple[str, tuple[str, ...], tuple[Finding, ...]]]:
    """The problems inside each input, as (label, paths, findings); one block when both
    inputs have the same ones (a file compared with itself)."""
    if c.inside_a and c.inside_a == c.inside_b:
        return [("A and B", tuple(dict.fromkeys((a.source, b.source))), c.inside_a)]
    sides = (("A", (a.source,), c.inside_a), ("B", (b.source,), c.inside_b))
    return [side for side in sides if side[2]]


def _blocks(found: tuple[Finding, ...] | list[Finding], width: int) -> list[str]:
    lines: list[str] = []
    for f in found:
        lines += ["", *finding_block(finding_entry(f), 0, None, width, whole=True)]
    return lines


def render(
    a: Environment, b: Environment, c: Comparison, show_all: bool = False, width: int = 100
) -> str:
    """The diff as text: what decides a DDP run first, the others counted per kind unless
    ``show_all``; then the problems inside A and inside B on their own."""
    # the title, each heading and the count are a line each, never folded: they name paths
    lines: list[str] = []
    if c.identical and not (a.specs or b.specs):
        lines.append(f"identical: {a.source} ({len(a.packages)} packages) and {b.source}")
    elif not c.identical:
        shown, folded = critical.split(c.differences, show_all, fold_errors=True)
        lines.append(f"{plural(len(c.differences), 'difference')}: A={a.source} (expected), "
                     f"B={b.source} (found)")  # fmt: skip
        lines += _blocks(shown, width)
        if folded:
            lines += ["", folded_text(folded)]
    for label, paths, found in _inside(a, b, c):
        lines += ["", f"inside {label} ({', '.join(paths)}): {plural(len(found), 'problem')}, "
                  f"not a difference (envtool check {' '.join(paths)})"]  # fmt: skip
        lines += _blocks(found, width)
    while lines and not lines[0]:
        lines.pop(0)
    return "".join(visible(line) + "\n" for line in lines)
