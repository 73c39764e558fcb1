"""The limits under the environment as a node reports them (envtool.limits/1) and its clock
reading, as frozen dataclasses (validated data; protocol/limit_fields.py reads them)."""

from __future__ import annotations

from dataclasses import dataclass

UNLIMITED = -1  # a resource limit of RLIM_INFINITY


@dataclass(frozen=True)
class Limits:
    """/dev/shm, the open-files and locked-memory limits, the kernel and the C library."""

    shm_bytes: int | None  # None: /dev/shm could not be read (``shm_error`` says why)
    shm_error: str = ""
    nofile: tuple[int, int] = (UNLIMITED, UNLIMITED)  # (soft, hard), -1 unlimited
    memlock: tuple[int, int] = (UNLIMITED, UNLIMITED)
    kernel: str = ""
    glibc: str | None = None  # None: not glibc (musl), or not known


@dataclass(frozen=True)
class ClockReading:
    """The node's wall clock when it printed its answer, and how long it had run by then."""

    time: float  # the node's time.time()
    elapsed: float  # seconds since the node process started (monotonic)


def clock_offset(
    reading: ClockReading, started: float, seconds: float
) -> tuple[float, float] | None:
    """(offset, bound): the node's clock minus the controller's, known to ± bound.

    The controller started the transport at ``started`` (its time.time()) and had the answer
    ``seconds`` later; the node printed ``elapsed`` seconds after it started, which was after
    the transport started: it printed at a controller time in [started + elapsed, started +
    seconds]. The offset is taken against that interval's middle, the bound is half its width.
    None when the start is unknown (0). A node that claims to have run longer than its
    transport is not believed: its elapsed counts as 0 (the widest bound)."""
    if started <= 0 or seconds < 0:
        return None
    elapsed = reading.elapsed if 0 <= reading.elapsed <= seconds else 0.0
    middle = started + (elapsed + seconds) / 2
    return reading.time - middle, (seconds - elapsed) / 2
