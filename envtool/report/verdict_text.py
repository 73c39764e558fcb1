"""The verify report as people read it, at any width: a summary line first, one block per
finding (``hosts · kind · subject`` with expected, found and fix under it), the per-node
all-reduce figures, and a verdict line that names the next step. ``--wide``: the full grid."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence

from envtool.judge.findings import Severity
from envtool.judge.verdict import Verdict
from envtool.protocol import verify_report as vr

Nodeset = Callable[[Sequence[str]], str]
_SHOWN_HOSTS = 5  # hosts named in the summary line before "and N more"


def plural(n: int, word: str, many: str = "") -> str:
    """``1 host``, ``2 hosts`` (``many``: an irregular plural)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


Item = tuple[vr.FindingEntry, str]  # a finding as worded, and in a few words (labels.short)


def _first_error(items: Sequence[Item], hosts: Sequence[str]) -> Item | None:
    """The first error on any of ``hosts`` (one machine's names)."""
    errors = (i for i in items if i[0].severity == "error")
    return next((i for i in errors if any(h in i[0].hosts for h in hosts)), None)


def machines_text(verdict: Verdict) -> str:
    """``16 hosts``, or ``15 hosts (16 names)`` where a machine was listed under two."""
    machines, names = len(verdict.machines), len(verdict.reports)
    return plural(machines, "host") + (f" ({names} names)" if names != machines else "")


def summary_line(verdict: Verdict, items: Sequence[Item]) -> str:
    """``2 of 16 hosts fail: node3 (nccl 2.16 vs 2.18), node7 (no environment)``; a machine
    listed under several names counts once (``node1 = node1-alias``)."""
    groups = verdict.machines
    failing = [(" = ".join(hosts), i[1]) for hosts in groups if (i := _first_error(items, hosts))]
    if not failing:
        warnings = sum(1 for e, _ in items if e.severity == "warning")
        tail = f" with {plural(warnings, 'warning')}" if warnings else ""
        return f"{machines_text(verdict)} pass{'es' if len(groups) == 1 else ''}{tail}"
    named = ", ".join(f"{h} ({said})" for h, said in failing[:_SHOWN_HOSTS])
    more = len(failing) - _SHOWN_HOSTS
    rest = f", and {more} more" if more > 0 else ""
    verb = "fails" if len(failing) == 1 else "fail"
    return f"{len(failing)} of {machines_text(verdict)} {verb}: {named}{rest}"


def fold(
    text: str, width: int, first: str = "", rest: str = "  ", whole: bool = False
) -> list[str]:
    """``text`` folded to ``width`` at spaces (never inside a name-with-hyphens or a path),
    ``first`` before its first line and ``rest`` before the others: every report line. A word
    longer than a line is cut across lines unless ``whole`` (then it overflows, in one piece:
    a package spec a grep of the output must find)."""
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False, break_long_words=not whole)  # fmt: skip


def _wrap(label: str, text: str, width: int, whole: bool = False) -> list[str]:
    indent = " " * 4 + f"{label:<9} "
    return fold(text, width, indent, " " * len(indent), whole) or [indent.rstrip()]


def finding_block(
    e: vr.FindingEntry, follows: int, nodeset: Nodeset | None, width: int, whole: bool = False
) -> list[str]:
    """One finding: its head line (``nodeset`` None: no hosts, as in a diff), then expected /
    found / fix, folded to ``width`` (``whole``: no word cut, see ``fold``)."""
    where = "" if nodeset is None else f"{nodeset(e.hosts) or '-'} · "
    head = f"{e.severity.upper():<7} {where}{e.kind} · {e.subject}"
    lines = fold(head, width, rest=" " * 8, whole=whole)
    for label, text in (("expected", e.expected), ("found", e.actual), ("fix", e.hint)):
        if text:
            lines += _wrap(label, text, width, whole)
    if follows:
        lines += _wrap(
            "", f"{plural(follows, 'more finding')} follow from this (not listed)", width
        )
    return lines


def allreduce_lines(verdict: Verdict, width: int) -> list[str]:
    """Each node's all-reduce figure (rank 0's node for a run across the hosts)."""
    lines = []
    for r in verdict.reports:
        ar = r.allreduce
        if ar is None or ar.member:
            continue
        if ar.error:
            figure = f"failed: {ar.error}"
        elif ar.peak_busbw is None:
            figure = "no rows"
        else:
            figure = (
                f"peak busbw {ar.peak_busbw:.3g} GB/s ({ar.backend}, {plural(ar.nranks, 'rank')})"
            )
        lines += fold(f"{r.host}: {figure}", width, "  ", "    ")
    return ["all-reduce:", *lines] if lines else []


def verdict_line(items: Sequence[Item], compared: str, nodeset: Nodeset) -> str:
    """``FAIL: <hosts>: <what>: <fix>`` or ``all good: <what was compared>; <notes>``."""
    errors = [(e, said) for e, said in items if e.severity == Severity.ERROR.value]
    if errors:
        first, said = errors[0]
        more = f" (and {plural(len(errors) - 1, 'more error')})" if len(errors) > 1 else ""
        fix = f": {first.hint}" if first.hint else ""
        return f"FAIL: {nodeset(first.hosts) or 'the run'}: {said}{more}{fix}"
    warnings = sum(1 for e, _ in items if e.severity == Severity.WARNING.value)
    notes = sum(1 for e, _ in items if e.severity == Severity.INFO.value)
    extra = [plural(warnings, "warning")] if warnings else []
    extra += [plural(notes, "note")] if notes else []
    head = "passed with " + " and ".join(extra) if warnings else "all good"
    tail = f"; {plural(notes, 'note')}" if notes and not warnings else ""
    return f"{head}: {compared}{tail}"
