"""``envtool doctor``'s lines on a real terminal (a pty): coloured marks, none under NO_COLOR
(no-color.org: set and not empty)."""

from __future__ import annotations

import os
import pty
import select
import sys

import pytest

from envtool.doctor.steps import FAIL, Step
from envtool.report.doctor import DoctorReport


def _on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> str:
    """What one failed step prints when stdout is a terminal."""
    master, slave = pty.openpty()
    with os.fdopen(slave, "w", encoding="utf-8") as tty:
        monkeypatch.setattr(sys, "stdout", tty)
        DoctorReport("text").step(Step("torch", FAIL, "torch is not installed", "pip install"))
        tty.flush()
    chunks = []
    while select.select([master], [], [], 0.5)[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal's other end is closed and all was read
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return b"".join(chunks).decode()


def test_a_terminal_gets_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = _on_a_terminal(monkeypatch)
    assert "\x1b[" in out and "torch is not installed" in out


@pytest.mark.parametrize("value", ["1", "true", "0"])  # any non-empty value
def test_no_color_turns_it_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("NO_COLOR", value)
    out = _on_a_terminal(monkeypatch)
    assert "\x1b[" not in out and "torch is not installed" in out and "fix: pip install" in out
