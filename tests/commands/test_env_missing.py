"""One cause, one finding: a node without the lock's environment gives one ``env-missing``
finding that names what was searched, and no other python is probed in its place (local and
ssh transports; ``probe`` and ``export`` on this machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require
from fixtures import absent, sshnodes
from fixtures.absent import NAME

ENVTOOL = str(Path(sys.executable).parent / "envtool")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A lock whose environment.yml names an environment that is nowhere."""
    return absent.project(tmp_path / "proj")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CONDA_PREFIX", "COLUMNS")}
    return {**env, "HOME": str(tmp_path / "home"), **extra}


def _run(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ENVTOOL, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_local_without_the_environment_is_one_finding(project: Path, tmp_path: Path) -> None:
    env = _env(tmp_path)
    out = _run(project, env, "verify", "--hosts", "localhost", "--transport", "local",
               "--format", "json")  # fmt: skip
    assert out.returncode == 1, out.stderr
    actual = absent.one_finding(json.loads(out.stdout), ["localhost"])
    assert f"{tmp_path}/home/miniforge3/envs" in actual and "$CONDA_PREFIX is unset" in actual
    nowhere = tmp_path / "not-an-env"
    out = _run(project, {**env, "CONDA_PREFIX": str(nowhere)}, "verify", "--hosts",
               "localhost", "--transport", "local", "--format", "json")  # fmt: skip
    assert f"nor in $CONDA_PREFIX ({nowhere})" in absent.one_finding(
        json.loads(out.stdout), ["localhost"]
    )


@pytest.mark.parametrize("columns", [80, 100])
def test_the_table_fits_and_ends_with_the_verdict(
    project: Path, tmp_path: Path, columns: int
) -> None:
    env = _env(tmp_path, COLUMNS=str(columns))
    out = _run(project, env, "verify", "--hosts", "localhost", "--transport", "local")
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "1 of 1 host fails: localhost (no environment)"
    assert max(len(line) for line in lines) <= columns, out.stdout
    verdict = out.stdout.split("\n\n")[-1].replace("\n  ", " ")
    assert verdict.startswith("FAIL: localhost: no environment: envtool install"), verdict
    assert out.stdout.count("ERROR ") == 1


def test_ssh_nodes_without_the_environment_are_one_finding(project: Path, tmp_path: Path) -> None:
    require(sshnodes.available(), "OpenSSH sshd is not installed (apt-get install openssh-server)")
    cluster = sshnodes.start_cluster(tmp_path / "ssh", [{}, {}])
    try:
        out = _run(project, _env(tmp_path), "verify", "--hosts", "node[1-2]", "-F",
                   str(cluster.ssh_config), "--format", "json")  # fmt: skip
    finally:
        cluster.stop()
    assert out.returncode == 1, out.stderr
    absent.one_finding(json.loads(out.stdout), ["node1", "node2"])


@pytest.mark.parametrize("command", [("probe", "--no-allreduce"), ("export",)])
def test_probe_and_export_look_at_no_other_python(
    project: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    out = _run(project, _env(tmp_path), *command)
    assert out.returncode == 1 and out.stdout == "", out.stdout
    (line,) = out.stderr.splitlines()
    assert f"no environment '{NAME}' (the lock's) in {tmp_path}/home/miniforge3/envs" in line
    assert line.endswith("pass --prefix, or activate the environment")
    out = _run(tmp_path, _env(tmp_path), *command)  # no lock here either: nothing to look at
    assert out.returncode == 1 and "no environment to look at" in out.stderr
