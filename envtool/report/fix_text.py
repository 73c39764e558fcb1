"""``envtool fix``'s report: the plan per node (add, replace, remove; what an install does not
fix, as verify's finding blocks), then with ``--apply`` what each node did and its verify
before → after; JSON (``envtool.fix/1``) with the same. Every value a node sent is made
visible (report/text.py)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

import click

from envtool.errors import InputError
from envtool.fix.plan import not_fixed, still_drifted
from envtool.protocol import schemas
from envtool.protocol.fix_record import FixRecord
from envtool.protocol.verify_report import VerifyDocument
from envtool.report import console, fix_junit
from envtool.report.text import visible
from envtool.report.verdict_text import finding_block, fold, plural

Records = Mapping[str, FixRecord]


def _errors(doc: VerifyDocument, host: str) -> int:
    return sum(1 for f in doc.findings if host in f.hosts and f.severity == "error")


def stamp_words(stamp: str, this: str) -> str:
    """``installed from this lock`` / ``from another lock (3f2a1b…)`` / ``no envtool stamp``."""
    if not stamp:
        return "no envtool stamp"
    return (
        "installed from this lock"
        if stamp == this
        else f"installed from another lock ({stamp[:12]})"
    )


def _node_lines(
    host: str, rec: FixRecord, before: VerifyDocument, this: str, width: int
) -> list[str]:
    lines = fold(f"{visible(host)}  {visible(rec.prefix)}  ({stamp_words(rec.stamp, this)})", width)
    if rec.error:
        lines += fold(f"error: {visible(rec.error)}", width, "    ", "      ")
    elif not rec.changes:
        lines += ["    matches the lock: left alone"]
    for c in rec.changes:
        said = {"add": c.after, "remove": c.before}.get(c.action, f"{c.before} → {c.after}")
        pip = " (pip)" if c.manager == "pip" else ""
        lines += fold(f"{c.action:<9} {visible(said)}{pip}", width, "    ", " " * 14)
    left = not_fixed(before, host)
    if left:
        lines.append("  not fixed by envtool (a package install cannot):")
        for f in left:
            lines += finding_block(f, f.follows, lambda hs: ", ".join(hs), width)
    return lines


def _document(before: VerifyDocument, plans: Records, done: Records,
              after: VerifyDocument | None) -> dict[str, object]:  # fmt: skip
    nodes = []
    for host, rec in plans.items():
        nodes.append({
            "host": host,
            "plan": asdict(rec),
            "not_fixed": [asdict(f) for f in not_fixed(before, host)],
            "result": asdict(done[host]) if host in done else None,
            "errors_before": _errors(before, host),
            "errors_after": _errors(after, host) if after is not None else None,
        })  # fmt: skip
    return {"schema": schemas.FIX, "applied": bool(done), "nodes": nodes}


def show_plan(before: VerifyDocument, plans: Records, fmt: str, this: str, applied: bool) -> None:
    """The plan (for JSON without --apply: the whole document; with it, the result follows)."""
    if fmt in ("json", "junit"):
        if not applied and fmt == "json":
            console.echo_json(_document(before, plans, {}, None))
        elif not applied:
            click.echo(fix_junit.render(plans, {}, None), nl=False)
        return
    width = console.width()
    differ = [h for h, r in plans.items() if r.changes]
    verb = "differs" if len(differ) == 1 else "differ"
    head = f"plan: {len(differ)} of {plural(len(plans), 'node')} {verb} from the lock"
    head += "" if applied else "; nothing changed (--apply carries it out)"
    lines = [head]
    for host, rec in plans.items():
        lines += ["", *_node_lines(host, rec, before, this, width)]
    click.echo("\n".join(lines))


def show_local(rec: FixRecord, this: str) -> None:
    """``envtool doctor --fix``: what this machine's prefix needed, and what was done."""
    width = console.width()
    lines = ["fix (this machine):"]
    for c in rec.changes:
        said = {"add": c.after, "remove": c.before}.get(c.action, f"{c.before} → {c.after}")
        pip = " (pip)" if c.manager == "pip" else ""
        lines += fold(f"{c.action:<9} {visible(said)}{pip}", width, "    ", " " * 14)
    if rec.applied:
        lines += fold(f"{visible(rec.prefix)} → {visible(rec.generation)} ({rec.switch}); "
                      f"{stamp_words(rec.stamp, this)}", width, "  ", "    ")  # fmt: skip
        if rec.source:
            lines += fold(f"installed: {visible(rec.source)}", width, "    ", "      ")
    else:
        lines += fold(f"{visible(rec.prefix)} matches the lock: nothing to fix", width, "  ")
    click.echo("\n".join(lines) + "\n")


def show_filled(shared: Path, count: tuple[int, int], fmt: str) -> None:
    """The shared cache filled before the nodes read it (conda packages, pip files; text
    only: JSON and JUnit carry each node's own source)."""
    conda, pip = count
    held = plural(conda, "conda package") + (f" and {plural(pip, 'pip file')}" if pip else "")
    if fmt == "text":
        click.echo(f"cache {visible(str(shared))}: {held} of the lock, filled from its URLs "
                   "(hash-checked)")  # fmt: skip


def confirm(nodes: int, yes: bool, verb: str = "fix") -> bool:
    """Asked once on a terminal; ``--yes`` for scripts (else bad input: never assumed)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise InputError(f"{verb} would change {plural(nodes, 'node')}: add --yes off a terminal")
    return click.confirm(f"{verb} {plural(nodes, 'node')} now?", default=False)


def matches(after: VerifyDocument, plans: Records) -> bool:
    """Every node matches the lock afterwards."""
    return not still_drifted(after) and not any(r.error for r in plans.values())


def show_result(
    before: VerifyDocument,
    after: VerifyDocument,
    plans: Records,
    done: Records,
    fmt: str,
    title: str = "fixed",
) -> None:
    """What each node did, and its verify errors before → after."""
    if fmt == "json":
        console.echo_json(_document(before, plans, done, after))
        return
    if fmt == "junit":
        click.echo(fix_junit.render(plans, done, after), nl=False)
        return
    width = console.width()
    left = still_drifted(after)
    ok = [h for h in done if not done[h].error and h not in left]
    verb = "matches" if len(ok) == 1 else "match"
    lines = ["", f"{title}: {len(ok)} of {plural(len(done), 'node')} now {verb} the lock"]
    for host, rec in done.items():
        did = (f"{visible(rec.prefix)} → {visible(rec.generation)} ({rec.switch})"
               if rec.applied else f"not fixed: {visible(rec.error)}")  # fmt: skip
        count = f"errors {_errors(before, host)} → {_errors(after, host)}"
        lines += fold(f"{visible(host)}  {did}; {count}", width, "", "    ")
        if rec.source:
            lines += fold(f"installed: {visible(rec.source)}", width, "    ", "      ")
        if rec.removed:
            lines += fold(f"removed: {', '.join(visible(r) for r in rec.removed)}", width,
                          "    ", "      ")  # fmt: skip
        if rec.kept_in_use:
            kept = ", ".join(visible(k) for k in rec.kept_in_use)
            lines += fold(f"kept, in use: {kept}", width, "    ", "      ")
        if rec.unread and (rec.removed or rec.kept_in_use):
            lines += fold(f"not checked: {rec.unread} processes this user cannot read (another "
                          "user's, or the system's); a generation one of them could reach by "
                          "its folders' modes is kept with its pid, never removed (run the fix "
                          "as root to check them)", width, "    ", "      ")  # fmt: skip
    untouched = [h for h in plans if h not in done]
    if untouched:
        lines += fold(f"left alone: {', '.join(visible(h) for h in untouched)}", width)
    click.echo("\n".join(lines))
