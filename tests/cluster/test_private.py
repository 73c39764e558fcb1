"""What envtool runs or writes lives in folders only its user can write: a --bundle-dir made
by someone else (or holding other files) is refused, a node checks the shared copy before it
runs it, writes replace a symlink instead of following it, and a TMPDIR others can swap
from under envtool is refused, here and on the node."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require

from envtool.cluster import bundle
from envtool.cluster.nodescript import node_script
from envtool.cluster.options import FanoutOptions

ENVTOOL = str(Path(sys.executable).parent / "envtool")


def _nobody() -> int:
    require(os.getuid() == 0, "needs root to hand a folder to another user")
    return pwd.getpwnam("nobody").pw_uid


def _verify(
    cwd: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    argv = [ENVTOOL, "verify", "--transport", "local", "--hosts", "localhost", "--no-lock",
            "--min-gpus", "0", *extra]  # fmt: skip
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})  # fmt: skip


def test_a_bundle_dir_someone_else_made_is_refused_and_nothing_in_it_runs(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, _nobody(), -1)
    shared.chmod(0o777)
    proof = tmp_path / "ran"
    (shared / "json.py").write_text(f"open({str(proof)!r}, 'w').close()\n")
    out = _verify(tmp_path, "--bundle-dir", str(shared))
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"--bundle-dir {shared} belongs to uid" in out.stderr and out.stderr.count("\n") == 1
    assert not proof.exists() and not (shared / "envtool_node").exists()


def test_a_bundle_dir_holding_other_files_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    (shared / "json.py").write_text("raise SystemExit('planted')\n")
    out = _verify(tmp_path, "--bundle-dir", str(shared))
    assert out.returncode == 2 and "holds other files (json.py)" in out.stderr


def test_the_node_checks_the_shared_copy_before_running_it(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    bundle.write_bundle(shared)
    script = node_script(FanoutOptions(bundle_dir=str(shared), bundle_digest=bundle.digest()))
    node = shared / "envtool_node" / "node.py"
    node.write_text(node.read_text() + "\nopen('/nonexistent-proof', 'w')\n")  # changed after
    token = bundle.payload("0123abcd", shared=True).decode()
    out = subprocess.run(["sh", "-c", script], input=token, capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 95
    assert "the node package in" in out.stderr and "is not the one envtool sent" in out.stderr


def test_a_symlink_in_the_bundle_dir_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    into = tmp_path / "shared" / "envtool_node"
    into.mkdir(parents=True, mode=0o755)
    (into / "node.py").symlink_to(victim)
    bundle.write_bundle(tmp_path / "shared")
    assert victim.read_text() == "precious\n"
    assert not (into / "node.py").is_symlink() and "def main" in (into / "node.py").read_text()


@pytest.fixture
def swappable_tmp(tmp_path: Path) -> Path:
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o777)  # writable by everyone, and not sticky: a temp dir in it can be swapped
    return shared


def test_a_swappable_tmpdir_is_refused_here(tmp_path: Path, swappable_tmp: Path) -> None:
    out = subprocess.run(
        [ENVTOOL, "probe", "--prefix", sys.prefix, "--no-allreduce"], cwd=tmp_path,
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "TMPDIR": str(swappable_tmp)},
    )  # fmt: skip
    assert out.returncode == 2 and f"TMPDIR {swappable_tmp} is writable by others" in out.stderr


def test_a_swappable_tmpdir_is_refused_on_the_node(tmp_path: Path, swappable_tmp: Path) -> None:
    out = _verify(tmp_path, "--format", "json", env={"TMPDIR": str(swappable_tmp)})
    (host,) = json.loads(out.stdout)["hosts"]
    assert host["error"].startswith("cannot create a temp dir: envtool: TMPDIR")
    assert "not sticky" in host["error"] and list(swappable_tmp.iterdir()) == []
