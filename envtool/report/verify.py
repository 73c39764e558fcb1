"""The verify report: the verdict worded once (a VerifyDocument), then shown as a folded
table, written as JSON (protocol/verify_report.py) or as JUnit (report/junit.py)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import click

from envtool import yamlio
from envtool.judge import critical
from envtool.judge.findings import Finding, failed
from envtool.judge.verdict import Verdict
from envtool.protocol import verify_report as vr
from envtool.protocol.types import HostReport, Runtime
from envtool.report import console, junit, shown_parts
from envtool.report import verdict_text as text
from envtool.report.labels import failure_text, folded_text, problem_text, short, words
from envtool.report.text import visible, visible_all
from envtool.report.verdict_text import plural


def nodeset(hosts: Sequence[str]) -> str:
    """Hosts folded into a node set (``node[1-3]``), like clush -b."""
    from ClusterShell.NodeSet import NodeSet

    try:
        return str(NodeSet.fromlist(list(hosts)))
    except Exception:  # names NodeSet cannot fold (user@host) are listed as they are
        return ",".join(hosts)


def finding_entry(f: Finding) -> vr.FindingEntry:
    """A finding worded for a report (every string shown as text, see report/text.py)."""
    w = words(f, nodeset)
    return vr.FindingEntry(
        f.kind.value, f.severity.value, visible(f.subject), visible(w.expected),
        visible(w.actual), visible(w.fix), visible_all(f.hosts), f.follows,
    )  # fmt: skip


def _maybe(text: str | None) -> str | None:
    return None if text is None else visible(text)


def _runtime(rt: Runtime | None) -> vr.RuntimeEntry | None:
    if rt is None:
        return None
    libraries = tuple(
        vr.LibraryEntry(visible(lib.kind), visible(lib.path), _maybe(lib.version))
        for lib in rt.libraries
    )
    return vr.RuntimeEntry(
        visible(rt.executable), visible(rt.sys_prefix), _maybe(rt.user_site),
        _maybe(rt.torch_file), libraries, visible_all([p.path for p in rt.net_plugins]),
    )  # fmt: skip


def _facts(r: HostReport) -> vr.FactsEntry | None:
    f = r.facts
    if f is None:
        return None
    devices = visible_all([d.name for d in f.devices])
    env = tuple((visible(k), visible(v)) for k, v in f.env)
    return vr.FactsEntry(
        visible(f.hostname), visible(f.python), _maybe(f.torch), _maybe(f.cuda),
        f.cuda_available, f.device_count, devices, _maybe(f.driver), _maybe(f.cudnn),
        _maybe(f.nccl), env, visible_all(f.notes), _runtime(f.runtime),
    )  # fmt: skip


def _allreduce(r: HostReport) -> vr.AllReduceEntry | None:
    ar = r.allreduce
    if ar is None:
        return None
    error = visible(ar.error) if ar.error else None
    best = {row.size: max(row.oop.busbw, row.ip.busbw) for row in ar.rows if row.size > 0}
    # the largest sizes (the bandwidth's), as many as a report holds, only figures it can hold
    kept = sorted(best)[-vr.MAX_SIZES :]
    sizes = tuple((b, best[b]) for b in kept if math.isfinite(best[b]) and best[b] >= 0)
    return vr.AllReduceEntry(visible(ar.backend), ar.nranks, ar.peak_busbw, ar.wrong_total, error,
                             ar.member, sizes)  # fmt: skip


def host_entry(r: HostReport) -> vr.HostEntry:
    """One host as the report shows it."""
    return vr.HostEntry(
        visible(r.host),
        r.ok,
        visible(failure_text(r.failure)) if r.failure is not None else None,
        round(r.seconds, 3),
        tuple(visible(problem_text(p)) for p in r.problems),
        len(r.env.packages) if r.env else None,
        _facts(r),
        _allreduce(r),
        shown_parts.gpus(r.gpus),
        shown_parts.network(r.network),
        shown_parts.limits(r.limits),
        shown_parts.rendezvous(r.rendezvous),
        shown_parts.clock_offset(r.clock_offset),
        r.env.stamp or None if r.env is not None else None,
    )


def document(verdict: Verdict) -> vr.VerifyDocument:
    """The whole report (schema envtool.verify/1, docs/report-schema.md)."""
    return vr.VerifyDocument(
        verdict.lock_path or None,
        round(verdict.seconds, 3),
        not failed(verdict.findings),
        tuple(host_entry(r) for r in verdict.reports),
        tuple(finding_entry(f) for f in verdict.findings),
        _pairs(verdict),
        verdict.pairs.rounds if verdict.pairs is not None else 0,
        visible_all(verdict.unchecked),
        visible_all(verdict.docker_run),
        verdict.lock_sha256 or None,
    )


def _pairs(verdict: Verdict) -> tuple[vr.PairEntry, ...]:
    run = verdict.pairs
    if run is None:
        return ()
    return tuple(
        vr.PairEntry(visible(p.a), visible(p.b), p.round,
                     p.result.peak_busbw if p.result is not None else None,
                     visible(p.error) if p.result is None else None, round(p.seconds, 3),
                     visible(p.by) if p.by else None, p.partner_busbw)
        for p in run.pairs
    )  # fmt: skip


def _summary(verdict: Verdict) -> str:
    answered = sum(1 for r in verdict.reports if r.ok)
    run = verdict.pairs
    pairs = (
        f"; {plural(len(run.pairs), 'pair')} in {plural(run.rounds, 'round')} ({run.seconds:.1f} s)"
        if run is not None
        else ""
    )
    return (
        f"{text.machines_text(verdict)}, {answered} answered, "
        f"{plural(len(verdict.findings), 'finding')} in {verdict.seconds:.1f} s{pairs}"
    )


def _compared(verdict: Verdict) -> str:
    """What "all good" rests on: which levels were compared, and what was not."""
    levels = ["package records and their hashes"] if verdict.lock_path else []
    loaded = [r for r in verdict.reports if r.facts is not None and r.facts.runtime is not None]
    if loaded:
        levels.append("what each python loads (interpreter, torch, NCCL, cuDNN)")
    against = "against the lock and each other" if verdict.lock_path else "between the nodes"
    # a host that sent facts without the runtime (none at all: preflight --quick, a failed part)
    missing = sum(1 for r in verdict.reports if r.facts is not None and r.facts.runtime is None)
    note = f"; no runtime from {missing} host(s) (an older probe)" if missing else ""
    checked = f"compared {against}: {', '.join(levels) or 'package records'}{note}"
    unchecked = f"\nnot checked: {', '.join(verdict.unchecked)}" if verdict.unchecked else ""
    cards = _gpus_read(verdict)
    cards = f"\nGPUs read without torch: {cards}" if cards else ""
    return f"{checked}{cards}\nall-reduce: {_allreduce_checked(verdict)}{unchecked}"


def _stamps(verdict: Verdict) -> str:
    """Which lock each prefix's install stamp names (said, never trusted over the records):
    ``this lock on node[1-2]; another lock (ccd40ac427ff) on node3; no stamp on node4``."""
    if not verdict.lock_sha256:
        return ""
    groups: dict[str, list[str]] = {}
    for r in verdict.reports:
        if r.env is None:
            continue
        said = r.env.stamp
        key = ("this lock" if said == verdict.lock_sha256
               else f"another lock ({said[:12]})" if said else "no stamp")  # fmt: skip
        groups.setdefault(key, []).append(r.host)
    return "; ".join(f"{key} on {nodeset(hosts)}" for key, hosts in groups.items())


def _started_with(verdict: Verdict) -> list[str]:
    """--image: the docker run options every container started with (what the runtime's
    /dev/shm and ulimits were judged under), said whatever the verdict."""
    if not verdict.docker_run:
        return []
    return [f"containers started with: docker run {' '.join(verdict.docker_run)} (the runtime "
            "sets /dev/shm and the ulimits: judged as a job's)"]  # fmt: skip


def _gpus_read(verdict: Verdict) -> str:
    """What each host's gpus part read, hosts alike folded into one node set: ``8x NVIDIA
    H100 80GB HBM3 (driver 550.54.15, nvml) on node[1-16]``, ``none on node17``."""
    groups: dict[str, list[str]] = {}
    for r in verdict.reports:
        layer = r.gpus
        if layer is None:
            continue  # said in "not checked" (judge/unchecked.missing_parts)
        key = "none"
        if layer.devices:
            models = Counter(d.name for d in layer.devices)
            key = " + ".join(f"{n}x {model}" for model, n in sorted(models.items()))
            key += (
                f" (driver {layer.driver}, {layer.source})"
                if layer.driver
                else f" ({layer.source})"
            )
        groups.setdefault(key, []).append(r.host)
    return "; ".join(f"{key} on {nodeset(hosts)}" for key, hosts in groups.items())


def _allreduce_checked(verdict: Verdict) -> str:
    """Which all-reduce the verdict rests on, and which links it did not cross."""
    if verdict.pairs is not None:
        answered = sum(1 for r in verdict.reports if r.ok)
        met = {frozenset((p.a, p.b)) for p in verdict.pairs.pairs}
        total = answered * (answered - 1) // 2
        return f"between {len(met)} of the {total} node pairs, in {verdict.pairs.rounds} rounds"
    ran = [r.allreduce for r in verdict.reports if r.allreduce is not None]
    if not ran:
        return "none run (--allreduce off): the links between the nodes were not tested"
    if any(a.member for a in ran):
        took_part = {r.host for r in verdict.reports if r.allreduce is not None}
        machines = sum(1 for hosts in verdict.machines if took_part & set(hosts))
        names = f" ({len(ran)} names)" if machines != len(ran) else ""
        return f"one run across {plural(machines, 'host')}{names}"
    return f"each of {len(ran)} host(s) on its own: no link between the nodes was tested"


def _pairs_table(verdict: Verdict) -> tuple[str, list[str], list[list[str]]] | None:
    """Each pair's busbw, slowest first: the figures the slow-node/-link findings come from."""
    entries = sorted(_pairs(verdict), key=lambda p: (p.busbw is not None, p.busbw or 0.0))
    if not entries:
        return None
    rows = [
        [f"{p.a} <-> {p.b}", str(p.round),
         f"{p.busbw:.3g}" if p.busbw is not None else "-", p.error or "", f"{p.seconds:.1f}"]
        for p in entries
    ]  # fmt: skip
    return "all-reduce pairs", ["pair", "round", "busbw GB/s", "error", "seconds"], rows


def _grid(verdict: Verdict, shown: list[Finding], width: int) -> str:
    rows = []
    for f in shown:
        e = finding_entry(f)
        rows.append([nodeset(e.hosts), e.severity, e.kind, e.subject, e.expected, e.actual, e.hint])
    columns = ["hosts", "severity", "kind", "subject", "expected", "actual", "fix"]
    return console.table_text(_summary(verdict), columns, rows, width)


def _pairs_lines(verdict: Verdict, width: int) -> list[str]:
    """Each pair's figure, slowest first, a line each (folded to ``width``)."""
    out = []
    for p in sorted(_pairs(verdict), key=lambda p: (p.busbw is not None, p.busbw or 0.0)):
        figure = f"{p.busbw:.3g} GB/s" if p.busbw is not None else "no figure"
        if p.busbw is not None and p.partner_busbw is not None:  # both ends' own figures
            figure = f"{p.busbw:.3g} / {p.partner_busbw:.3g} GB/s at its two ends"
        figure = f"failed: {p.error}" if p.error else figure
        line = f"{p.a} <-> {p.b}: round {p.round}, {figure} ({p.seconds:.1f} s)"
        out += text.fold(line, width, "  ", "      ")
    return ["all-reduce pairs, slowest first:", *out] if out else []


def render(verdict: Verdict, show_all: bool = False, wide: bool = False, width: int = 100) -> str:
    """The report as text: a summary line, the findings (blocks, or ``wide``: the full grid),
    the all-reduce figures and the verdict line, no line wider than ``width``."""
    shown, folded = critical.split(verdict.findings, show_all)
    items = [(finding_entry(f), short(f)) for f in critical.ordered(verdict.findings)]
    lines = [
        *text.fold(text.summary_line(verdict, items), width),
        *text.fold(_summary(verdict), width),
        *(line for said in _started_with(verdict) for line in text.fold(said, width, rest="  ")),
    ]
    if stamps := _stamps(verdict):  # what each prefix says of itself, beside its records
        lines += text.fold(f"installed from: {stamps}", width, rest="  ")
    if wide and shown:
        lines += ["", _grid(verdict, shown, width).rstrip("\n")]
    else:
        for f in shown:
            lines += ["", *text.finding_block(finding_entry(f), f.follows, nodeset, width)]
    if folded:
        lines += ["", *text.fold(folded_text(folded), width)]
    for part in (
        text.allreduce_lines(verdict, width),
        [] if wide else _pairs_lines(verdict, width),
    ):
        lines += ["", *part] if part else []
    if wide and (pairs := _pairs_table(verdict)) is not None:
        lines += ["", console.table_text(*pairs, width).rstrip("\n")]
    compared = _compared(verdict).replace("\n", "; ")
    lines += ["", *text.fold(text.verdict_line(items, compared, nodeset), width)]
    joined = "\n".join(lines)
    return "".join(visible(line) + "\n" for line in joined.split("\n"))  # node text stays text


def show(
    verdict: Verdict,
    fmt: str,
    output: Path | None,
    show_all: bool = False,
    wide: bool = False,
) -> None:
    """The verify report: text (``show_all``: every finding listed; ``wide``: the full grid),
    JSON or JUnit, to stdout or ``output``."""
    if fmt == "table":
        report = render(verdict, show_all, wide, console.width() if output is None else 100)
    else:
        doc = document(verdict)
        report = vr.dumps(doc) if fmt == "json" else junit.render(doc)
    if output is not None:
        yamlio.write_atomic(output, report)
        click.echo(f"{_summary(verdict)}; wrote {output}", err=True)
    else:
        click.echo(report, nl=False)
