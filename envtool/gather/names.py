"""Who and where a collection is for: the job id, this node's name and the job's user, read
from the options and Slurm's variables once and validated before any of them names a folder
(a job id or host name such as ``../x``, ``/``, NUL or a line break is refused, exit 2)."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from envtool.errors import InputError, shown

# A folder name: Slurm's job ids (1234, 1234_7 of an array, 1234+1 of a heterogeneous job) and
# node names; never "." or "..", never a leading "-" or ".", never a separator or a control.
SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


@dataclass(frozen=True)
class Owner:
    """The job's user: who the folder and its files belong to."""

    uid: int
    gid: int  # -1: left as it is
    user: str
    chown: bool  # root collects (a Slurm Epilog): give the files to the job's user


@dataclass(frozen=True)
class Who:
    """One collection: which job, which node, whose."""

    job_id: str
    host: str
    owner: Owner


def folder_name(value: str, what: str, hint: str) -> str:
    """``value`` when it can name a folder under DEST; InputError (one line) when not."""
    if not SAFE.fullmatch(value):
        raise InputError(f"{what} {shown(value, 80)} cannot name a folder ({hint})")
    return value


def _number(env: Mapping[str, str], name: str) -> int | None:
    text = env.get(name, "")
    if not text:
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= 10):
        raise InputError(f"{name}={shown(text, 40)} is not a user or group id")
    return int(text)


def owner(env: Mapping[str, str], euid: int | None = None) -> Owner:
    """Root (an Epilog): the job's user of SLURM_JOB_UID (SLURM_JOB_GID, else its group);
    anyone else: themselves, whatever the variables say (only root can give files away)."""
    import pwd

    euid = os.geteuid() if euid is None else euid
    uid = _number(env, "SLURM_JOB_UID") if euid == 0 else None
    uid = euid if uid is None else uid
    try:
        entry: pwd.struct_passwd | None = pwd.getpwuid(uid)
    except KeyError:  # a uid with no passwd entry on this node (a directory service down)
        entry = None
    gid = _number(env, "SLURM_JOB_GID") if euid == 0 else None
    if gid is None:
        gid = entry.pw_gid if entry is not None else -1
    user = env.get("SLURM_JOB_USER") or (entry.pw_name if entry is not None else str(uid))
    return Owner(uid, gid, user, chown=euid == 0 and uid != 0)


def identify(job_id: str | None, env: Mapping[str, str], euid: int | None = None) -> Who:
    """The job (``--job-id``, else SLURM_JOB_ID), this node (SLURMD_NODENAME, else the host
    name) and the job's user; InputError when one is missing or cannot name a folder."""
    job = job_id if job_id is not None else env.get("SLURM_JOB_ID", "")
    if not job:
        raise InputError("no job id: give --job-id, or run in a Slurm job or Epilog (SLURM_JOB_ID)")
    folder_name(job, "job id", "a Slurm job id: digits, an array's 12_3, a het job's 12+1")
    host = env.get("SLURMD_NODENAME") or socket.gethostname()
    folder_name(host, "host name", "SLURMD_NODENAME, else this machine's host name")
    return Who(job, host, owner(env, euid))
