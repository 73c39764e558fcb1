"""The one place envtool starts processes: argv lists only, a deadline, the whole group killed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from envtool.errors import ToolError


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
        raise ProcessError(f"cannot run {args[0]}: {exc.strerror}") from None
    with _LOCK:
        _ACTIVE.add(proc)
    try:
        data = input.encode() if isinstance(input, str) else input
        raw_out, raw_err = proc.communicate(input=data, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raw_out, raw_err = proc.communicate()
        result = Result(args, -9, _text(raw_out), _text(raw_err))
        raise ProcessError(f"{args[0]} timed out after {timeout:g} s", result) from None
    except BaseException:
        _kill_group(proc)
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


_ACTIVE: set[subprocess.Popen[bytes]] = set()
_LOCK = threading.Lock()


def kill_all() -> None:
    """Kill every process group still running (on Ctrl-C: no ssh or srun is left behind)."""
    with _LOCK:
        active = list(_ACTIVE)
    for proc in active:
        _kill_group(proc)


def _text(data: bytes | None) -> str:
    """Decode a process's output; bytes that are not UTF-8 become U+FFFD, never an exception."""
    return (data or b"").decode("utf-8", errors="replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
