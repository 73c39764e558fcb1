"""envtool's own limits: the fan-out fits the open-files limit, running out of files or
processes is envtool's error with the fix (never a node's verdict), and hosts whose
messages differ only by their own name fold into one finding."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import require

ENVTOOL = str(Path(sys.executable).parent / "envtool")
NOSUCH = "envtool-nosuch[1-40]"  # names no resolver knows: ssh fails at once, naming each one


def _limited(files: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))


def _verify(tmp_path: Path, files: int, *extra: str) -> subprocess.CompletedProcess[str]:
    require(shutil.which("ssh") is not None, "the OpenSSH client is not installed")
    argv = [ENVTOOL, "verify", "--hosts", NOSUCH, "--no-lock", "--format", "json",
            "--connect-timeout", "2", "--timeout", "5", *extra]  # fmt: skip
    return subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, timeout=120,
        preexec_fn=lambda: _limited(files),
    )  # fmt: skip


def test_a_fanout_the_limit_cannot_hold_is_refused_before_anything_starts(tmp_path: Path) -> None:
    out = _verify(tmp_path, 128, "--fanout", "100")
    assert out.returncode == 2 and out.stdout == ""
    assert "--fanout 100 needs about 400 open files and ulimit -n is 128" in out.stderr
    assert "use --fanout 16 or less" in out.stderr and out.stderr.count("\n") == 1


def test_the_default_fanout_fits_the_limit_and_messages_fold(tmp_path: Path) -> None:
    out = _verify(tmp_path, 128)  # the default (64) would need 256 files: 16 at once instead
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert len(doc["hosts"]) == 40 and not any(h["ok"] for h in doc["hosts"])
    (finding,) = doc["findings"]  # 40 hosts, one message: their own names folded out
    assert finding["kind"] == "unreachable" and len(finding["hosts"]) == 40
    assert "<host>" in finding["actual"] and "envtool-nosuch1" not in finding["actual"]
    assert "envtool-nosuch7" in doc["hosts"][6]["error"]  # each host's own entry keeps its name


def test_out_of_files_is_envtools_error_with_the_fix() -> None:
    code = (
        "import resource, os\n"
        "from envtool import proc\n"
        "from envtool.errors import ResourceError\n"
        "used = len(os.listdir('/proc/self/fd'))\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (used + 1, used + 1))\n"
        "try:\n"
        "    proc.run(['true'], input=b'')\n"
        "except ResourceError as exc:\n"
        "    print('resource', exc, exc.exit_code)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("resource cannot start true: Too many open files"), out.stderr
    assert "lower --fanout, or raise ulimit -n" in out.stdout and out.stdout.endswith(" 1\n")


def test_a_node_that_prints_without_end_is_stopped_at_max_output(tmp_path: Path) -> None:
    from fixtures.faulty import _fake_python

    prefix = tmp_path / "env"
    _fake_python(prefix, "exec yes 'an endless answer'")
    argv = [ENVTOOL, "verify", "--transport", "local", "--hosts", "localhost", "--no-lock",
            "--prefix", str(prefix), "--max-output", "1M", "--format", "json"]  # fmt: skip
    out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr
    (finding,) = json.loads(out.stdout)["findings"]
    assert finding["kind"] == "unreachable"
    assert finding["actual"] == "printed more than 1048576 bytes on stdout: stopped (--max-output)"
    assert "raise --max-output" in finding["hint"]
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "an endless answer" not in ps  # the node's process was stopped, not left running
