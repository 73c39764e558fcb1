"""When the job started, the moment the kernel log is kept from: ``--since``, else
SLURM_JOB_START_TIME (a job's own environment in newer Slurm; the Epilog of Slurm 22.05 has
none), else the StartTime ``scontrol show job`` says, else the oldest of the files gathered,
else none (the whole log since boot, bounded). Which one was used is said in collect.json."""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from envtool.errors import InputError, shown

VARIABLE = "SLURM_JOB_START_TIME"


@dataclass(frozen=True)
class Since:
    epoch: float | None
    source: str  # one of protocol/collect_record.SINCE_FROM


def epoch(text: str, what: str) -> float:
    """Epoch seconds written as digits (``1714557600``, ``1714557600.25``); InputError when not."""
    head, _, tail = text.partition(".")
    if not (head.isascii() and head.isdigit() and len(head) <= 12) or not (
        tail == "" or (tail.isascii() and tail.isdigit() and len(tail) <= 9)
    ):
        raise InputError(f"{what} {shown(text, 40)} is not epoch seconds (date +%s)")
    return float(text)


def start_time(scontrol_text: str) -> float | None:
    """The job's StartTime of ``scontrol -o show job`` text (local time, as slurmctld wrote
    it), or None (Unknown, absent, or not that form)."""
    for word in scontrol_text.split():
        key, _, value = word.partition("=")
        if key == "StartTime":
            try:
                return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S").timestamp()
            except ValueError:
                return None
    return None


def _scontrol(job_id: str, env: Mapping[str, str]) -> float | None:
    from envtool import proc

    scontrol = shutil.which("scontrol", path=env.get("PATH"))
    if scontrol is None:
        return None
    try:  # job_id is checked (gather/names.SAFE): never read as an option
        ran = proc.run([scontrol, "-o", "show", "job", job_id], timeout=10, check=False,
                       limits=(1024 * 1024, 64 * 1024))  # fmt: skip
    except proc.ProcessError:
        return None
    return start_time(ran.stdout) if ran.returncode == 0 else None


def job_start(given: float | None, job_id: str, env: Mapping[str, str]) -> Since | None:
    """The start from ``--since``, the variable or scontrol; None when none of them knows it."""
    if given is not None:
        return Since(given, "--since")
    if env.get(VARIABLE):
        return Since(epoch(env[VARIABLE], VARIABLE), VARIABLE)
    found = _scontrol(job_id, env)
    return Since(found, "scontrol") if found is not None else None


def from_files(mtimes: Iterable[float]) -> Since:
    """The oldest of the files' times (a job writes its files after it starts), else none."""
    oldest = min((t for t in mtimes if t > 0), default=None)
    return Since(oldest, "files") if oldest is not None else Since(None, "none")
