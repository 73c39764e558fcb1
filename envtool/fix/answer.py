"""A fix's outcome as the node's answer (protocol/fix_record.py's ``envtool.fix-node/1``)."""

from __future__ import annotations

from envtool.fix.apply import FixOutcome
from envtool.models import Package
from envtool.protocol.fix_record import ChangeEntry, FixRecord, failed


def _label(p: Package | None) -> str:
    return p.label() if p is not None else ""


def record(outcome: FixOutcome | None, prefix: str, error: str = "", stamp: str = "") -> FixRecord:
    """The answer for ``outcome`` (None with ``error``: nothing was done)."""
    if outcome is None:
        return failed(prefix, error)
    changes = tuple(
        ChangeEntry(c.action, c.name, c.manager, _label(c.before), _label(c.after))
        for c in outcome.plan.changes
    )  # fmt: skip
    kept = tuple(f"{name} (pids {', '.join(map(str, pids))})" if pids else name
                 for name, pids in outcome.kept_in_use)  # fmt: skip
    return FixRecord(str(outcome.prefix), changes, outcome.applied, outcome.generation,
                     outcome.switch, outcome.removed, kept, outcome.unread, error,
                     stamp, outcome.source)  # fmt: skip
