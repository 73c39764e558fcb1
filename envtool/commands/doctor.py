"""``envtool doctor``: this machine checked step by step, the fix under each failure."""

from __future__ import annotations

from envtool.doctor.run import DoctorOptions, exit_ok
from envtool.doctor.run import run as run_steps
from envtool.errors import EXIT_OK, EXIT_PROBLEMS
from envtool.report.console import step
from envtool.report.doctor import DoctorReport


def run(options: DoctorOptions, install_missing: bool, fmt: str) -> int:
    """0 when no step failed."""
    out = DoctorReport(fmt)
    offer = lambda p: install_missing or out.offer_install(p)  # noqa: E731
    done = run_steps(options, out.step, offer, lambda what: step(f"doctor: {what}"))
    out.finish(done)
    return EXIT_OK if exit_ok(done) else EXIT_PROBLEMS
