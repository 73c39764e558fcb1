"""A generation that a process this user cannot read may hold is never removed
(envtool_node/holders.py): ``prune`` runs as ``nobody`` (``runuser``, the system's python:
the node package alone), while a process of a third uid (``setpriv``, uid 65533) stands in
the older generation; nobody cannot read that process's maps, so its uid and groups are
held against the generations' folders' modes. Folders open to all: the generation is kept
with that pid. The prefix's folder closed to others (0700): that uid can reach neither
generation, and both are removed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import require

PROBES = Path(__file__).resolve().parents[2] / "probes" / "envtool_node"
PRUNE = (
    "import json, sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
    "from envtool_node import generations as g; "
    "print(json.dumps(g.prune(Path(sys.argv[2]), 0)))"
)


@pytest.fixture
def lab() -> Path:
    tools = [shutil.which(t) for t in ("runuser", "setpriv")]
    require(os.geteuid() == 0 and all(tools) and Path("/usr/bin/python3").exists(),
            "needs root, runuser, setpriv and /usr/bin/python3 (a second and a third "
            "user)")  # fmt: skip
    root = Path(tempfile.mkdtemp(prefix="envtool-holders-", dir="/tmp"))
    try:
        root.chmod(0o755)
        shutil.copytree(PROBES, root / "pkg" / "envtool_node",
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
        labs = root / "labs"
        for n in (0, 1, 2):
            (labs / f"env.envtool-gen-{n}" / "conda-meta").mkdir(parents=True)
        (labs / "env.envtool-gen-2" / "conda-meta" / "envtool-previous").write_text(
            "env.envtool-gen-1\n")  # fmt: skip
        (labs / "env").symlink_to("env.envtool-gen-2")
        subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
        subprocess.run(["chown", "-R", "nobody", str(labs)], check=True)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _prune(root: Path) -> tuple[list[str], list[list[object]], int]:
    ran = subprocess.run(["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", PRUNE,
                          str(root / "pkg"), str(root / "labs" / "env")], capture_output=True,
                         text=True, timeout=60, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    removed, kept, unread = json.loads(ran.stdout)
    return removed, kept, unread


def _stranger(cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["setpriv", "--reuid=65533", "--regid=65533", "--clear-groups",
                             "sleep", "120"], cwd=cwd)  # fmt: skip


def test_a_generation_another_users_process_could_hold_is_kept(lab: Path) -> None:
    stranger = _stranger(lab / "labs" / "env.envtool-gen-1")
    try:
        removed, kept, unread = _prune(lab)
        assert unread >= 1
        assert [name for name, _ in kept] == ["env.envtool-gen-1", "env.envtool-gen-0"], kept
        assert all(stranger.pid in pids for _, pids in kept), kept  # type: ignore[operator]
        assert removed == [] and (lab / "labs" / "env.envtool-gen-1").is_dir()
    finally:
        stranger.kill()
        stranger.wait()


def test_a_generation_closed_to_that_user_is_removed(lab: Path) -> None:
    stranger = _stranger(Path("/"))
    try:
        (lab / "labs").chmod(0o700)  # nobody's: no other uid can enter it
        removed, kept, unread = _prune(lab)
        assert unread >= 1 and kept == [], kept
        assert sorted(removed) == ["env.envtool-gen-0", "env.envtool-gen-1"]
    finally:
        stranger.kill()
        stranger.wait()
