"""The one line a Slurm prolog drains a node with (``preflight --quick --drain-reason``):
``scontrol update nodename=N state=drain reason="..."``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import click

from envtool.judge.findings import Check, Finding, Kind, Severity
from envtool.judge.rules import check_of
from envtool.lock.names import why_bad_name
from envtool.report.gpu_labels import busy_pids, drain_reason, drain_text


def _subject(f: Finding) -> str:
    """A package finding's subject is a node's file text: said only when it is a package name
    (a record's ``name`` could read "all GPUs healthy" in the reason)."""
    if check_of(f.kind) is Check.LOCK and why_bad_name(f.subject):
        return "(not a package name)"
    return f.subject


def _said(f: Finding) -> str:
    if f.kind is Kind.TOO_FEW_GPUS:  # a reason, not a kind and a bare subject ("GPUs")
        digits = f.actual.split(" ", 1)[0] if f.actual[:1].isdigit() else "?"
        digits = digits if digits.isdigit() and len(digits) <= 4 else "?"
        return f"{f.kind.value}: {digits} GPUs, expected {f.expected}"
    said = f"{f.kind.value} {_subject(f)}"
    if f.kind is Kind.GPU_BUSY:  # the pids, so the admin knows what to stop
        pids = ",".join(busy_pids(f))
        return f"{said} pid {pids}" if pids else said
    return said


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


def show(findings: Iterable[Finding], not_judged: Sequence[str] = ()) -> None:
    """The drain reason on stdout (nothing when healthy), and on stderr what the GPU scope
    left unjudged (``--job-gpus``, ``--health``), for whoever runs it by hand."""
    line = reason(findings)
    if line:
        click.echo(line)
    for unjudged in not_judged:
        click.echo(f"envtool: not judged: {unjudged}", err=True)
