"""Ctrl-C (SIGINT) during lock and install: exit 130, nothing half-written left behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import Project, require
from fixtures.fake_micromamba import make_fake_micromamba

ENVTOOL = str(Path(sys.executable).parent / "envtool")


def _interrupt_when(
    argv: list[str], cwd: Path, marker: str, timeout: float = 60
) -> tuple[int, str]:
    """Start envtool, wait until a process whose command line holds ``marker`` runs, SIGINT."""
    run = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    end = time.monotonic() + timeout
    while time.monotonic() < end and run.poll() is None:
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        if marker in ps:
            break
        time.sleep(0.02)
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    return run.returncode, err.decode()


def test_interrupted_lock_keeps_the_old_lock(project: Project, tmp_path: Path) -> None:
    try:
        import conda_lock  # noqa: F401
    except ImportError:
        require(False, "conda-lock is not installed")
    exe = make_fake_micromamba(tmp_path / "bin")
    assert project.run("lock")[0] == 0
    before = project.lock.read_bytes()
    project.env.write_text(project.env.read_text().replace("  - numpy\n", "  - numpy>=1.20\n"))
    code, err = _interrupt_when(
        [
            ENVTOOL,
            "lock",
            "--solver",
            "conda-lock",
            "--conda",
            str(exe),
            "--cache-dir",
            str(project.cache),
        ],
        project.root,
        "conda-lock lock",
    )
    assert code == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert project.lock.read_bytes() == before
    assert [p.name for p in project.root.iterdir() if p.name.endswith(".tmp")] == []
    time.sleep(0.3)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(exe) not in ps  # conda-lock and its solver were killed with envtool


def test_interrupted_install_removes_the_new_prefix(tmp_path: Path) -> None:
    from fixtures.channel import build_channel, realistic_packages
    from fixtures.wheels import make_wheel, simple_index

    root = tmp_path / "w"
    channel = build_channel(root / "channel", realistic_packages(python_exe=sys.executable))
    index = simple_index(root, [make_wheel(root / "files", "tiny-dist", "1.0")])
    proj = root / "proj"
    proj.mkdir()
    (proj / "virtual-packages.yml").write_text(
        'subdirs:\n  linux-64:\n    packages:\n      __cuda: "11.8"\n      __glibc: "2.28"\n'
    )
    (proj / "environment.yml").write_text(
        f"channels: [{channel.as_uri()}]\npip-repositories: [{index}]\n"
        "dependencies: [python=3.9, pip, {pip: [tiny-dist==1.0]}]\n"
    )
    subprocess.run(
        [ENVTOOL, "lock", "--cache-dir", str(root / "c")], cwd=proj, check=True, capture_output=True
    )
    prefix = tmp_path / "env"
    code, err = _interrupt_when(
        [ENVTOOL, "install", "--prefix", str(prefix), "--cache-dir", str(root / "c")],
        proj,
        "--require-hashes",
    )
    assert code == 130, err
    assert "Traceback" not in err
    assert not prefix.exists()  # the half-made prefix is removed, not left half-built
