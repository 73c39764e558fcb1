"""docs/findings.md is the table of judge/rules.py, every kind in it once."""

from __future__ import annotations

from pathlib import Path

from envtool.judge.kinds import Kind
from envtool.judge.rules import RULES
from envtool.report.findings_doc import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "findings.md"


def test_every_kind_has_one_rule() -> None:
    assert set(RULES) == set(Kind)


def test_the_docs_page_is_generated_from_the_table() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), (
        "regenerate: python -m envtool.report.findings_doc > docs/findings.md"
    )
    rows = [ln for ln in DOC.read_text().splitlines() if ln.startswith("| `")]
    assert sorted(r.split("`")[1] for r in rows) == sorted(k.value for k in Kind)
