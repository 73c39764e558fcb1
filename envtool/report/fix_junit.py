"""``envtool fix --format junit``: one testcase per node (classname its host): without
``--apply`` a node that differs from the lock is a failure naming its changes; with it, a node
is a failure when its fix failed or its verify afterwards still shows drift."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping

from envtool.fix.plan import still_drifted
from envtool.protocol.fix_record import FixRecord
from envtool.protocol.verify_report import VerifyDocument
from envtool.report import junit
from envtool.report.text import visible


def _changes(rec: FixRecord) -> str:
    return "\n".join(f"{c.action} {c.before or c.after}" + (f" -> {c.after}" if
                     c.action == "replace" else "") for c in rec.changes)  # fmt: skip


def render(
    plans: Mapping[str, FixRecord], done: Mapping[str, FixRecord], after: VerifyDocument | None
) -> str:
    """``<testsuites>`` with a testcase per node."""
    suite = ET.Element("testsuite", name="envtool fix")
    left = set(still_drifted(after)) if after is not None else set()
    failures = 0
    for host, rec in plans.items():
        case = ET.SubElement(suite, "testcase", classname=visible(host), name="fix")
        result = done.get(host)
        if rec.error or (result is not None and result.error):
            message, kind = visible(result.error if result and result.error else rec.error), "error"
        elif after is None and rec.changes:
            message, kind = f"differs from the lock: {len(rec.changes)} change(s)", "drift"
        elif host in left:
            message, kind = "still differs from the lock after the fix", "drift"
        else:
            ET.SubElement(case, "system-out").text = (
                f"{result.prefix} -> {result.generation} ({result.switch})" if result is not None
                and result.applied else "matches the lock"
            )  # fmt: skip
            continue
        failure = ET.SubElement(case, "failure", type=kind, message=message)
        failure.text = visible(_changes(rec))
        failures += 1
    return junit.text(suite, len(plans), failures)
