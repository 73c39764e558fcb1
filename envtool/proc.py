"""The one place envtool starts processes: argv lists only, a deadline, the whole group killed."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envtool.errors import ResourceError, ToolError

# What a process start fails with when envtool itself is out of a resource (not the command).
RESOURCE_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN)
Stop = tuple[int, float]  # the signal that asks a process group to stop, the seconds it gets


@dataclass(frozen=True)
class Result:
    """What a finished process left behind."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    overflow: str = ""  # "stdout" or "stderr": that stream passed its limit; the process stopped


class ProcessError(ToolError):
    """A process exited non-zero, could not start, or ran past its deadline."""

    def __init__(self, message: str, result: Result | None = None) -> None:
        super().__init__(message)
        self.result = result


def open_files_limit() -> int:
    """The soft limit on this process's open files (``ulimit -n``)."""
    import resource

    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def resource_error(command: str, exc: OSError) -> ResourceError:
    """envtool's own error for a start that failed for want of a resource, with the fix."""
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        fix = f"ulimit -n is {open_files_limit()}: lower --fanout, or raise ulimit -n"
    else:
        fix = "this machine is out of memory or processes: lower --fanout"
    return ResourceError(f"cannot start {command}: {exc.strerror}; {fix}")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


_log = logging.getLogger("envtool")  # -v: each command envtool starts


def _shown(args: tuple[str, ...]) -> str:
    """A command line for -v: one line, at most 240 characters, URL credentials hidden."""
    import re
    import shlex

    short = [a if len(a) <= 100 else f"<{len(a)} characters>" for a in args]  # the node script
    text = " ".join(shlex.join(short).split())
    text = re.sub(r"//[^/@\s]+@", "//***@", re.sub(r"/t/[^/\s]+/", "/t/***/", text))
    return text if len(text) <= 240 else text[:237] + "..."


def run(
    argv: Sequence[str],
    *,
    input: str | bytes | None = None,
    stdin_path: Path | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    check: bool = True,
    limits: tuple[int | None, int | None] = (None, None),
    stop: Stop = (signal.SIGTERM, 1.0),
) -> Result:
    """Run ``argv`` to completion; raise ProcessError on failure when ``check``. ``limits``
    bound stdout and stderr while they are read: a process that writes more is stopped and
    its Result says which stream overflowed (what it wrote up to the limit is kept);
    ``stdin_path``: a file read as its stdin (what is too big to hold: a pushed cache). ``stop``:
    the signal that asks it to stop (srun passes SIGUSR2 on to its tasks as it is, but turns
    SIGTERM into their SIGKILL), and how long it gets before SIGKILL."""
    args = tuple(str(a) for a in argv)
    _log.debug("running %s", _shown(args))
    full_env = {**os.environ, **env} if env is not None else None
    stdin: Any = subprocess.PIPE if input is not None else subprocess.DEVNULL
    with contextlib.ExitStack() as files, _signals_deferred() as deferred:
        if stdin_path is not None:  # a Ctrl-C inside Popen would orphan the child: deferred
            try:
                stdin = files.enter_context(stdin_path.open("rb"))
            except OSError as exc:
                raise ProcessError(f"cannot read {stdin_path}: {exc.strerror}") from None
        try:
            proc = subprocess.Popen(
                args,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:
            if exc.errno in RESOURCE_ERRNOS:
                raise resource_error(args[0], exc) from None
            raise ProcessError(f"cannot run {args[0]}: {exc.strerror}") from None
        with _LOCK:
            _ACTIVE[proc] = stop
    try:
        for signum in deferred:  # delivered now, where the child is stopped with us
            signal.raise_signal(signum)
        data = input.encode() if isinstance(input, str) else input
        streams = _Streams(proc, limits)
        deadline = None if timeout is None else time.monotonic() + timeout
        overflow = streams.pump(data, deadline)
        if overflow:
            _stop([proc])
        proc.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _stop([proc])
        streams.drain()
        proc.wait()
        result = Result(args, -9, *streams.texts())
        raise ProcessError(f"{args[0]} timed out after {timeout:g} s", result) from None
    except BaseException:  # Ctrl-C: let it clean up (its own children too), then kill
        _stop([proc])
        proc.wait()
        raise
    finally:
        with _LOCK:
            _ACTIVE.pop(proc, None)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    result = Result(args, proc.returncode, *streams.texts(), overflow)
    if check and proc.returncode != 0:
        detail = _last_line(result.stderr) or _last_line(result.stdout) or "no output"
        raise ProcessError(f"{args[0]} exited {proc.returncode}: {detail}", result)
    return result


class _Streams:
    """stdin fed and stdout/stderr read at once, each output bounded while it is read."""

    CHUNK = 65536

    def __init__(self, proc: subprocess.Popen[bytes], limits: tuple[int | None, int | None]):
        assert proc.stdout is not None and proc.stderr is not None
        self.proc = proc
        self.bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
        self.caps = dict(zip(self.bufs, limits, strict=True))
        self.names = dict(zip(self.bufs, ("stdout", "stderr"), strict=True))
        self.open = [proc.stdout, proc.stderr]

    def pump(self, data: bytes | None, deadline: float | None) -> str:
        """Until both outputs end; the stream that overflowed, or "". TimeoutExpired at the
        deadline (the process is then still running)."""
        stdin, view = self.proc.stdin, memoryview(data or b"")
        with selectors.DefaultSelector() as sel:
            for pipe in self.open:
                sel.register(pipe, selectors.EVENT_READ)
            if stdin is not None and len(view):
                os.set_blocking(stdin.fileno(), False)
                sel.register(stdin, selectors.EVENT_WRITE)
            elif stdin is not None:
                stdin.close()
            while len(sel.get_map()):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.proc.args, 0)
                for key, _ in sel.select(left):
                    if key.fileobj is stdin and stdin is not None:
                        view = self._feed(sel, stdin, view)
                    elif self._read(sel, key.fd, key.fileobj):
                        return self.names[key.fd]
        return ""

    def _feed(self, sel: selectors.BaseSelector, stdin: Any, view: memoryview) -> memoryview:
        try:
            view = view[os.write(stdin.fileno(), view[: self.CHUNK]) :]
        except BlockingIOError:
            return view
        except BrokenPipeError:  # the process does not read its input: that is its business
            view = view[len(view) :]
        if not len(view):
            sel.unregister(stdin)
            stdin.close()
        return view

    def _read(self, sel: selectors.BaseSelector | None, fd: int, pipe: Any) -> bool:
        """Read what is there; True when the stream passed its limit."""
        chunk = os.read(fd, self.CHUNK)
        if not chunk:
            if sel is not None:
                sel.unregister(pipe)
            pipe.close()
            self.open.remove(pipe)
            return False
        buf, cap = self.bufs[fd], self.caps[fd]
        buf += chunk
        if cap is not None and len(buf) > cap:
            del buf[cap:]
            return True
        return False

    def drain(self, seconds: float = 2.0) -> None:
        """After a kill: what the process still had in its pipes, briefly and bounded."""
        end = time.monotonic() + seconds
        while self.open and time.monotonic() < end:
            ready = selectors.DefaultSelector()
            with ready:
                for pipe in self.open:
                    ready.register(pipe, selectors.EVENT_READ)
                for key, _ in ready.select(max(0.0, end - time.monotonic())):
                    if key.fileobj in self.open and self._read(None, key.fd, key.fileobj):
                        return

    def texts(self) -> tuple[str, str]:
        """stdout and stderr as text (bytes that are not UTF-8 become U+FFFD)."""
        return tuple(_text(bytes(b)) for b in self.bufs.values())  # type: ignore[return-value]


@contextlib.contextmanager
def _signals_deferred() -> Iterator[list[int]]:
    """SIGINT and SIGTERM that arrive inside the block are recorded, not acted on, so the
    caller can act on them once the child it starts is registered (main thread only: other
    threads never receive them)."""
    deferred: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield deferred
        return
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for signum in saved:
        signal.signal(signum, lambda sig, _: deferred.append(sig))
    try:
        yield deferred
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


_ACTIVE: dict[subprocess.Popen[bytes], Stop] = {}
_LOCK = threading.Lock()


def kill_all() -> None:
    """Stop every process still running (on Ctrl-C: no ssh, srun or local probe is left)."""
    with _LOCK:
        active = list(_ACTIVE)
    _stop(active)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Each group's stop signal (SIGTERM, or what run's ``stop`` says), so traps and handlers
    clean up (a probe stops the torchrun it started in a session of its own; the node script's
    EXIT trap removes its private folder, which a SIGKILL would leave behind); SIGKILL to
    whatever of their sessions is still there after the longest grace. Used on Ctrl-C, at a
    deadline and past --max-output alike."""
    grace = 0.0
    for proc in procs:
        signum, wait = _ACTIVE.get(proc, (signal.SIGTERM, 1.0))
        grace = max(grace, wait)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signum)
    end = time.monotonic() + grace
    while time.monotonic() < end and any(_session(p.pid, alive=True) for p in procs):
        time.sleep(0.02)
    for proc in procs:
        _kill_group(proc)


def _text(data: bytes | None) -> str:
    """Decode a process's output; bytes that are not UTF-8 become U+FFFD, never an exception."""
    return (data or b"").decode("utf-8", errors="replace")


def _session(pid: int, alive: bool = False) -> list[int]:
    """Every process of the session ``pid`` leads (what it started, in any process group);
    with ``alive``, zombies (exited, not yet reaped) are left out."""
    members = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[-1].split()
            except OSError:  # gone meanwhile
                continue
            if len(fields) > 3 and fields[3] == str(pid).encode():
                if alive and fields[0] == b"Z":
                    continue
                members.append(int(entry))
    return members


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process's group and the rest of its session: a child that moved to a
    group of its own (GNU ``timeout`` does) must not outlive it and hold its pipes open."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in _session(proc.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
