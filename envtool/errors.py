"""The envtool exception tree; each error carries the exit code the CLI returns for it."""

from __future__ import annotations

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_NOT_ESTABLISHED = 4  # envtool explain: the logs show a failure but not its cause
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # SIGTERM: 128 + 15, as a shell reports it


class EnvtoolError(Exception):
    """Base class: a failure envtool explains in one line."""

    exit_code = EXIT_INTERNAL


class InputError(EnvtoolError):
    """Bad input or usage: a malformed file, an unknown option value (exit 2)."""

    exit_code = EXIT_BAD_INPUT


class ProblemFound(EnvtoolError):
    """A check ran and found a problem: a stale lock, drift, a failed probe (exit 1)."""

    exit_code = EXIT_PROBLEMS


class SolveError(InputError):
    """The specs cannot be satisfied by the channels (exit 2: the input must change)."""


class ToolError(EnvtoolError):
    """An external tool (conda-lock, pip) failed (exit 1)."""

    exit_code = EXIT_PROBLEMS


class InstallError(EnvtoolError):
    """Installing a lock into a prefix failed (exit 1)."""

    exit_code = EXIT_PROBLEMS


class ResourceError(EnvtoolError):
    """envtool itself ran out of file descriptors, memory or processes (exit 1): its own
    limit, never a node's verdict; the message says what to lower or raise."""

    exit_code = EXIT_PROBLEMS


class Terminated(KeyboardInterrupt):
    """SIGTERM (scancel, kill, a CI timeout): stopped and cleaned up as Ctrl-C is (exit 143)."""


def where(path: object, line: int | None = None) -> str:
    """Format ``file:line`` for messages (line is 1-based)."""
    return f"{path}:{line}" if line else f"{path}"


def shown(text: str, limit: int = 200) -> str:
    """``text`` quoted for a one-line message, cut after ``limit`` characters (a joined pip
    line or a node set can be megabytes)."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"
