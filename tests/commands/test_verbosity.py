"""``-q``/``--quiet`` and ``-v``/``--verbose`` on every command, before or after its name:
-v tells on stderr what envtool starts and each host's answer, -q leaves errors and the
report only; stdout (the report) is the same either way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envtool.cli import _register, cli

ENVTOOL = str(Path(sys.executable).parent / "envtool")
VERIFY = ("verify", "--transport", "local", "--hosts", "localhost", "--no-lock")


def _envtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENVTOOL, *args], capture_output=True, text=True, timeout=120)


def test_every_command_takes_both() -> None:
    _register()
    for name in cli.commands:
        for flag in ("-q", "--verbose"):
            run = _envtool(name, flag, "--help")
            assert run.returncode == 0 and "-q, --quiet" in run.stdout, (name, run.stderr)


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_names_the_commands_and_the_answers(where: str) -> None:
    args = ("-v", *VERIFY) if where == "before" else (*VERIFY, "-v")
    run = _envtool(*args)
    lines = run.stderr.splitlines()
    assert lines[0].startswith("envtool: running sh -c '<") and lines[0].endswith("characters>'")
    assert any(ln.startswith("envtool: localhost: exit 0 in ") for ln in lines), run.stderr
    plain = _envtool(*VERIFY)
    assert run.stdout.splitlines()[0] == plain.stdout.splitlines()[0]  # the report unchanged
    assert "envtool: running" not in plain.stderr


def test_quiet_leaves_the_report_and_nothing_else() -> None:
    run = _envtool("-q", *VERIFY, "--format", "json")
    assert run.stderr == "" and run.stdout.startswith("{")
    bad = _envtool("-q", "check", "/nonexistent/conda-lock.yml")
    assert bad.returncode == 2 and bad.stderr.startswith("envtool: error: ")  # errors stay
