"""Several commands run at once under one deadline, their output read to a bound: what the GPU
layer asks of ``nvidia-smi`` (a dead GPU can hang it; a broken one can print without end)."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from typing import IO, NamedTuple

LIMIT = 4 * 1024 * 1024  # bytes of output kept per command; more is that command's failure
REAP_S = 1.0  # seconds a killed command is waited for


class Ran(NamedTuple):
    """What one command did: its exit status (None when it did not end by itself), its
    output (stdout and stderr together, at most LIMIT bytes), and why it failed if it did."""

    rc: int | None
    out: bytes
    failure: str | None


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: children go too
    # a process stuck in the kernel (a dead GPU's driver) ignores even SIGKILL: left, not
    # waited for without end
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(REAP_S)


def _start(argv: list[str]) -> subprocess.Popen[bytes] | str:
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return "cannot run %s: %s" % (argv[0], exc.strerror or exc)


def _pump(
    procs: list[subprocess.Popen[bytes] | str], bufs: list[bytearray], end: float
) -> set[int]:
    """Read every output until EOF, the deadline or the bound; the indexes over the bound."""
    over: set[int] = set()
    sel = selectors.DefaultSelector()
    for i, proc in enumerate(procs):
        if not isinstance(proc, str) and proc.stdout is not None:
            sel.register(proc.stdout, selectors.EVENT_READ, i)
    try:
        while sel.get_map():
            left = end - time.monotonic()
            if left <= 0:
                break
            for key, _ in sel.select(left):
                stream: IO[bytes] = key.fileobj  # type: ignore[assignment]
                chunk = os.read(stream.fileno(), 65536)
                i = key.data
                room = LIMIT - len(bufs[i])
                bufs[i] += chunk[:room]
                if not chunk or len(chunk) > room:
                    sel.unregister(stream)
                    if chunk:
                        over.add(i)
    finally:
        sel.close()
    return over


def run_all(argvs: list[list[str]], seconds: float) -> list[Ran]:
    """Start every command at once; each ends by itself within ``seconds`` or is killed."""
    end = time.monotonic() + seconds
    procs = [_start(argv) for argv in argvs]
    bufs = [bytearray() for _ in argvs]
    out: list[Ran] = []
    try:
        over = _pump(procs, bufs, end)
        for i, proc in enumerate(procs):
            if isinstance(proc, str):
                out.append(Ran(None, b"", proc))
                continue
            if i in over:
                _kill(proc)
                out.append(Ran(None, bytes(bufs[i]), "printed more than %d bytes" % LIMIT))
                continue
            try:
                rc = proc.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill(proc)
                late = "did not answer within %g s" % round(seconds, 1)
                out.append(Ran(None, bytes(bufs[i]), late))
                continue
            out.append(Ran(rc, bytes(bufs[i]), None))
    finally:
        for proc in procs:
            if not isinstance(proc, str):
                if proc.poll() is None:
                    _kill(proc)
                if proc.stdout is not None:
                    proc.stdout.close()
    return out
