"""``envtool diff A B``: two environments compared, A the reference."""

from __future__ import annotations

from envtool import environments
from envtool.errors import InputError
from envtool.judge import comparison
from envtool.judge.findings import Severity, exit_code
from envtool.report import results


def run(
    a: str, b: str, platform: str, fmt: str, show_all: bool = False, environment: str = "default"
) -> int:
    """0 identical, 1 any difference (warnings included); a problem inside A or inside B
    alone is listed apart and changes neither. A spec list is met or not by the other side."""
    left = environments.load(a, platform, environment)
    right = environments.load(b, platform, environment)
    if left.specs and right.specs:
        raise InputError(f"{b}: two spec lists: compare each with a lock, an export or a prefix")
    compared = comparison.compare(left, right)
    results.diff_result(left, right, compared, fmt, show_all)
    return exit_code(compared.differences, fail_at=Severity.INFO)
