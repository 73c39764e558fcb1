"""lock/cached.py: the lock's packages kept as JSON under the lock's content hash (a Slurm
prolog reads the lock on every node). A second read is the cache's; a cached copy another
user could have written is never trusted (it would fake the lock: the lock is parsed again),
nor is one that is not a cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

from envtool import environments
from envtool.lock import cached, lockfile

LOCK = REPO / "conda-lock.yml"


def _read(tmp_path: Path) -> cached.LockedEnv:
    return cached.read(tmp_path / "conda-lock.yml", "linux-64", environments.from_lock)


@pytest.fixture
def lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ENVTOOL_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "conda-lock.yml").write_bytes(LOCK.read_bytes())
    (tmp_path / "cache").mkdir(mode=0o700)
    return tmp_path


def _no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("parsed: the cache was not used")

    monkeypatch.setattr(lockfile, "parse", refuse)


def test_a_second_read_is_the_cache_s_and_equal(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _read(lock)
    assert len(list((lock / "cache" / "locks").glob("*.json"))) == 1
    _no_parse(monkeypatch)
    assert _read(lock) == first and first.env.packages


def test_a_copy_others_may_write_is_not_trusted(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _read(lock)
    (copy,) = (lock / "cache" / "locks").glob("*.json")
    name = first.env.packages[0].name
    forged = copy.read_text().replace(f'"{name}"', '"forged"', 1)  # what another user wrote
    copy.write_text(forged)
    copy.chmod(0o666)
    assert {p.name for p in _read(lock).env.packages} == {p.name for p in first.env.packages}
    copy.write_text(forged)
    copy.chmod(0o600)
    (lock / "cache" / "locks").chmod(0o777)  # the folder, this time
    assert "forged" not in {p.name for p in _read(lock).env.packages}


def test_a_copy_that_is_no_cache_is_parsed_again(lock: Path) -> None:
    first = _read(lock)
    (copy,) = (lock / "cache" / "locks").glob("*.json")
    copy.write_text("garbage\x1b[2J")
    assert _read(lock) == first
