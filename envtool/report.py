"""The only module that prints: summaries of commands, and errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from envtool import drift
from envtool.install import InstallResult
from envtool.lock import CheckResult, LockResult
from envtool.models import Environment, Finding, HostReport

if TYPE_CHECKING:
    from envtool.image import BuildResult
    from envtool.nccl import NcclRun
    from envtool.verify import VerifyResult


def error(message: str) -> None:
    """One line on stderr: ``envtool: error: ...``."""
    click.echo(f"envtool: error: {message}", err=True)


def wrote(path: Path) -> None:
    """A file envtool wrote beside its report (a plot)."""
    click.echo(f"wrote {path}", err=True)


def lock_result(result: LockResult) -> None:
    """What ``envtool lock`` wrote."""
    for platform, conda, pip in result.counts:
        extra = f" + {pip} pip" if pip else ""
        click.echo(f"{platform}: {conda} conda{extra} packages")
    click.echo(f"wrote {result.lock_path} in {result.seconds:.2f} s")


def check_result(result: CheckResult) -> None:
    """Whether the lock is fresh against the environment file."""
    if result.fresh:
        click.echo(f"{result.lock_path} is up to date with {result.env_path}")
    else:
        click.echo(
            f"{result.lock_path} is stale for {', '.join(result.stale)}: {result.env_path} "
            f"changed; run 'envtool lock -f {result.env_path} --lockfile {result.lock_path}'"
        )


def install_result(result: InstallResult) -> None:
    """What ``envtool install`` put into the prefix."""
    extra = f" and {result.pip} pip" if result.pip else ""
    click.echo(
        f"installed {result.conda} conda{extra} packages into {result.prefix} "
        f"in {result.seconds:.2f} s"
    )


def _json(doc: object) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=True))


def _table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_lines=False)
    for i, column in enumerate(columns):
        table.add_column(column, overflow="fold", no_wrap=i < 3)
    for row in rows:
        table.add_row(*row)
    Console(width=max(160, shutil.get_terminal_size().columns)).print(table)


def export_document(doc: dict[str, Any], fmt: str) -> None:
    """An export: conda's YAML text verbatim, or the structured JSON document."""
    if fmt == "json":
        _json(doc)
    else:
        click.echo(doc["yaml"], nl=False)


def finding_dict(f: Finding) -> dict[str, Any]:
    """A finding as JSON."""
    return {
        "kind": f.kind,
        "severity": f.severity,
        "subject": f.subject,
        "expected": f.expected,
        "actual": f.actual,
        "hint": f.hint,
        "hosts": list(f.hosts),
    }


def diff_result(a: Environment, b: Environment, findings: list[Finding], fmt: str) -> None:
    """The differences between two environments."""
    if fmt == "json":
        _json(
            {
                "schema": "envtool.diff/1",
                "a": a.source,
                "b": b.source,
                "identical": not findings,
                "findings": [finding_dict(f) for f in findings],
            }
        )
        return
    if not findings:
        click.echo(f"identical: {a.source} ({len(a.packages)} packages) and {b.source}")
        return
    rows = [[f.severity, f.kind, f.subject, f.expected, f.actual, f.hint] for f in findings]
    _table(
        f"{len(findings)} differences: A={a.source}  B={b.source}",
        ["severity", "kind", "package", "A", "B", "fix"],
        rows,
    )


def _fact_rows(facts: dict[str, Any]) -> list[list[str]]:
    devices = facts.get("devices") or []
    names = ", ".join(f"{d.get('name')} (sm {d.get('capability')})" for d in devices) or "none"
    env = " ".join(f"{k}={v}" for k, v in (facts.get("env") or {}).items()) or "-"
    pairs = [
        ("host", facts.get("hostname")),
        ("python", facts.get("python")),
        ("torch", facts.get("torch")),
        ("torch CUDA", facts.get("cuda")),
        ("CUDA available", facts.get("cuda_available")),
        ("devices", f"{facts.get('device_count', 0)}: {names}"),
        ("driver", facts.get("driver")),
        ("cuDNN", facts.get("cudnn")),
        ("NCCL", facts.get("nccl")),
        ("glibc", facts.get("glibc")),
        ("env", env),
    ]
    rows = [[k, "-" if v is None else str(v)] for k, v in pairs]
    return rows + [["note", n] for n in facts.get("notes") or []]


def probe_result(doc: dict[str, Any], fmt: str) -> None:
    """GPU facts as a table, then the all-reduce in all_reduce_perf's layout."""
    if fmt == "json":
        _json(doc)
        return
    _table("node facts", ["fact", "value"], _fact_rows(doc["facts"]))
    if doc.get("allreduce") is not None:
        from envtool import probes

        click.echo(probes.load("allreduce").render_text(doc["allreduce"]), nl=False)


def nccl_result(run: NcclRun, min_bytes: int, fmt: str) -> None:
    """An all_reduce_perf log: its rows, and the peak busbw at large sizes beside the average."""
    from envtool import nccl

    doc = nccl.summary(run, min_bytes)
    if fmt == "json":
        _json(doc)
        return
    from envtool.nccl_format import format_run

    click.echo(format_run(run), nl=False)
    peak = doc["peak_busbw"]
    where = f"sizes >= {_size(min_bytes)}"
    click.echo(f"ranks: {run.nranks or '?'}   NCCL: {run.nccl_version or '?'}")
    click.echo(
        f"peak busbw at {where}: "
        + (f"{peak:.2f} GB/s" if peak is not None else "no rows that large")
    )
    if run.avg_busbw is not None:
        click.echo(
            f"the tool's average over all sizes (understates the link): {run.avg_busbw:g} GB/s"
        )


def _size(n: int) -> str:
    for unit, factor in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


def _host_dict(r: HostReport) -> dict[str, Any]:
    facts = r.facts
    return {
        "host": r.host,
        "ok": r.ok,
        "error": r.error or None,
        "seconds": round(r.seconds, 3),
        "problems": list(r.problems),
        "packages": len(r.env.packages) if r.env else None,
        "facts": None
        if facts is None
        else {
            "hostname": facts.hostname,
            "python": facts.python,
            "torch": facts.torch,
            "cuda": facts.cuda,
            "cuda_available": facts.cuda_available,
            "device_count": facts.device_count,
            "devices": [d.name for d in facts.devices],
            "driver": facts.driver,
            "cudnn": facts.cudnn,
            "nccl": facts.nccl,
            "env": dict(facts.env),
            "notes": list(facts.notes),
        },
        "allreduce": None
        if r.allreduce is None
        else {
            "backend": r.allreduce.backend,
            "nranks": r.allreduce.nranks,
            "peak_busbw": r.allreduce.peak_busbw,
            "wrong_total": r.allreduce.wrong_total,
            "error": r.allreduce.error or None,
        },
    }


def verify_document(result: VerifyResult) -> dict[str, Any]:
    """The versioned JSON report (schema envtool.verify/1, documented in docs/report-schema.md)."""
    worst = drift.worst(result.findings)
    return {
        "schema": "envtool.verify/1",
        "lockfile": result.lock_path or None,
        "seconds": round(result.seconds, 3),
        "ok": worst != "error",
        "hosts": [_host_dict(r) for r in result.reports],
        "findings": [finding_dict(f) for f in result.findings],
    }


def _nodeset(hosts: tuple[str, ...]) -> str:
    from ClusterShell.NodeSet import NodeSet

    try:
        return str(NodeSet.fromlist(list(hosts)))
    except Exception:  # names NodeSet cannot fold (user@host) are listed as they are
        return ",".join(hosts)


def _verify_rows(result: VerifyResult) -> list[list[str]]:
    order = {"error": 0, "warning": 1, "info": 2}
    findings = sorted(result.findings, key=lambda f: (order.get(f.severity, 3), f.kind, f.subject))
    return [
        [_nodeset(f.hosts), f.severity, f.kind, f.subject, f.expected, f.actual, f.hint]
        for f in findings
    ]


def _render(result: VerifyResult, fmt: str) -> str:
    from envtool import junit

    if fmt == "json":
        return json.dumps(verify_document(result), indent=2, sort_keys=True) + "\n"
    return junit.render(result.reports, result.findings, result.seconds)


def verify_result(result: VerifyResult, fmt: str, output: Path | None) -> None:
    """The verify report: a folded table, JSON or JUnit, to stdout or ``--output``."""
    from envtool import yamlio

    ok = sum(1 for r in result.reports if r.ok)
    summary = (
        f"{len(result.reports)} hosts, {ok} answered, {len(result.findings)} findings "
        f"in {result.seconds:.1f} s"
    )
    if fmt != "table":
        text = _render(result, fmt)
        if output is not None:
            yamlio.write_atomic(output, text)
            click.echo(f"{summary}; wrote {output}", err=True)
        else:
            click.echo(text, nl=False)
        return
    if not result.findings:
        click.echo(f"all good: {summary}")
        return
    _table(
        summary,
        ["hosts", "severity", "kind", "subject", "expected", "actual", "fix"],
        _verify_rows(result),
    )


class Progress:
    """A progress bar on stderr while hosts answer; silent when stderr is not a terminal."""

    def __init__(self, total: int) -> None:
        import sys

        self._bar: Any = None
        if sys.stderr.isatty() and total > 1:
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(transient=True)
            self._task = self._bar.add_task("probing hosts", total=total)

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def done(self, _: object) -> None:
        """One host answered."""
        if self._bar is not None:
            self._bar.advance(self._task)


class BuildLog:
    """The build log, streamed: the last line under a spinner on a terminal, else every line."""

    def __init__(self) -> None:
        import sys

        self._status: Any = None
        if sys.stderr.isatty():
            from rich.console import Console

            self._status = Console(stderr=True).status("docker build")

    def __enter__(self) -> BuildLog:
        if self._status is not None:
            self._status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()

    def line(self, text: str) -> None:
        """One line of the build's output."""
        if self._status is not None:
            self._status.update(f"docker build: {text[:100]}")
        else:
            click.echo(text, err=True)


def build_result(result: BuildResult) -> None:
    """The tag, id and provenance labels of a built image."""
    click.echo(f"built {result.tag} ({result.image_id[:19]}) in {result.seconds:.1f} s")
    for key, value in result.labels:
        if key.startswith("io.envtool."):
            click.echo(f"  {key}={value}")
    if result.pushed:
        click.echo(f"pushed {result.tag}")
