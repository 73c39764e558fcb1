"""The one place envtool starts processes: argv lists only, a deadline, the whole group killed."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from envtool.errors import ResourceError, ToolError

# What a process start fails with when envtool itself is out of a resource (not the command).
RESOURCE_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN)


@dataclass(frozen=True)
class Result:
    """What a finished process left behind."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


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


def run(
    argv: Sequence[str],
    *,
    input: str | bytes | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    check: bool = True,
) -> Result:
    """Run ``argv`` to completion; raise ProcessError on failure when ``check``."""
    args = tuple(str(a) for a in argv)
    full_env = {**os.environ, **env} if env is not None else None
    with _signals_deferred() as deferred:  # a Ctrl-C inside Popen would orphan the child
        try:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
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
            _ACTIVE.add(proc)
    try:
        for signum in deferred:  # delivered now, where the child is stopped with us
            signal.raise_signal(signum)
        data = input.encode() if isinstance(input, str) else input
        raw_out, raw_err = proc.communicate(input=data, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raw_out, raw_err = proc.communicate()
        result = Result(args, -9, _text(raw_out), _text(raw_err))
        raise ProcessError(f"{args[0]} timed out after {timeout:g} s", result) from None
    except BaseException:  # Ctrl-C: let it clean up (its own children too), then kill
        _stop([proc], grace=1.0)
        proc.wait()
        raise
    finally:
        with _LOCK:
            _ACTIVE.discard(proc)
    result = Result(args, proc.returncode, _text(raw_out), _text(raw_err))
    if check and proc.returncode != 0:
        detail = _last_line(result.stderr) or _last_line(result.stdout) or "no output"
        raise ProcessError(f"{args[0]} exited {proc.returncode}: {detail}", result)
    return result


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


_ACTIVE: set[subprocess.Popen[bytes]] = set()
_LOCK = threading.Lock()


def kill_all(grace: float = 1.0) -> None:
    """Stop every process still running (on Ctrl-C: no ssh, srun or local probe is left)."""
    with _LOCK:
        active = list(_ACTIVE)
    _stop(active, grace)


def _stop(procs: list[subprocess.Popen[bytes]], grace: float) -> None:
    """SIGTERM to each group, so traps and handlers clean up (a probe stops the torchrun it
    started in a session of its own); SIGKILL to whatever of their sessions is still there
    after ``grace`` seconds."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
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
