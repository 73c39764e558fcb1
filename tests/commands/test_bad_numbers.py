"""Numbers no option or file can mean, each given to a real ``envtool`` process: exit 2 with
the option, or the file and line, never exit 3 "internal error" (a 400-digit ``seconds`` in
``--baseline``, ``--timeout 1e400``, ``--junit DIR``) and never a check switched off (``nan``
compares false with every floor: ``--min-busbw nan`` failed no node). Issue 33 item 5."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

VERIFY = ("verify", "--hosts", "localhost", "--transport", "local", "--no-lock")


def _envtool(cwd: Path, *args: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CONDA_"))}
    env["ENVTOOL_CACHE_DIR"] = str(cwd / "cache")
    out = subprocess.run([sys.executable, "-m", "envtool", *args], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    return out.returncode, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--timeout", "1e400"), "'--timeout': inf is not in the range"),
        (("--timeout", "1e12"), "'--timeout': 1000000000000.0 is not in the range"),
        (("--timeout", "nan"), "'--timeout': 'nan' is not a finite number"),
        (("--connect-timeout", "inf"), "'--connect-timeout': inf is not in the range"),
        (("--min-busbw", "nan"), "'--min-busbw': 'nan' is not a finite number"),
        (("--min-busbw", "inf"), "'--min-busbw': 'inf' is not a finite number"),
        (("--tolerance", "nan"), "'--tolerance': 'nan' is not a finite number"),
        (("--junit", "."), "'--junit': File '.' is a directory"),
        (("--output", "."), "'--output': File '.' is a directory"),
    ],
)
def test_an_option_no_number_can_mean_is_exit_2_naming_it(
    tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    code, out = _envtool(tmp_path, *VERIFY, *args)
    assert code == 2 and said in out, out
    assert "internal error" not in out


@pytest.mark.parametrize("args", [("probe", "--timeout", "nan"), ("doctor", "--timeout", "1e400")])
def test_the_other_deadlines_refuse_them_too(tmp_path: Path, args: tuple[str, ...]) -> None:
    code, out = _envtool(tmp_path, *args)
    assert code == 2 and "'--timeout'" in out and "internal error" not in out, out


def test_a_baseline_report_s_400_digit_seconds_is_its_file_and_line(tmp_path: Path) -> None:
    report = {"schema": "envtool.verify/1", "lockfile": None, "seconds": int("9" * 400),
              "ok": True, "hosts": [], "findings": []}  # fmt: skip
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(report, indent=1))  # "seconds" on line 4
    code, out = _envtool(tmp_path, *VERIFY, "--baseline", str(baseline))
    assert code == 2 and f"{baseline}:4: a number too long for a float" in out, out


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (f"limits:\n  shm_min: {'9' * 400}t\n", ":2: limits.shm_min must be a size"),
        (f"gpus:\n  count: 1\n  memory_mib: {'9' * 5000}\n", ":3: invalid YAML: a whole number"),
        ("accept:\n  - gpu-busy\n  - allreduce-failed\n", ":3: accept: allreduce-failed cannot"),
    ],
)
def test_a_policy_s_bad_number_or_kind_is_its_file_and_line(
    tmp_path: Path, text: str, said: str
) -> None:
    """Refused before any node is asked (accepting allreduce-failed made a failed all-reduce
    "all good")."""
    policy = tmp_path / "policy.yml"
    policy.write_text(text)
    for args in (VERIFY, ("preflight", "--quick", "--no-lock", "--min-gpus", "0")):
        code, out = _envtool(tmp_path, *args, "--policy", str(policy))
        assert code == 2 and f"{policy}{said}" in out, out
