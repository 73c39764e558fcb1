"""The words of the limits findings (judge/limits.py carries the numbers: bytes, counts,
seconds); report/labels.py asks here first. kernel/glibc differing take the common words."""

from __future__ import annotations

from envtool.judge.findings import Finding, Kind
from envtool.judge.limits import CONTAINER, DOCKER_RUN

GiB, MiB = 1024**3, 1024**2


def size(text: str) -> str:
    """``67108864`` → ``64 MiB``; ``1073741824`` → ``1 GiB``; ``-1`` → ``unlimited``."""
    n = int(text)
    if n < 0:
        return "unlimited"
    for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (1024, "KiB")):
        if n >= unit:
            return f"{n / unit:.4g} {name}"
    return f"{n} bytes"


def _shm_fix(floor: int) -> str:
    gib = max(8, -(-floor // GiB))  # 8 GiB, or the threshold rounded up when it is more
    return (f"give the node a /dev/shm of {size(str(floor))} or more: in a container, docker "
            f"run --shm-size={gib}g (or --ipc=host); on a host, a bigger tmpfs (mount -o "
            f"remount,size={gib}G /dev/shm)")  # fmt: skip


def _set_by(f: Finding) -> str:
    """`` (set by docker run --shm-size=64m: the runtime's, not the image's)`` for a limit a
    container runtime set; "" for a node's own."""
    if f.cause == DOCKER_RUN:
        option = f.where or "Docker's default: no option set it"
        return f" (set by docker run {option}: the runtime's, not the image's)"
    if f.cause == CONTAINER:
        return " (the running container's, as it was started)"
    return ""


def _runtime_fix(f: Finding) -> str | None:
    """The docker run option that fixes a limit the container runtime set; None otherwise."""
    if f.cause not in (DOCKER_RUN, CONTAINER):
        return None
    if f.kind is Kind.SHM_SMALL:
        option, alternative = (
            f"--shm-size={max(1, -(-int(f.expected) // GiB))}g",
            " (or --ipc=host)",
        )
    elif f.kind is Kind.MEMLOCK_LOW:
        option, alternative = "--ulimit=memlock=-1", " (dockerd needs LimitMEMLOCK=infinity)"
    else:
        option, alternative = f"--ulimit=nofile={f.expected}:{f.expected}", ""
    if f.cause == DOCKER_RUN:
        return (f"start the container with {option}{alternative}, in the job's docker run as in "
                f"this check's (--docker-run-arg={option}): the image is not at fault")  # fmt: skip
    return (f"recreate the container with docker run {option}{alternative}: a running "
            "container keeps the limits it was started with")  # fmt: skip


def limit_words(f: Finding) -> tuple[str, str, str] | None:
    """(expected, actual, fix) of a limits finding; None for any other kind. A limit a
    container runtime set is worded as the runtime's, its fix the docker run option."""
    found = _limit_words(f)
    if found is None or f.kind is Kind.CLOCK_SKEW:
        return found
    expected, actual, fix = found
    return expected, actual + _set_by(f), _runtime_fix(f) or fix


def _limit_words(f: Finding) -> tuple[str, str, str] | None:
    if f.kind is Kind.SHM_SMALL:
        return f"at least {size(f.expected)}", size(f.actual), _shm_fix(int(f.expected))
    if f.kind is Kind.MEMLOCK_LOW:
        fix = ("set ulimit -l unlimited for the job: memlock unlimited in "
               "/etc/security/limits.conf, LimitMEMLOCK=infinity for slurmd or dockerd, docker "
               "run --ulimit memlock=-1")  # fmt: skip
        return "unlimited (InfiniBand is present)", f"{size(f.actual)} (soft)", fix
    if f.kind is Kind.NOFILE_LOW:
        soft, _, hard = f.actual.partition(" ")
        hard_text = "unlimited" if hard == "-1" else hard
        fix = (f"raise ulimit -n to {f.expected} or more: ulimit -n in the job script (up to "
               f"the hard limit, {hard_text}), nofile in /etc/security/limits.conf, docker run "
               f"--ulimit nofile={f.expected}:{f.expected}")  # fmt: skip
        return f"at least {f.expected} (soft)", f"{soft} (hard {hard_text})", fix
    if f.kind is Kind.CLOCK_SKEW:
        offset, _, bound = f.actual.partition(" ")
        way = "ahead of" if not offset.startswith("-") else "behind"
        actual = f"{offset.lstrip('+-')} s {way} envtool's (± {bound} s)"
        fix = "sync the node's clock (chrony or NTP: chronyc tracking, timedatectl)"
        return f"within {f.expected} s of envtool's clock", actual, fix
    return None


def limit_short(f: Finding) -> str | None:
    """A limits finding in a few words, for a summary line; None for any other kind."""
    if f.kind is Kind.SHM_SMALL:
        return f"/dev/shm {size(f.actual)}"
    if f.kind is Kind.MEMLOCK_LOW:
        return f"ulimit -l {size(f.actual)}"
    if f.kind is Kind.NOFILE_LOW:
        return f"ulimit -n {f.actual.partition(' ')[0]}"
    if f.kind is Kind.CLOCK_SKEW:
        return f"clock {f.actual.partition(' ')[0]} s"
    return None
