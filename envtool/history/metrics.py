"""A verify run as Prometheus metrics, in the text exposition format node_exporter's
textfile collector reads (``--metrics-file DIR/envtool.prom``; ``envtool metrics``). Pure:
a report in, the text out; the file is written by a rename (never a partial file, and its
temporary name does not end in ``.prom``, so the collector never reads one half-written).

Series: ``envtool_run_timestamp_seconds``, ``envtool_run_duration_seconds``,
``envtool_lock_info{lock_sha256}``, per host ``envtool_check_ok{host,check}`` (1, or 0 when a
finding of that check is an error on it; only the checks the run made on the host,
history/scope.py: a host that did not answer has ``reachable`` 0 and no other),
``envtool_findings{host,severity}`` (how many),
``envtool_finding{host,kind,severity,subject}`` (1 each, at most ``MAX_FINDINGS`` per host,
errors first: the count above still holds every one) and
``envtool_allreduce_busbw_bytes_per_second{host,bytes}`` (``bytes="peak"``: the peak bus
bandwidth over the largest sizes run; ``bytes="33554432"``...: each of the ``MAX_SIZES``
largest sizes run, the bandwidth-bound ones). Label values are escaped as the format requires
(backslash, double quote, line feed). For 1,000 hosts the file holds at most
3 + 1,000 x (9 checks + 3 severities + 20 findings + 1 peak + 8 sizes) = 41,003 series."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from envtool.errors import InputError
from envtool.history import scope
from envtool.history.store import KEPT_SIZES
from envtool.judge.kinds import Check
from envtool.protocol.verify_report import VerifyDocument
from envtool.yamlio import write_atomic

MAX_FINDINGS = 20  # finding series per host
MAX_SIZES = KEPT_SIZES  # per-size busbw series per host: the largest sizes run, as kept
SEVERITIES = ("error", "warning", "info")
_HELP = {
    "envtool_run_timestamp_seconds": ("gauge", "When the envtool run ended (Unix time)."),
    "envtool_run_duration_seconds": ("gauge", "How long the envtool run took."),
    "envtool_lock_info": ("gauge", "The lock the run compared the nodes with (its sha256)."),
    "envtool_check_ok": ("gauge", "1 when no finding of this check is an error on the host."),
    "envtool_findings": ("gauge", "How many findings of this severity the host has."),
    "envtool_finding": ("gauge", "A finding on a host (1 while present)."),
    "envtool_allreduce_busbw_bytes_per_second": (
        "gauge", "The host's all-reduce bus bandwidth (peak over the largest sizes, or at one "
        "size in bytes)."),
}  # fmt: skip


_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def escape(value: str) -> str:
    """A label value as the exposition format writes it; a control character (a terminal's
    escape sequence from a node's text: ``envtool metrics`` prints to a terminal) becomes
    U+FFFD, which the format takes as it is."""
    value = _CONTROL.sub("\ufffd", value)
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series(name: str, labels: dict[str, str], value: float) -> str:
    inner = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
    number = repr(float(value)) if value != int(value) else str(int(value))
    return f"{name}{{{inner}}} {number}" if labels else f"{name} {number}"


@dataclass(frozen=True)
class Snapshot:
    """What the metrics say of one run: from its report, or from the history store."""

    at: float
    seconds: float
    lock_sha256: str
    hosts: tuple[tuple[str, bool, float | None, str], ...]  # host, answered, peak busbw GB/s,
    # the checks made on it (history/scope.py's text; empty: every check)
    findings: tuple[tuple[str, str, str, str], ...]  # host, kind, severity, subject
    sizes: tuple[tuple[str, int, float], ...] = ()  # host, bytes, busbw GB/s: each size run


def snapshot(doc: VerifyDocument, at: float, made: scope.Checks | None = None) -> Snapshot:
    """A report's snapshot (``at``: when the run ended; ``made``: each host's checks, default
    what its report shows it was read for)."""
    made = scope.checks(doc) if made is None else made
    hosts = tuple((h.host, h.ok, h.allreduce.peak_busbw if h.allreduce else None,
                   scope.text(made.get(h.host, frozenset()))) for h in doc.hosts)  # fmt: skip
    found = tuple((h, f.kind, f.severity, f.subject) for f in doc.findings for h in f.hosts)
    sizes = tuple((h.host, b, f) for h in doc.hosts if h.allreduce for b, f in h.allreduce.sizes)
    return Snapshot(at, doc.seconds, doc.lock_sha256 or "", hosts, found, sizes)


def text(run: Snapshot) -> str:
    """The exposition text of one run."""
    lines: dict[str, list[str]] = {name: [] for name in _HELP}

    def add(name: str, labels: dict[str, str], value: float) -> None:
        lines[name].append(_series(name, labels, value))

    add("envtool_run_timestamp_seconds", {}, round(run.at, 3))
    add("envtool_run_duration_seconds", {}, round(run.seconds, 3))
    if run.lock_sha256:
        add("envtool_lock_info", {"lock_sha256": run.lock_sha256}, 1)
    found: dict[str, list[tuple[str, str, str, str]]] = {}
    for f in run.findings:
        found.setdefault(f[0], []).append(f)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    sized: dict[str, dict[int, float]] = {}
    for host, size, figure in run.sizes:
        sized.setdefault(host, {})[size] = figure
    every = tuple(c.value for c in Check)
    for name, answered, busbw, kept in run.hosts:
        mine = sorted(found.get(name, []), key=lambda f: (order.get(f[2], 9), f[1], f[3]))
        bad = {scope.check_key(f[1]) for f in mine if f[2] == "error"}
        made = scope.read(kept)
        for check in sorted(made) if made is not None else every:
            failed = check in bad or (check == Check.REACHABLE.value and not answered)
            add("envtool_check_ok", {"host": name, "check": check}, 0 if failed else 1)
        counts = Counter(f[2] for f in mine)
        for severity in SEVERITIES:
            add("envtool_findings", {"host": name, "severity": severity}, counts[severity])
        for _, kind, severity, subject in mine[:MAX_FINDINGS]:
            labels = {"host": name, "kind": kind, "severity": severity, "subject": subject}
            add("envtool_finding", labels, 1)
        if busbw is not None:
            add("envtool_allreduce_busbw_bytes_per_second", {"host": name, "bytes": "peak"},
                round(busbw * 1e9))  # fmt: skip
        for size, figure in sorted(sized.get(name, {}).items())[-MAX_SIZES:]:
            add("envtool_allreduce_busbw_bytes_per_second", {"host": name, "bytes": str(size)},
                round(figure * 1e9))  # fmt: skip
    out = []
    for metric, (kind, helptext) in _HELP.items():
        if lines[metric]:
            out += [f"# HELP {metric} {helptext}", f"# TYPE {metric} {kind}", *lines[metric]]
    return "\n".join(out) + "\n"


def write(path: Path, body: str) -> None:
    """The file written by a rename (node_exporter reads only ``*.prom``)."""
    if path.suffix != ".prom":
        raise InputError(f"--metrics-file {path}: node_exporter's textfile collector reads only "
                         "*.prom files: name it NAME.prom")  # fmt: skip
    try:
        write_atomic(path, body)
    except OSError as exc:
        raise InputError(f"--metrics-file {path}: cannot write it ({exc.strerror})") from None
