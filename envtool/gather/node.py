"""One node's collection for one job, start to end: the job's folder opened (or made), the
files found, the start of the job settled, the kernel log read, the plan made within the
bounds (pure), the host's temporary folder filled and renamed into place. Nothing is left
behind when a step fails: the temporary folder is removed before the error goes on."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from envtool.errors import ProblemFound
from envtool.gather import find, folder, kernel, since
from envtool.gather.copy import HostFolder
from envtool.gather.names import Who
from envtool.gather.plan import Limits, Take, plan
from envtool.protocol import collect_record as cr

# The quick verify document of this node, as bytes, or None and why it could not be made.
Preflight = Callable[[], tuple[bytes | None, str | None]]
PREFLIGHT_FROM = "envtool preflight --quick --no-lock (in process)"


@dataclass(frozen=True)
class Request:
    """What to gather, for whom, and where to."""

    dest: Path
    who: Who
    since: float | None  # --since
    fr: tuple[str, ...]  # --fr
    error_files: tuple[str, ...]  # --error-file
    kernel_log: str | None  # --kernel-log
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class Outcome:
    folder: Path  # DEST/JOBID/HOST
    placed: str  # folder.put_in_place's "new", "replaced", ...
    record: cr.CollectRecord


def _kernel_parts(log: kernel.KernelLog) -> tuple[bytes | None, list[cr.LeftOut], list[str]]:
    if log.why is not None:
        return None, [], [f"kernel log not read: {log.why}"]
    left = []
    if log.partial is not None:
        left.append(cr.LeftOut(log.source, f"the read {log.partial}"))
    if log.dropped:
        left.append(cr.LeftOut(log.source, f"{log.dropped:,} oldest records since the start: "
                                           "over the bound kept of the kernel log"))  # fmt: skip
    return "".join(f"{line}\n" for line in log.lines).encode(), left, []


def _made(req: Request, env: Mapping[str, str], preflight: Preflight | None,
          found: find.Found) -> tuple[since.Since, list[tuple[str, bytes, str, str]],
                                      list[cr.LeftOut], list[str]]:  # fmt: skip
    """The start used, the files envtool makes (rel, data, from, kind), and what was left
    out of them or failed."""
    start = since.job_start(req.since, req.who.job_id, env) or since.from_files(
        c.mtime for c in found.candidates if c.refused is None
    )
    log = kernel.read(start.epoch, req.kernel_log, req.limits.kernel_bytes)
    data, left, errors = _kernel_parts(log)
    made = [("kernel.log", data, log.source, "kernel-log")] if data is not None else []
    if preflight is not None:
        doc, why = preflight()
        if doc is not None:
            made.append(("preflight.json", doc, PREFLIGHT_FROM, "preflight"))
        if why is not None:
            errors.append(f"preflight: {why}")
    return start, made, left, errors


def _build(job_fd: int, req: Request, made: list[tuple[str, bytes, str, str]],
           takes: tuple[Take, ...], start: since.Since, left: list[cr.LeftOut],
           errors: list[str]) -> tuple[str, cr.CollectRecord]:  # fmt: skip
    """The host's temporary folder filled, its collect.json last, renamed into place; the
    temporary folder removed when any of it fails."""
    who = req.who
    temp, fd = folder.temp_folder(job_fd, who.host)
    try:
        host = HostFolder(fd, who.owner, req.limits)
        try:
            files = [host.write(*m) for m in made]
            for take in takes:
                copied = host.copy(take)
                if isinstance(copied, cr.CollectedFile):
                    files.append(copied)
                else:
                    left.append(copied)
            record = cr.CollectRecord(who.host, who.job_id, who.owner.user, start.epoch,
                                      start.source, round(time.time(), 3), tuple(files),
                                      tuple(left), tuple(errors))  # fmt: skip
            host.write("collect.json", cr.dumps(record).encode(), "envtool collect", "log")
        finally:
            host.close()
        return folder.put_in_place(job_fd, temp, who.host), record
    except BaseException:
        with contextlib.suppress(OSError):
            folder.remove_tree(job_fd, temp)
        raise


def collect(req: Request, env: Mapping[str, str], preflight: Preflight | None) -> Outcome:
    """Gather this node's files for ``req.who``'s job into DEST/JOBID/HOST (InputError for
    a DEST or job folder that cannot be used; ProblemFound when writing fails: nothing left)."""
    who = req.who
    job_fd = folder.job_folder(req.dest, who.job_id, who.owner)
    target = req.dest / who.job_id / who.host
    try:
        found = find.find(find.fr_prefixes(req.fr, env),
                          find.error_patterns(req.error_files, env), who.owner.uid)  # fmt: skip
        start, made, left, errors = _made(req, env, preflight, found)
        left += [cr.LeftOut(source, why) for source, why in found.overflow]
        chosen = plan(found.candidates, req.limits, (len(made), sum(len(m[1]) for m in made)))
        left += [cr.LeftOut(origin, why) for origin, why in chosen.left_out]
        placed, record = _build(job_fd, req, made, chosen.takes, start, left, errors)
    except OSError as exc:
        raise ProblemFound(f"{target}: cannot write the node's folder: {exc.strerror or exc}"
                           " (nothing left behind)") from None  # fmt: skip
    finally:
        os.close(job_fd)
    return Outcome(target, placed, record)
