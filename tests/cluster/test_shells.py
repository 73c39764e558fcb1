"""What reaches a node's shell: the node script runs under ``sh -c`` whatever the login shell
is (tcsh over real sshd), and a hostile environment name is one quoted word, never code."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import RUNTIME_ENV, Project, require
from fixtures import sshnodes

ENVTOOL = str(Path(sys.executable).parent / "envtool")
TCSH = 'ForceCommand /usr/bin/tcsh -c "$SSH_ORIGINAL_COMMAND"'  # a csh-family login shell


@pytest.fixture
def installed(project: Project, python_channel: Path, tmp_path: Path) -> Path:
    project.write_env(RUNTIME_ENV.format(channel=python_channel.as_uri()))
    assert project.run("lock")[0] == 0
    prefix = tmp_path / "env"
    assert project.run("install", "--prefix", str(prefix))[0] == 0
    return prefix


@pytest.fixture
def tcsh_node(installed: Path, tmp_path: Path) -> Iterator[sshnodes.Cluster]:
    require(sshnodes.available(), "OpenSSH sshd is not installed (apt-get install openssh-server)")
    require(shutil.which("tcsh") is not None, "tcsh is not installed (apt-get install tcsh)")
    cluster = sshnodes.start_cluster(tmp_path / "ssh", [{"CONDA_PREFIX": str(installed)}],
                                     extra={1: TCSH})  # fmt: skip
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_tcsh_login_shell_runs_the_node_script(
    tcsh_node: sshnodes.Cluster, installed: Path
) -> None:
    argv = [ENVTOOL, "verify", "--hosts", "node1", "-F", str(tcsh_node.ssh_config), "--no-lock",
            "--min-gpus", "0", "--format", "json"]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    doc = json.loads(out.stdout)
    (host,) = doc["hosts"]
    assert host["ok"] and host["error"] is None, host  # was: "Illegal variable name"
    assert host["packages"] == len(list((installed / "conda-meta").glob("*.json")))


def test_an_environment_name_is_never_run(
    project: Project, installed: Path, tmp_path: Path
) -> None:
    proof = tmp_path / "pwned"
    env = project.env.read_text().replace("name: ddp", f"name: ddp$(touch {proof})`touch {proof}`")
    project.env.write_text(env)
    argv = [ENVTOOL, "verify", "--transport", "local", "--hosts", "localhost",
            "--lockfile", str(project.lock), "--min-gpus", "0"]  # fmt: skip
    subprocess.run(argv, cwd=project.root, capture_output=True, text=True, timeout=120)
    assert not proof.exists()
