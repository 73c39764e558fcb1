"""``envtool diff``'s answer, pure: how B differs from A, kept apart from what is wrong inside
either one on its own (a file compared with itself is identical, whatever it holds)."""

from __future__ import annotations

from dataclasses import dataclass

from envtool.judge import consistency, packages, specs
from envtool.judge.findings import Finding, Kind
from envtool.models import Environment


@dataclass(frozen=True)
class Comparison:
    """The differences of B from A (the reference), and the problems inside A and inside B:
    only the differences decide ``identical`` and the exit code."""

    differences: tuple[Finding, ...]
    inside_a: tuple[Finding, ...]
    inside_b: tuple[Finding, ...]

    @property
    def identical(self) -> bool:
        """No package differs, whatever each side holds."""
        return not self.differences


def inside(env: Environment) -> list[Finding]:
    """The problems of one environment on its own: its inconsistencies (what ``envtool
    check`` reports) and pip distributions shadowing conda ones, each cause once (pip torch
    over conda pytorch is the two-torches finding, not also a pip-shadowing one)."""
    found = consistency.check(env)
    said = {f.subject for f in found if f.kind is Kind.TWO_TORCHES}
    return found + [f for f in packages.shadowing(env) if f.subject not in said]


def compare(a: Environment, b: Environment) -> Comparison:
    """``b`` against ``a``: fix lines say "in B" (the report names B's path once)."""
    if a.specs or b.specs:  # a spec list: which packages meet its specs (judge/specs.py)
        differences = specs.differences(a, b)
    else:
        differences = packages.differences(a, b, where="B")
    return Comparison(tuple(differences), tuple(inside(a)), tuple(inside(b)))
