"""A spec list's side of ``envtool diff``: each spec and the package of the other side that
meets it (the violated ones are findings, shown with the others)."""

from __future__ import annotations

from typing import Any

import click

from envtool.judge import specs
from envtool.models import Environment
from envtool.report.text import visible


def _outcomes(a: Environment, b: Environment) -> tuple[str, str, list[specs.Outcome]]:
    """(the spec list's side, the other side, each spec's outcome); no spec list: empty."""
    if a.specs:
        return "A", "B", specs.outcomes(a, b)
    if b.specs:
        return "B", "A", specs.outcomes(b, a)
    return "", "", []


def entries(a: Environment, b: Environment) -> list[dict[str, Any]]:
    """Each spec for JSON: as written, its line, met or why not, and the package it names."""
    side, _, found = _outcomes(a, b)
    return [
        {
            "side": side,
            "spec": o.requirement.text,
            "manager": o.requirement.manager,
            "line": o.requirement.line,
            "met": o.met,
            "why": o.why,
            "package": o.package.label() if o.package is not None else None,
        }
        for o in found
    ]


def summary(a: Environment, b: Environment) -> None:
    """``5 of 6 specs of A (PATH) met by B:`` then one line per spec met and its package."""
    side, other, found = _outcomes(a, b)
    if not found:
        return
    met = [o for o in found if o.met]
    source = a.source if side == "A" else b.source
    click.echo(visible(f"{len(met)} of {len(found)} specs of {side} ({source}) met by {other}"))
    for o in met:
        label = o.package.label() if o.package is not None else "?"
        click.echo(visible(f"  {o.requirement.text}: {label}"))
