"""A doctor run as the history store and the metrics take a run (pure; history/record.py
records it): this machine one host; each step that failed or warned one finding, of kind
``doctor-<step>`` (its subject the step, its actual the step's summary, its hint the fix
line); each step that ran (not skipped) one check (history/scope.py), so a step that passes
tonight clears last night's failure of it and a step that was skipped says nothing. A doctor
run says nothing of verify's findings on the same host, nor a verify of the doctor's."""

from __future__ import annotations

from collections.abc import Sequence

from envtool.history.scope import DOCTOR
from envtool.protocol.verify_report import FindingEntry, HostEntry, VerifyDocument
from envtool.report.doctor import FAIL, SKIP, WARN, Step


def document(
    steps: Sequence[Step], host: str, lockfile: str, lock_sha256: str, seconds: float
) -> tuple[VerifyDocument, dict[str, frozenset[str]]]:
    """The run's report and the checks it made on ``host``."""
    found = tuple(
        FindingEntry(DOCTOR + s.name, "error" if s.status == FAIL else "warning", s.name, "",
                     s.summary, s.fix, (host,))
        for s in steps if s.status in (FAIL, WARN)
    )  # fmt: skip
    entry = HostEntry(host, True, None, seconds, (), None, None, None)
    skipped = tuple(f"{s.name}: {s.summary}" for s in steps if s.status == SKIP)
    failed = any(s.status == FAIL for s in steps)
    doc = VerifyDocument(lockfile, seconds, not failed, (entry,), found, unchecked=skipped,
                         lock_sha256=lock_sha256 or None)  # fmt: skip
    made = frozenset({"reachable"} | {DOCTOR + s.name for s in steps if s.status != SKIP})
    return doc, {host: made}
