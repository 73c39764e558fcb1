"""``envtool diff A B``: two environments compared, A the reference."""

from __future__ import annotations

from envtool import environments
from envtool.judge import packages
from envtool.judge.findings import Severity, exit_code
from envtool.report import results


def run(a: str, b: str, platform: str, fmt: str, show_all: bool = False) -> int:
    """0 identical, 1 any difference (warnings included)."""
    left, right = environments.load(a, platform), environments.load(b, platform)
    findings = packages.diff(left, right, where="B")  # the report's title names B's path
    results.diff_result(left, right, findings, fmt, show_all)
    return exit_code(findings, fail_at=Severity.INFO)
