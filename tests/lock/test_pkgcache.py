"""``--cache DIR`` (lock/pkgcache.py): a package cache filled from the lock's URLs and read by
an install that cannot reach the channel, real installs with py-rattler from the tests' local
channel. A file changed in the cache is never linked into a prefix; no file of the cache
holds a private channel's credentials."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import ENV_TEMPLATE, Project
from fixtures.authserve import behind_a_password

from envtool.lock import pkgcache
from envtool.lock.install import InstallOptions, fill_cache

PASSWORD = "hunter2-5ecret"


def _own_channel(project: Project, tmp_path: Path) -> Path:
    """The tests' channel copied, locked from: a channel this test may take away."""
    mine = tmp_path / "channel"
    shutil.copytree(project.channel, mine)
    project.write_env(ENV_TEMPLATE.format(channel=mine.as_uri()))
    code, _, err = project.run("lock")
    assert code == 0, err
    return mine


def _fill(project: Project, shared: Path) -> tuple[int, int]:
    return fill_cache(InstallOptions(project.lock, shared, allow_insecure_url=True), shared)


def _install(project: Project, prefix: Path, shared: Path, own: Path) -> tuple[int, str, str]:
    return project.run("install", "--prefix", str(prefix), "--cache", str(shared),
                       "--cache-dir", str(own))  # fmt: skip


def test_an_install_that_cannot_reach_the_channel_reads_the_filled_cache(
    project: Project, tmp_path: Path
) -> None:
    channel = _own_channel(project, tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    assert _fill(project, shared) == (9, 0)
    assert not list(shared.glob(".envtool-fill-*"))  # its scratch prefix removed
    channel.rename(tmp_path / "gone")  # the channel is unreachable from here on
    code, out, err = _install(project, tmp_path / "env", shared, tmp_path / "own")
    assert code == 0, err
    assert f"9 conda packages: 9 from the cache {shared}" in out, out
    assert (tmp_path / "env" / "lib" / "libnccl.so.2").is_file()
    # without the cache, the same install fails: the cache is what made it work
    code, out, err = project.run("install", "--prefix", str(tmp_path / "env2"),
                                 "--cache-dir", str(tmp_path / "own2"))  # fmt: skip
    assert code != 0 and "Traceback" not in err


def test_a_file_changed_in_the_cache_is_not_linked(project: Project, tmp_path: Path) -> None:
    _own_channel(project, tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    _fill(project, shared)
    (lib,) = shared.glob("nccl-*/lib/libnccl.so.2")
    original = lib.read_bytes()
    lib.write_bytes(b"changed by another user of the shared folder\n")
    code, out, err = _install(project, tmp_path / "env", shared, tmp_path / "own")
    assert code == 0, err
    assert (tmp_path / "env" / "lib" / "libnccl.so.2").read_bytes() == original
    # rattler checked the cache's copy against its paths.json, and fetched nccl again into
    # the install's own cache: said so
    assert "8 from the cache" in out and "1 downloaded from the lock's URLs" in out, out
    assert "1 of them because the cache's copy failed its check" in out, out
    assert list((tmp_path / "own" / "pkgs").glob("nccl-*/lib/libnccl.so.2"))


def test_no_file_of_the_cache_holds_a_channel_password(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAB_CHANNEL_PASSWORD", PASSWORD)
    shared = tmp_path / "shared"
    shared.mkdir()
    with behind_a_password(project.channel, "bob", PASSWORD, tmp_path / "log") as url:
        literal = f"http://bob:{PASSWORD}@{url.removeprefix('http://')}"
        project.write_env(ENV_TEMPLATE.format(channel=literal))
        code, _, err = project.run("lock")
        assert code == 0, err
        assert _fill(project, shared) == (9, 0)
    held = [p for p in shared.rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()]
    assert held == []
    assert PASSWORD not in pkgcache.Sources(str(shared), 9).said()


def test_a_cache_that_is_not_a_folder_is_one_line_exit_2(project: Project, tmp_path: Path) -> None:
    _own_channel(project, tmp_path)
    (tmp_path / "file").write_text("")
    code, _, err = _install(project, tmp_path / "env", tmp_path / "file", tmp_path / "own")
    said = f"envtool: error: --cache {tmp_path / 'file'}: not a folder"
    assert code == 2 and err.strip() == said
    assert not (tmp_path / "env").exists()
