"""``envtool diff A B``: two environments compared, A the reference."""

from __future__ import annotations

from envtool import environments
from envtool.judge import comparison
from envtool.judge.findings import Severity, exit_code
from envtool.report import results


def run(a: str, b: str, platform: str, fmt: str, show_all: bool = False) -> int:
    """0 identical, 1 any difference (warnings included); a problem inside A or inside B
    alone is listed apart and changes neither."""
    left, right = environments.load(a, platform), environments.load(b, platform)
    compared = comparison.compare(left, right)
    results.diff_result(left, right, compared, fmt, show_all)
    return exit_code(compared.differences, fail_at=Severity.INFO)
