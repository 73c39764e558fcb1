"""The options ``verify --transport docker --image`` gives ``docker run``: the runtime a DDP job
starts its container with, not Docker's bare defaults (pure).

NVIDIA's guidance starts NCCL containers with ``--shm-size=1g --ulimit memlock=-1 --ulimit
stack=67108864`` (or ``--ipc=host``); Docker's own defaults (a 64 MiB ``/dev/shm``) are what
no job runs with, so an image checked under them fails for what the runtime decides. Each
``--docker-run-arg`` is one option from a short allow-list, checked here (never a shell string,
never an option that mounts, privileges or replaces the command); one naming the same option
(or the same ulimit) as a default replaces it. judge/limits.Runtime says which option set
/dev/shm and each ulimit, so a failing limit is worded as the runtime's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from envtool.errors import InputError
from envtool.judge.limits import Runtime

DEFAULTS = (
    "--shm-size=1g",
    "--ulimit=memlock=-1",
    "--ulimit=stack=67108864",
    "--network=none",
)
ULIMITS = ("memlock", "stack", "nofile", "nproc", "core")

_SIZE = re.compile(r"[0-9]{1,15}[bkmgBKMG]?")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_LIMIT = re.compile(r"(-1|[0-9]{1,19})(:(-1|[0-9]{1,19}))?")
# docker reads --gpus as CSV: several devices go in quotes ("device=0,1"), as its docs say
_GPUS = re.compile(
    r'all|[0-9]{1,3}|device=[A-Za-z0-9-]{1,64}|"device=[A-Za-z0-9-]{1,64}(,[A-Za-z0-9-]{1,64}){1,63}"'
)


def _ulimit(value: str) -> bool:
    name, sep, limit = value.partition("=")
    return bool(sep) and name in ULIMITS and _LIMIT.fullmatch(limit) is not None


ALLOWED: dict[str, Callable[[str], bool]] = {
    "--shm-size": lambda v: _SIZE.fullmatch(v) is not None,
    "--ipc": lambda v: v in ("host", "private", "shareable", "none"),
    "--network": lambda v: _NAME.fullmatch(v) is not None,
    "--ulimit": _ulimit,
    "--gpus": lambda v: _GPUS.fullmatch(v) is not None,
    "--runtime": lambda v: _NAME.fullmatch(v) is not None,
}


def normal(arg: str) -> str:
    """One ``--docker-run-arg`` as ``--NAME=VALUE``; InputError (exit 2) for anything off the
    allow-list or not one option with one value."""
    name, sep, value = arg.replace(" ", "=", 1).partition("=")
    check = ALLOWED.get(name)
    if not sep or check is None or not check(value):
        allowed = ", ".join(f"{n}=…" for n in ALLOWED)
        raise InputError(
            f"--docker-run-arg {arg!r}: expected one docker run option with its value, one of "
            f"{allowed} (--ulimit takes {'|'.join(ULIMITS)}=SOFT[:HARD])"
        )
    return f"{name}={value}"


def _key(option: str) -> str:
    """What an option sets: ``--shm-size``, or ``--ulimit=memlock`` for a ulimit."""
    name, _, value = option.partition("=")
    return f"{name}={value.partition('=')[0]}" if name == "--ulimit" else name


def options(user: Sequence[str], gpus: bool) -> tuple[str, ...]:
    """The options docker run gets: the defaults (``--gpus=all`` where this machine has an
    NVIDIA driver), each in its place replaced by the user's option of the same key (the last
    one given), then the user's others. An ``--ipc`` mode the user sets drops the default
    ``--shm-size`` (Docker ignores it beside ``--ipc=host``)."""
    mine = {_key(o): o for o in (normal(a) for a in user)}
    defaults = [*DEFAULTS, *(["--gpus=all"] if gpus else [])]
    if "--ipc" in mine:
        defaults = [d for d in defaults if _key(d) != "--shm-size"]
    placed = [mine.get(_key(d), d) for d in defaults]
    return (*placed, *(o for k, o in mine.items() if k not in {_key(d) for d in defaults}))


def runtime(chosen: Sequence[str]) -> Runtime:
    """Which of ``chosen`` set /dev/shm and each ulimit the limits are judged on ("": Docker's
    default)."""
    last = {_key(o): o for o in chosen}
    ipc = last.get("--ipc", "")
    shm = ipc if ipc in ("--ipc=host", "--ipc=none") else last.get("--shm-size", ipc)
    return Runtime(
        "docker-run",
        shm,
        last.get("--ulimit=memlock", ""),
        last.get("--ulimit=nofile", ""),
    )


# Linux's RLIMIT_* numbers, as runc names the one it could not set, by docker's names
_RLIMITS = {"3": "stack", "4": "core", "6": "nproc", "7": "nofile", "8": "memlock"}


def refused_limit(detail: str) -> str:
    """The ulimit the Docker engine could not give a container (runc's ``error setting rlimit
    type 8``: the engine's own hard limit is lower, as under rootless Docker); "" for any other
    failure."""
    number = detail.partition("error setting rlimit type ")[2].partition(":")[0]
    return _RLIMITS.get(number, "")


def without_refused(chosen: Sequence[str], user: Sequence[str], details: Sequence[str]) -> str:
    """The default ulimit option of ``chosen`` that the engine refused (``details``: why each
    host failed), to run again without it; "" when none was refused, or the user asked for it
    (then the refusal is the user's to see)."""
    given = {_key(normal(a)) for a in user}
    for detail in details:
        name = refused_limit(detail)
        key = f"--ulimit={name}"
        option = next((o for o in chosen if _key(o) == key), "")
        if name and option and key not in given:
            return option
    return ""
