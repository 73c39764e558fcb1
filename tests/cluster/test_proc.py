"""envtool/proc.py: the one place processes start; a Ctrl-C never orphans one."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

import pytest

from envtool import proc


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return False


def test_ctrl_c_arriving_inside_popen_still_stops_the_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[int] = []
    real = subprocess.Popen

    def popen_then_sigint(*args: Any, **kwargs: Any) -> Any:
        child = real(*args, **kwargs)
        started.append(child.pid)
        os.kill(os.getpid(), signal.SIGINT)  # as if Ctrl-C came while Popen was returning
        return child

    monkeypatch.setattr(subprocess, "Popen", popen_then_sigint)
    with pytest.raises(KeyboardInterrupt):
        proc.run(["sleep", "300"], timeout=60)
    assert started
    end = time.monotonic() + 5
    while _alive(started[0]) and time.monotonic() < end:
        time.sleep(0.02)
    assert not _alive(started[0]), "the child outlived the interrupt"
    assert not proc._ACTIVE


def test_timeout_kills_what_moved_to_another_process_group() -> None:
    # `timeout` (like `setsid -w`, or a shell's job control) leaves the group it was started in
    script = "timeout 300 sleep 301 & echo $!; wait"
    with pytest.raises(proc.ProcessError, match="timed out"):
        proc.run(["sh", "-c", script], timeout=1)
    time.sleep(0.2)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "sleep 301" not in ps
