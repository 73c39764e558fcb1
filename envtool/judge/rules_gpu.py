"""The rows of the findings table (rules.py) about the cards under the environment.
Same columns as rules.py: check, severity, lenient; cause; fix line; docs' fix; what it
explains away."""

from __future__ import annotations

from envtool.judge.kinds import Kind, Rule

# fmt: off
GPU_RULES: dict[Kind, Rule] = {
}
# fmt: on
