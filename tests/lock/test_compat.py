"""Every lock envtool writes is read by conda-lock's own parser and rendered by its CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, Project, require

from envtool.lock import lockfile


def _conda_lock_parser():  # type: ignore[no-untyped-def]
    try:
        from conda_lock.lockfile import parse_conda_lock_file
    except ImportError:
        require(False, "conda-lock is not installed (pip install conda-lock)")
    return parse_conda_lock_file


def _conda_lock_cli() -> str:
    exe = shutil.which("conda-lock") or str(Path(sys.executable).parent / "conda-lock")
    require(Path(exe).exists(), "the conda-lock CLI is not installed")
    return exe


def test_conda_lock_parses_envtool_locks(project: Project) -> None:
    parse = _conda_lock_parser()
    assert project.run("lock")[0] == 0
    parsed = parse(project.lock)
    ours = {p.name: p for p in lockfile.read(project.lock).packages}
    assert len(parsed.package) == len(ours)
    for dep in parsed.package:
        mine = ours[dep.name]
        assert (dep.version, dep.url, dep.hash.md5, dep.hash.sha256) == (
            mine.version,
            mine.url,
            mine.md5,
            mine.sha256,
        )
        assert dep.manager == "conda" and dep.platform == "linux-64"


def test_conda_lock_parses_the_shipped_lock() -> None:
    parse = _conda_lock_parser()
    parsed = parse(REPO / "conda-lock.yml")
    assert any(d.name == "pytorch" and "cuda118" in d.url for d in parsed.package)


def test_conda_lock_render_explicit(project: Project, tmp_path: Path) -> None:
    exe = _conda_lock_cli()
    assert project.run("lock")[0] == 0
    out = subprocess.run(
        [
            exe,
            "render",
            "-k",
            "explicit",
            "-p",
            "linux-64",
            str(project.lock),
            "--filename-template",
            str(tmp_path / "explicit-{platform}.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    lines = (tmp_path / "explicit-linux-64.txt").read_text().splitlines()
    assert "@EXPLICIT" in lines
    urls = [ln for ln in lines if ln.startswith("file://")]
    assert len(urls) == 9
    assert any("pytorch-2.1.0-cuda118" in u for u in urls)
    assert all("#" in u and len(u.rsplit("#", 1)[1]) == 32 for u in urls)  # md5 fragments
