"""The rows of the findings table (rules.py) about the network and the limits under the
environment. Same columns as rules.py: check, severity, lenient; cause; fix line; docs' fix; what it
explains away."""

from __future__ import annotations

from envtool.judge.kinds import Kind, Rule

# fmt: off
NETWORK_RULES: dict[Kind, Rule] = {
}
# fmt: on
