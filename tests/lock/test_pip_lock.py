"""``pip:`` entries: locked with pip's resolver, conda-provided packages treated as installed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import VIRTUAL_CUDA, Project
from fixtures.channel import build_channel, realistic_packages
from fixtures.wheels import make_wheel, simple_index

from envtool.lock import lockfile


@pytest.fixture(scope="module")
def pip_world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A channel whose python runs this interpreter, and a PEP 503 index of two wheels."""
    root = tmp_path_factory.mktemp("pipworld")
    channel = build_channel(root / "channel", realistic_packages(python_exe=sys.executable))
    wheels = [
        make_wheel(
            root / "files",
            "tiny-dist",
            "1.0",
            ("tiny-dep>=0.2", "numpy>=1.20", "torch>=2", "pytest; extra == 'test'"),
        ),
        make_wheel(root / "files", "tiny-dist", "2.0", ("tiny-dep>=0.2",)),
        make_wheel(root / "files", "tiny-dep", "0.1"),
        make_wheel(root / "files", "tiny-dep", "0.3"),
    ]
    return channel, simple_index(root, wheels)


def _project(
    tmp_path: Path, channel: Path, index: str, pip_spec: str = "tiny-dist==1.0"
) -> Project:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "virtual-packages.yml").write_text(VIRTUAL_CUDA)
    proj = Project(root, channel, tmp_path / "cache")
    proj.write_env(
        f"name: ddp\nchannels: [{channel.as_uri()}]\npip-repositories: [{index}]\n"
        "dependencies:\n  - python=3.9\n  - pytorch=*=cuda118*\n  - numpy\n  - pip\n"
        f"  - pip:\n    - {pip_spec}\n"
    )
    return proj


def test_pip_entries_are_locked_with_hashes(pip_world: tuple[Path, str], tmp_path: Path) -> None:
    channel, index = pip_world
    proj = _project(tmp_path, channel, index)
    code, out, err = proj.run("lock")
    assert code == 0, err
    assert "+ 2 pip" in out
    lock = lockfile.read(proj.lock)
    pip = {p.name: p for p in lock.packages if p.manager == "pip"}
    assert set(pip) == {"tiny-dist", "tiny-dep"}  # numpy and torch come from conda
    assert pip["tiny-dist"].version == "1.0" and pip["tiny-dep"].version == "0.3"
    assert pip["tiny-dist"].url.endswith("tiny_dist-1.0-py3-none-any.whl")
    assert len(pip["tiny-dist"].sha256 or "") == 64
    deps = dict(pip["tiny-dist"].dependencies)
    assert deps["tiny-dep"] == ">=0.2" and "pytest" not in deps
    # conda-lock's parser accepts the pip entries too
    from conda_lock.lockfile import parse_conda_lock_file

    parsed = parse_conda_lock_file(proj.lock)
    assert {d.name for d in parsed.package if d.manager == "pip"} == {"tiny-dist", "tiny-dep"}


def test_pip_conflict_is_a_one_line_error(pip_world: tuple[Path, str], tmp_path: Path) -> None:
    channel, index = pip_world
    proj = _project(tmp_path, channel, index, "tiny-dep==9.9")
    code, _, err = proj.run("lock")
    assert code == 2 and "pip cannot resolve" in err and err.count("\n") == 1
    assert not proj.lock.exists()


def test_install_puts_pip_entries_into_the_prefix(
    pip_world: tuple[Path, str], tmp_path: Path
) -> None:
    channel, index = pip_world
    proj = _project(tmp_path, channel, index)
    assert proj.run("lock")[0] == 0
    prefix = tmp_path / "env"
    code, out, err = proj.run("install", "--prefix", str(prefix))
    assert code == 0, err
    assert "and 2 pip packages" in out
    found = {p.name for p in prefix.glob("lib/python*/site-packages/*.dist-info")}
    assert {"tiny_dist-1.0.dist-info", "tiny_dep-0.3.dist-info"} <= found
    # pip recorded each wheel's hash (PEP 610): what verify compares with the lock's
    from envtool_node.site_packages import direct_url

    locked = {p.name: p for p in lockfile.read(proj.lock).packages if p.manager == "pip"}
    (info,) = prefix.glob("lib/python*/site-packages/tiny_dist-1.0.dist-info")
    assert direct_url(str(info))[1] == locked["tiny-dist"].sha256


def test_pip_hash_mismatch_fails_the_install(pip_world: tuple[Path, str], tmp_path: Path) -> None:
    channel, index = pip_world
    proj = _project(tmp_path, channel, index)
    assert proj.run("lock")[0] == 0
    lock = lockfile.read(proj.lock)
    from dataclasses import replace

    bad = tuple(replace(p, sha256="2" * 64) if p.name == "tiny-dep" else p for p in lock.packages)
    lockfile.write(lockfile.Lockfile(lock.metadata, bad), proj.lock)
    prefix = tmp_path / "env"
    code, _, err = proj.run("install", "--prefix", str(prefix))
    assert code == 1 and "pip install failed" in err and err.count("\n") == 1
    assert not prefix.exists()
