"""``envtool explain``'s report: the verdict line first (``cause: shm-small on node3 — ...
(job.log:1843)``), then one block per finding (verify's ``finding_block``) with its evidence
lines, what follows from it, and how each log was read; or the same as ``envtool.explain/1``
JSON (protocol/explain_report.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import PurePath

import click

from envtool.joblog.scan import Event, FileScan
from envtool.joblog.signs import Sign
from envtool.joblog.stream import LINE_CAP
from envtool.judge.explain import TIMEOUTS, Explained, JobVerdict, Status
from envtool.judge.explain_join import Joined
from envtool.judge.kinds import Kind
from envtool.judge.rules import RULES
from envtool.protocol import explain_report as er
from envtool.protocol.verify_report import FindingEntry
from envtool.report import console
from envtool.report import explain_words as words
from envtool.report.text import visible
from envtool.report.verdict_text import finding_block, fold, plural

MAX_SHOWN = 5  # evidence lines shown per finding in the text report (JSON: all it carries)
TEXT_CHARS = 240  # characters of an evidence line shown in the text report


def _evidence(e: Event) -> er.EvidenceEntry:
    return er.EvidenceEntry(visible(e.file), e.line, visible(e.text), words.where(e.origin))


def _lead_where(f: Explained) -> str:
    if f.lead.sign is Sign.HEADER:  # a host unlike the others: the finding names it
        return ", ".join(visible(h) for h in f.finding.hosts)
    said = words.where(f.lead.origin)
    return "the job" if said == words.NOT_ATTRIBUTED else said


def _hint(kind: Kind, subject: str) -> str:
    rule = RULES[kind]
    return rule.fix.replace("{subject}", subject) if rule.fix else rule.docs_fix


def _entry(f: Explained, verdict: JobVerdict) -> er.ExplainFinding:
    kind, lead = f.finding.kind, f.lead
    actual, needs = words.what(lead), words.cause_needs(kind, lead)
    if lead.sign is Sign.HEADER:
        actual, needs = words.differs(f.finding), ()
    elif kind is Kind.CAUSE_NOT_ESTABLISHED:
        needs = words.needs(lead.sign, verdict.silent, verdict.silent_on)
    elif kind is Kind.COLLECTIVE_TIMEOUT:
        waits = [e for e in f.evidence if e.sign in TIMEOUTS]
        actual = words.timeouts(waits, verdict.silent, verdict.silent_on)
        needs = ()  # the cause-not-established finding beside it says what would settle it
    else:
        context = [
            words.what(e) for e in f.evidence if e.sign is not lead.sign and e.line != lead.line
        ]
        actual += "".join(f"; {c}" for c in dict.fromkeys(context))
    hint = (
        "; ".join(needs) if kind is Kind.CAUSE_NOT_ESTABLISHED else _hint(kind, f.finding.subject)
    )
    entry = FindingEntry(
        kind.value,
        f.finding.severity.value,
        visible(f.finding.subject),
        "",
        actual,
        hint,
        tuple(visible(h) for h in f.finding.hosts),
    )
    evidence = tuple(_evidence(e) for e in f.evidence)
    return er.ExplainFinding(entry, _lead_where(f), needs, evidence, f.lines)


def _at(e: Event) -> str:
    return f"{visible(PurePath(e.file).name)}:{e.line}"


def _joined_cause(verdict: JobVerdict, joined: Sequence[Joined]) -> str | None:
    cause = next((j for j in joined if j.role == "cause"), None)
    if cause is None:
        return None
    f, first = cause.finding, verdict.findings[0]
    on = ", ".join(visible(h) for h in f.hosts)
    said = f"{f.subject}: {f.actual}" if f.actual else f.subject
    source = visible(PurePath(cause.report).name)
    return (
        f"cause: {f.kind} on {on} (from {source}) — {visible(said)}; the logs: "
        f"{words.what(first.lead)} ({_at(first.lead)})"
    )


def verdict_text(
    verdict: JobVerdict, scans: Sequence[FileScan], joined: Sequence[Joined] = ()
) -> str:
    """The one line a person reads first."""
    if (said := _joined_cause(verdict, joined)) is not None:
        return said
    if verdict.status is Status.NO_FAILURE or not verdict.findings:
        lines = sum(s.lines for s in scans)
        return (
            f"no failure in the logs: {plural(lines, 'line')} of {plural(len(scans), 'file')} read"
        )
    first = verdict.findings[0]
    header = first.lead.sign is Sign.HEADER
    said = words.differs(first.finding) if header else words.what(first.lead)
    if verdict.status is Status.DIFFERS:
        kind = first.finding.kind.value
        return f"no failure in the logs, but the hosts differ: {kind} — {said} ({_at(first.lead)})"
    if verdict.status is Status.CAUSE:
        kind = first.finding.kind.value
        return f"cause: {kind} on {_lead_where(first)} — {said} ({_at(first.lead)})"
    settle = words.needs(first.lead.sign, verdict.silent, verdict.silent_on)[0]
    return (
        f"cause not established: {said}, on {_lead_where(first)} ({_at(first.lead)}); to "
        f"settle it: {settle}"
    )


def _joined_entry(j: Joined) -> er.JoinedEntry:
    f = j.finding
    hosts = tuple(visible(h) for h in f.hosts)
    entry = replace(f, subject=visible(f.subject), actual=visible(f.actual),
                    expected=visible(f.expected), hosts=hosts)  # fmt: skip
    return er.JoinedEntry(j.role, visible(j.report), entry, j.unattributed)


def document(
    verdict: JobVerdict, scans: Sequence[FileScan], joined: Sequence[Joined] = ()
) -> er.ExplainDocument:
    """The report as data (what the text and the JSON both show)."""
    files = tuple(
        er.FileEntry(visible(s.path), s.lines, s.attributed, s.odd, s.cut_count) for s in scans
    )
    return er.ExplainDocument(
        verdict.status.value,
        verdict_text(verdict, scans, joined),
        files,
        tuple(_entry(f, verdict) for f in verdict.findings),
        tuple((s.value, n) for s, n in verdict.cascade),
        verdict.silent,
        LINE_CAP,
        tuple(_joined_entry(j) for j in joined),
    )


def _evidence_lines(f: er.ExplainFinding, width: int) -> list[str]:
    lines = []
    for e in f.evidence[:MAX_SHOWN]:
        text = e.text if len(e.text) <= TEXT_CHARS else e.text[:TEXT_CHARS] + "..."
        head = f"{PurePath(e.file).name}:{e.line}"
        who = "" if e.where == words.NOT_ATTRIBUTED else f" [{e.where}]"
        lines += fold(f"{head}{who}: {text}", width, " " * 4 + "line      ", " " * 14)
    more = f.lines - min(len(f.evidence), MAX_SHOWN)
    if more > 0:
        lines.append(" " * 14 + f"and {plural(more, 'more line')} of this kind")
    return lines


def _reading(doc: er.ExplainDocument, scans: Sequence[FileScan], width: int) -> list[str]:
    out = []
    for entry, s in zip(doc.files, scans, strict=True):
        said = (
            f"{entry.path}: {plural(entry.lines, 'line')}, {entry.attributed} attributed to "
            f"a host or rank, {entry.lines - entry.attributed} not"
        )
        if entry.cut:
            first = ", ".join(f"line {n}: {b} bytes" for n, b in s.cut[:3])
            said += f"; {plural(entry.cut, 'line')} over {LINE_CAP} bytes read in part ({first})"
        if entry.odd:
            said += f"; {plural(entry.odd, 'line')} with NUL or non-UTF-8 bytes (shown escaped)"
        out += fold(said, width, "  ", "    ")
    return ["read:", *out]


def _hosts(hosts: Sequence[str]) -> str:
    return ", ".join(hosts)


def _said(where: str) -> Callable[[Sequence[str]], str]:
    """A block's head names where the log says it happened, not only the hosts."""
    return lambda hosts: where


def render(doc: er.ExplainDocument, scans: Sequence[FileScan], width: int) -> str:
    """The text report."""
    lines = fold(doc.verdict, width, rest="  ", whole=True)
    for f in doc.findings:
        lines += ["", *finding_block(f.finding, 0, _said(f.where), width)]
        lines += _evidence_lines(f, width)
        if f.finding.kind != Kind.CAUSE_NOT_ESTABLISHED.value:
            for need in f.needs:  # what the log leaves open (its fix line says the rest)
                lines += fold(need, width, " " * 4 + "open      ", " " * 14)
    said = None
    for j in doc.joined:
        head = {
            "cause": "the nodes' facts: the cause",
            "confirms": "the nodes' facts: the same",
            "beside": "the nodes' facts: also",
        }[j.role]
        note = " (the logs name no host: the report's)" if j.unattributed else ""
        heading = f"{head}, from {PurePath(j.report).name}{note}"
        if heading != said:  # one heading over the findings it covers
            lines += ["", *fold(heading, width)]
            said = heading
        else:
            lines.append("")
        lines += finding_block(j.finding, j.finding.follows, _hosts, width)
    if doc.cascade:
        told = ", ".join(f"{n} {sign}" for sign, n in doc.cascade)
        lines += ["", *fold(f"followed by: {told} (lines that follow from it; not listed)", width)]
    lines += ["", *_reading(doc, scans, width)]
    return "\n".join(lines)


def show(doc: er.ExplainDocument, scans: Sequence[FileScan], fmt: str) -> None:
    """The report on stdout, as text, JSON or JUnit XML."""
    if fmt == "json":
        click.echo(er.dumps(doc), nl=False)
    elif fmt == "junit":
        from envtool.report import explain_junit

        click.echo(explain_junit.render(doc), nl=False)
    else:
        click.echo(render(doc, scans, console.width()))
