"""What the one-shot commands print: lock, install, build, export, diff, probe, nccl-tests."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from envtool.judge import critical
from envtool.protocol import schemas
from envtool.protocol.verify_report import finding_dict
from envtool.report import console, diff_text
from envtool.report import specs as spec_report
from envtool.report.text import visible
from envtool.report.verify import finding_entry

if TYPE_CHECKING:
    from envtool.image import BuildResult
    from envtool.judge.comparison import Comparison
    from envtool.judge.findings import Finding
    from envtool.lock.install import InstallResult
    from envtool.lock.pin import CheckResult, LockResult
    from envtool.models import Environment
    from envtool.nccl.model import NcclRun
    from envtool.protocol.types import AllReduceResult, NodeFacts


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
    if result.sources.shared:  # a filled cache was read: what came from it, what did not
        click.echo(f"  {visible(result.sources.said())}")


def build_result(result: BuildResult) -> None:
    """The tag, id and provenance labels of a built image."""
    click.echo(f"built {result.tag} ({result.image_id[:19]}) in {result.seconds:.1f} s")
    for key, value in result.labels:
        if key.startswith("io.envtool."):
            click.echo(f"  {key}={value}")
    if result.pushed:
        click.echo(f"pushed {result.tag}")


def checked_build(tag: str, passed: bool, push: bool) -> None:
    """``build --verify``: whether the image passed its check, and was pushed for it."""
    if passed:
        click.echo(f"{tag} passed its check" + (f"; pushed {tag}" if push else ""))
    else:
        click.echo(f"envtool: {tag} failed its check" + ("; not pushed" if push else ""), err=True)


def export_document(doc: dict[str, Any], fmt: str) -> None:
    """An export: conda's YAML text verbatim, or the structured JSON document."""
    if fmt == "json":
        console.echo_json(doc)
    else:
        click.echo(doc["yaml"], nl=False)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def diff_result(
    a: Environment, b: Environment, c: Comparison, fmt: str, show_all: bool = False
) -> None:
    """The differences between two environments: what decides a DDP run first; the others
    counted per kind unless ``show_all`` (JSON lists every one); then, under their own
    headings, the problems inside A and inside B on their own (``envtool check``'s)."""
    if fmt == "json":
        entries = [finding_entry(f) for f in critical.ordered(c.differences)]
        console.echo_json(
            {
                "schema": schemas.DIFF,
                "a": a.source,
                "b": b.source,
                "identical": c.identical,
                "findings": [finding_dict(e) for e in entries],
                "inside_a": [finding_dict(finding_entry(f)) for f in c.inside_a],
                "inside_b": [finding_dict(finding_entry(f)) for f in c.inside_b],
                "specs": spec_report.entries(a, b),  # a spec list's specs, met or not
            }
        )
        return
    spec_report.summary(a, b)
    click.echo(diff_text.render(a, b, c, show_all, console.width()), nl=False)


def consistency_result(checked: list[tuple[Environment, list[Finding]]], fmt: str) -> None:
    """The inconsistencies found inside each environment."""
    if fmt == "json":
        console.echo_json(
            {
                "schema": schemas.CHECK,
                "consistent": not any(found for _, found in checked),
                "environments": [
                    {
                        "source": env.source,
                        "packages": len(env.packages),
                        "findings": [finding_dict(finding_entry(f)) for f in found],
                    }
                    for env, found in checked
                ],
            }
        )
        return
    for env, found in checked:
        if not found:
            click.echo(f"consistent: {env.source} ({len(env.packages)} packages)")
            continue
        entries = [finding_entry(replace(f, where="")) for f in found]
        rows = [[e.severity, e.kind, e.expected, e.actual, e.hint] for e in entries]
        console.table(
            f"{len(found)} inconsistencies in {env.source} ({len(env.packages)} packages)",
            ["severity", "kind", "rule", "packages", "fix"],
            rows,
        )


def _fact_rows(facts: NodeFacts) -> list[list[str]]:
    devices = ", ".join(f"{d.name} (sm {d.capability})" for d in facts.devices) or "none"
    env = " ".join(f"{k}={v}" for k, v in facts.env) or "-"
    pairs = [
        ("host", facts.hostname),
        ("python", facts.python),
        ("torch", facts.torch),
        ("torch CUDA", facts.cuda),
        ("CUDA available", facts.cuda_available),
        ("devices", f"{facts.device_count}: {devices}"),
        ("driver", facts.driver),
        ("cuDNN", facts.cudnn),
        ("NCCL", facts.nccl),
        ("glibc", facts.glibc),
        ("env", env),
    ]
    rt = facts.runtime
    if rt is not None:  # what the interpreter really loaded, and from where
        pairs[2:2] = [("executable", rt.executable), ("sys.prefix", rt.sys_prefix),
                      ("torch from", rt.torch_file)]  # fmt: skip
        pairs += [(f"lib {lib.kind}", f"{lib.path} ({lib.version or '?'})") for lib in rt.libraries]
        pairs += [("net plugin", f"{p.path} ({p.found or '?'})") for p in rt.net_plugins]
    rows = [[k, "-" if v is None else visible(str(v))] for k, v in pairs]
    return rows + [["note", visible(n)] for n in facts.notes]


def probe_result(
    raw: dict[str, Any], facts: NodeFacts, allreduce: AllReduceResult | None, fmt: str
) -> None:
    """GPU facts as a table, then the all-reduce in all_reduce_perf's layout and its peak busbw
    with its size; or the probe's JSON document (the node's documents as they validated, and
    the peak)."""
    from envtool.report.nccl_summary import peak_entry, peak_line
    from envtool_node.perf import LARGE

    if fmt == "json":
        peak = None if allreduce is None else peak_entry(allreduce.rows, LARGE)
        console.echo_json({"schema": schemas.PROBE, **raw, "peak": peak})
        return
    console.table("node facts", ["fact", "value"], _fact_rows(facts))
    if allreduce is not None:
        from envtool.report.nccl_text import format_allreduce

        click.echo(format_allreduce(allreduce), nl=False)
        if allreduce.rows and allreduce.nranks > 1:  # one rank: busbw is 0, the note says why
            click.echo(peak_line(allreduce.rows, LARGE))


def nccl_result(run: NcclRun, min_bytes: int, fmt: str) -> None:
    """An nccl-tests log (of all_reduce_perf or another collective): its rows, which collective
    (and the runs it skipped), then its peak busbw and the size where it was reached
    (said not bandwidth-bound when the sweep stops below ``min_bytes``) beside the average."""
    if fmt == "json":
        from envtool.report.nccl_text import nccl_document

        console.echo_json(nccl_document(run, min_bytes))
        return
    from envtool.report.nccl_summary import collective_lines, peak_line
    from envtool.report.nccl_text import format_run

    click.echo(format_run(run), nl=False)
    click.echo(f"ranks: {run.nranks or '?'}   NCCL: {run.nccl_version or '?'}")
    for line in collective_lines(run):  # which collective; a log's other runs, skipped
        click.echo(line)
    click.echo(peak_line(run.rows, min_bytes))
    if run.avg_busbw is not None:
        click.echo(
            f"the tool's average over all sizes (understates the link): {run.avg_busbw:g} GB/s"
        )
