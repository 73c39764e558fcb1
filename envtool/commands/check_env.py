"""``envtool check PATH...``: the inconsistencies inside each environment, on its own.

Each path (a lockfile, an export, a prefix, a probe document) is read as one environment and
judged by judge/consistency.py; nothing is compared with another file.
"""

from __future__ import annotations

from envtool import environments
from envtool.judge import consistency
from envtool.judge.findings import exit_code
from envtool.report import results


def run(paths: tuple[str, ...], platform: str, fmt: str, environment: str = "default") -> int:
    """0 every environment consistent, 1 any inconsistency (2: unreadable, raised)."""
    envs = [environments.load(p, platform, environment) for p in paths]  # bad input stops here
    checked = [(env, consistency.check(env, where=env.source)) for env in envs]
    results.consistency_result(checked, fmt)
    return exit_code([f for _, found in checked for f in found])
