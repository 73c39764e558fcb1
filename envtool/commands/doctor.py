"""``envtool doctor``: this machine checked step by step, the fix under each failure."""

from __future__ import annotations

from envtool.doctor.run import DoctorOptions, exit_ok
from envtool.doctor.run import run as run_steps
from envtool.errors import EXIT_OK, EXIT_PROBLEMS
from envtool.report.console import step
from envtool.report.doctor import DoctorReport


def run(options: DoctorOptions, install_missing: bool, fmt: str, fix: bool = False) -> int:
    """0 when no step failed; ``fix``: this machine's prefix brought to the lock first
    (``envtool fix`` on one machine: a new generation, checked, switched in one step)."""
    if fix:
        _fix(options, fmt)
    out = DoctorReport(fmt)
    offer = lambda p: install_missing or out.offer_install(p)  # noqa: E731
    done = run_steps(options, out.step, offer, lambda what: step(f"doctor: {what}"))
    out.finish(done)
    return EXIT_OK if exit_ok(done) else EXIT_PROBLEMS


def _fix(options: DoctorOptions, fmt: str) -> None:
    """The plan carried out on this machine's prefix (its failure: the doctor's exit code)."""
    from envtool.fix import answer, apply
    from envtool.lock import prefixes, stamp
    from envtool.report import fix_text
    from envtool_node.stamp import read as read_stamp

    prefix = prefixes.locate(options.prefix, options.lock_path)
    fix = apply.FixOptions(options.lock_path, prefix, options.platform, apply=True,
                           mirrors=options.mirrors,
                           allow_insecure_url=options.allow_insecure_url)  # fmt: skip
    outcome = apply.run(fix)
    if fmt == "text":
        said = (read_stamp(str(prefix)) or {}).get("lock_sha256", "")
        rec = answer.record(outcome, str(prefix), stamp=said)
        fix_text.show_local(rec, stamp.lock_hash(options.lock_path))
