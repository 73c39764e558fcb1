"""Printing for ``envtool doctor``: a ✓/✗ line per step as it finishes, the fix under each ✗."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import click

from envtool.protocol.schemas import DOCTOR
from envtool.report.text import visible

# A step's status as the doctor's steps (envtool/doctor/steps.py) spell it; this module words
# the steps it is handed and imports nothing of the doctor (no package cycle).
PASS, FAIL, WARN, SKIP = "pass", "fail", "warn", "skip"


class Step(Protocol):
    """One finished step, as ``envtool/doctor/steps.Step`` holds it."""

    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def fix(self) -> str: ...


MARKS = {PASS: "✓", FAIL: "✗", WARN: "!", SKIP: "-"}
COLOURS = {PASS: "green", FAIL: "red", WARN: "yellow", SKIP: "bright_black"}


def colour() -> bool | None:
    """False where the user asked for no colour (``NO_COLOR`` set and not empty, as
    no-color.org says); else None: click colours a terminal only."""
    return False if os.environ.get("NO_COLOR") else None


def _mark(status: str) -> str:
    """The step's mark; plain ASCII where the terminal's encoding cannot print ✓ and ✗."""
    mark = MARKS[status]
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        mark.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        mark = {PASS: "ok", FAIL: "FAIL", WARN: "warn", SKIP: "skip"}[status]
    return mark


class DoctorReport:
    """Streams the steps (text) or collects them (JSON)."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def step(self, step: Step) -> None:
        """One finished step."""
        if self.fmt != "text":
            return
        mark = click.style(_mark(step.status), fg=COLOURS[step.status], bold=True)
        click.echo(f"{mark} {step.name:<12} {visible(step.summary)}", color=colour())
        if step.fix and step.status in (FAIL, WARN):
            click.echo(f"  {'':<12} fix: {visible(step.fix)}")

    def offer_install(self, prefix: Path) -> bool:
        """Ask on a terminal whether to install the missing environment; never elsewhere."""
        if self.fmt != "text" or not sys.stdin.isatty():
            return False
        return click.confirm(f"  install the locked environment into {prefix} now?", default=True)

    def finish(self, steps: Sequence[Step]) -> None:
        """The closing line, or the whole JSON document."""
        failed = [s.name for s in steps if s.status == FAIL]
        warned = [s.name for s in steps if s.status == WARN]
        if self.fmt == "json":
            doc = {
                "schema": DOCTOR,
                "ok": not failed,
                "steps": [
                    {"name": s.name, "status": s.status, "summary": s.summary, "fix": s.fix or None}
                    for s in steps
                ],
            }
            click.echo(json.dumps(doc, indent=2))
            return
        if failed:
            click.echo(
                f"\n{len(failed)} of {len(steps)} checks failed ({', '.join(failed)}): run the "
                "fix lines above, then envtool doctor again."
            )
            return
        skipped = [s.name for s in steps if s.status == SKIP]
        passed = len(steps) - len(skipped)
        head = f"all {passed} checks passed" if not skipped else f"{passed} checks passed"
        notes = [f"{len(warned)} with warnings: {', '.join(warned)}"] if warned else []
        notes += [f"skipped: {', '.join(skipped)}"] if skipped else []
        extra = f" ({'; '.join(notes)})" if notes else ""
        ran = any(s.name == "ddp" and s.status == PASS for s in steps)
        what = "matches the lock and ran a DDP step" if ran else "matches the lock"
        click.echo(f"\n{head}{extra}: this environment {what}.")
