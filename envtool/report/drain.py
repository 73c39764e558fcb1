"""The one line a Slurm prolog drains a node with (``preflight --quick --drain-reason``):
``scontrol update nodename=N state=drain reason="..."``."""

from __future__ import annotations

from collections.abc import Iterable

from envtool.judge.findings import Finding, Kind, Severity
from envtool.report.gpu_labels import busy_pids, drain_reason, drain_text


def _said(f: Finding) -> str:
    if f.kind is Kind.GPU_BUSY:  # the pids, so the admin knows what to stop
        pids = ",".join(busy_pids(f))
        return f"{f.kind.value} {f.subject} pid {pids}" if pids else f"{f.kind.value} {f.subject}"
    return f"{f.kind.value} {f.subject}"


def reason(findings: Iterable[Finding]) -> str:
    """The node's drain reason: a hardware fault first (report/gpu_labels.py), else the first
    error of any kind; "" when nothing is an error. At most 80 printable ASCII characters."""
    found = list(findings)
    hardware = drain_reason(found)
    if hardware is not None:
        return hardware
    errors = [f for f in found if f.severity is Severity.ERROR]
    if not errors:
        return ""
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return drain_text(f"envtool: {_said(errors[0])}", more)
