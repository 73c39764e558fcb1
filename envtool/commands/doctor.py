"""``envtool doctor``: this machine checked step by step, the fix under each failure."""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence

from envtool.doctor.run import DoctorOptions, Step, exit_ok
from envtool.doctor.run import run as run_steps
from envtool.errors import EXIT_OK, EXIT_PROBLEMS
from envtool.history.record import Recording
from envtool.report.console import step
from envtool.report.doctor import DoctorReport


def run(
    options: DoctorOptions,
    install_missing: bool,
    fmt: str,
    fix: bool = False,
    recording: Recording | None = None,
) -> int:
    """0 when no step failed; ``fix``: this machine's prefix brought to the lock first
    (``envtool fix`` on one machine: a new generation, checked, switched in one step);
    ``recording``: where the run is remembered (history/, as verify's runs are)."""
    if fix:
        _fix(options, fmt)
    out = DoctorReport(fmt)
    offer = lambda p: install_missing or out.offer_install(p)  # noqa: E731
    start = time.monotonic()
    done = run_steps(options, out.step, offer, lambda what: step(f"doctor: {what}"))
    out.finish(done)
    if recording is not None:
        _remember(recording, options, done, time.monotonic() - start)
    return EXIT_OK if exit_ok(done) else EXIT_PROBLEMS


def _remember(recording: Recording, options: DoctorOptions, done: Sequence[Step],
              seconds: float) -> None:  # fmt: skip
    """The run recorded as this machine's (its host name); a failure said, the verdict kept."""
    if recording.history is None and recording.metrics_file is None:
        return
    from envtool.doctor import history as doctor_run
    from envtool.history.record import remember
    from envtool.lock import stamp
    from envtool.report import history_text

    try:
        this = stamp.lock_hash(options.lock_path)
    except OSError:
        this = ""  # no lock: the lockfile step failed, and says so
    doc, made = doctor_run.document(done, socket.gethostname(), str(options.lock_path), this,
                                    seconds)  # fmt: skip
    said = remember(recording, doc, "doctor", made=made)
    if said:
        history_text.not_recorded(said)


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
