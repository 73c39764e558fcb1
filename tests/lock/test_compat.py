"""Every lock envtool writes is read by conda-lock's own parser and rendered by its CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, Project, require
from fixtures.lockfiles import HEAD

from envtool.errors import InputError
from envtool.lock import explicit, lockfile


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
    rendered = tmp_path / "explicit-linux-64.txt"
    read = explicit.parse(rendered.read_text(), rendered, "linux-64")
    locked = {p.url: p for p in lockfile.read(project.lock).packages}
    assert {p.url for p in read} == set(locked)
    for pkg in read:
        want = locked[pkg.url]
        assert (pkg.md5, pkg.version, pkg.build) == (want.md5, want.version, want.build)


def _conda_lock_written(path: Path) -> Path:
    """A lock written by conda-lock's own writer: a package in two categories, one in two
    optional ones, a pip dependency from git and a pip wheel."""
    _conda_lock_parser()
    from conda_lock.lockfile import write_conda_lock_file
    from conda_lock.lockfile.v2prelim.models import (
        DependencySource,
        HashModel,
        LockedDependency,
        LockMeta,
    )
    from conda_lock.lockfile.v2prelim.models import Lockfile as CondaLockfile

    cf, commit = "https://conda.anaconda.org/conda-forge", "5a" * 20
    git = f"git+https://github.com/example/mylib.git@{commit}"

    def conda(name: str, version: str, fn: str, categories: set[str]) -> LockedDependency:
        return LockedDependency(
            name=name,
            version=version,
            manager="conda",
            platform="linux-64",
            dependencies={"python": ">=3.9"},
            url=f"{cf}/{fn}",
            hash=HashModel(md5=f"{len(name):032x}", sha256=f"{len(fn):064x}"),
            categories=categories,
        )

    packages = [
        conda(
            "libblas", "3.9.0", "linux-64/libblas-3.9.0-20_linux64_openblas.conda", {"main", "dev"}
        ),
        conda("pytest", "8.3.5", "noarch/pytest-8.3.5-pyhd8ed1ab_0.conda", {"dev", "test"}),
        conda("python", "3.11.9", "linux-64/python-3.11.9-hb806964_0_cpython.conda", {"main"}),
        LockedDependency(
            name="mylib",
            version="0.3.1",
            manager="pip",
            platform="linux-64",
            url=git,
            hash=HashModel(sha256=commit),
            source=DependencySource(type="url", url=git),
            categories={"main"},
        ),
        LockedDependency(
            name="tiny-dist",
            version="1.0.2",
            manager="pip",
            platform="linux-64",
            url="https://files.example.org/tiny_dist-1.0.2-py3-none-any.whl",
            hash=HashModel(sha256="7e" * 32),
            categories={"dev"},
        ),
    ]
    meta = LockMeta(
        content_hash={"linux-64": "0" * 64},
        channels=["conda-forge"],  # type: ignore[list-item]
        platforms=["linux-64"],
        sources=["environment.yml"],
    )
    write_conda_lock_file(CondaLockfile(package=packages, metadata=meta), path, None)
    return path


Row = tuple[str, str, str, str, str, "str | None", "str | None", tuple[str, ...]]


def _theirs(path: Path) -> set[Row]:
    """What conda-lock's parser reads: name, version, manager, platform, url, hashes."""
    return {
        (d.name, d.version, d.manager, d.platform, d.url, d.hash.md5, d.hash.sha256, cats)
        for d in _conda_lock_parser()(path).package
        for cats in [tuple(sorted(d.categories))]
    }


def _ours(lock: lockfile.Lockfile) -> set[Row]:
    """The same of envtool's packages (a VCS revision where conda-lock keeps it: sha256)."""
    return {
        (p.name, p.version, p.manager, p.platform, p.url, p.md5, sha, p.categories)
        for p in lock.packages
        for sha in [p.sha256 or p.revision or None]
    }


def test_what_conda_lock_writes_envtool_reads_alike(tmp_path: Path) -> None:
    path = _conda_lock_written(tmp_path / "conda-lock.yml")
    assert path.read_text().count("- name: libblas") == 2  # one entry per category
    lock = lockfile.read(path)
    assert _ours(lock) == _theirs(path) and len(lock.packages) == 5
    git = next(p for p in lock.packages if p.name == "mylib")
    assert (git.sha256, git.revision) == (None, "5a" * 20)
    again = tmp_path / "envtool.yml"
    lockfile.write(lock, again)  # and what envtool writes back, conda-lock reads the same
    assert _theirs(again) == _theirs(path)


def test_conda_lock_explicit_render_is_read(tmp_path: Path) -> None:
    from conda_lock.conda_lock import render_lockfile_for_platform

    path = _conda_lock_written(tmp_path / "conda-lock.yml")
    lines = render_lockfile_for_platform(
        lockfile=_conda_lock_parser()(path),
        include_dev_dependencies=True,
        extras={"test"},
        kind="explicit",
        platform="linux-64",
        suppress_warning_for_pip_and_explicit=True,
    )
    rendered = tmp_path / "conda-linux-64.lock"
    rendered.write_text("\n".join(lines) + "\n")
    text = rendered.read_text()
    read = {p.name: p for p in explicit.parse(text, rendered, "linux-64")}
    locked = {p.name: p for p in lockfile.read(path).packages}
    assert set(read) == set(locked)
    for name, pkg in read.items():
        want = locked[name]
        assert (pkg.manager, pkg.url) == (want.manager, want.url)
        if pkg.manager == "conda":
            assert (pkg.version, pkg.build, pkg.md5, pkg.channel) == (
                want.version,
                want.build,
                want.md5,
                "conda-forge",
            )
    assert read["mylib"].sha256 == "" and read["tiny-dist"].sha256 == "7e" * 32
    with pytest.raises(InputError, match=r"conda-linux-64\.lock:\d+: an @EXPLICIT package list"):
        lockfile.read(rendered)


ENTRY = """\
- name: zlib
  version: 1.3.1
  manager: conda
  platform: linux-64
  dependencies: {}
  url: https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3.1-h4ab18f5_1.conda
  hash:
    md5: 57d7dc60e9325e3de37ff8dffd18e814
  category: main
  optional: false
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HEAD + ENTRY + ENTRY, ":18: duplicate entry for zlib"),
        (HEAD.replace("version: 1\n", "") + ENTRY, ":1: unsupported lockfile version None"),
        (
            HEAD + ENTRY.replace("hash:\n    md5: 57d7dc60e9325e3de37ff8dffd18e814", "hash: {}"),
            ":14: a conda entry must carry an md5 hash",
        ),
        (
            HEAD + ENTRY.replace("  optional: false", "  optional: false\n  colour: red"),
            ":18: unknown package field 'colour'",
        ),
        (HEAD + ENTRY.replace("manager: conda", "manager: cargo"), ":10: manager must be"),
        (HEAD + ENTRY.replace("  hash:\n", "  hash:\n    sha1: abc\n"), ":15: unknown hash kind"),
    ],
)
def test_what_conda_lock_refuses_envtool_refuses(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "conda-lock.yml"
    path.write_text(text)
    with pytest.raises(Exception):  # noqa: B017 - pydantic, assertion or version errors
        _conda_lock_parser()(path)
    with pytest.raises(InputError) as info:
        lockfile.read(path)
    assert "\n" not in str(info.value) and f"{path}{expected}" in str(info.value)


def test_entries_conda_lock_would_merge_silently_are_refused(tmp_path: Path) -> None:
    """conda-lock keeps the first of two category entries that differ in version; envtool
    refuses to guess which one the environment holds."""
    path = tmp_path / "conda-lock.yml"
    dev = ENTRY.replace("category: main", "category: dev").replace(
        "optional: false", "optional: true"
    )
    path.write_text(HEAD + ENTRY + dev.replace("version: 1.3.1", "version: 1.3.2"))
    assert len(_conda_lock_parser()(path).package) == 1
    with pytest.raises(InputError, match=r":18: conflicting entries for zlib \(conda, linux-64\)"):
        lockfile.read(path)


def test_real_locks_agree_with_conda_lock(shared_data: Path) -> None:
    paths = sorted((shared_data / "real").glob("*.conda-lock.yml"))
    assert paths
    for path in paths:
        assert _ours(lockfile.read(path)) == _theirs(path), path.name
