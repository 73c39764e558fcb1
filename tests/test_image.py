"""The build's wheel cache and the builder's pinned dependencies, on real files and a real pip
(issue 24 item 8): a wheel envtool did not record, one whose bytes changed, a folder others
can write or another user owns is refused, never copied into a build context; a downloaded
wheel that differs from its pinned sha256 is refused by pip."""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO

from envtool import image
from envtool.errors import EnvtoolError

PYTHON = "3.11"
WHEELS = ("click-8.5.1-py3-none-any.whl", "envtool-0.1.0-py3-none-any.whl")


def _fake_wheel(path: Path, text: str = "") -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("fake/__init__.py", text or f"# {path.name}\n")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A wheel cache envtool filled (its fetch replaced by two small wheels): its folder."""
    monkeypatch.setenv("ENVTOOL_CACHE_DIR", str(tmp_path / "cache"))
    fetched: list[Path] = []

    def fetch(root: Path, into: Path, python: str) -> None:
        fetched.append(into)
        for name in WHEELS:
            _fake_wheel(into / name)

    monkeypatch.setattr(image, "_fetch_wheels", fetch)
    first = _context(tmp_path, "first")
    image._wheels(REPO, first, PYTHON)
    assert len(fetched) == 1 and sorted(p.name for p in first.glob("*.whl")) == list(WHEELS)
    return tmp_path / "cache" / "build-wheels" / image._source_digest(REPO, PYTHON)


def _context(tmp_path: Path, name: str) -> Path:
    into = tmp_path / name
    into.mkdir()
    return into


def _refused(tmp_path: Path, what: str) -> str:
    into = _context(tmp_path, "ctx")
    with pytest.raises(EnvtoolError) as caught:
        image._wheels(REPO, into, PYTHON)
    message = str(caught.value)
    assert caught.value.exit_code == 1 and "\n" not in message and what in message, message
    assert "refused" in message and not (into / "requirements.txt").exists()
    return message


def test_the_cache_records_each_wheel_and_the_builder_gets_the_hashes(
    cache: Path, tmp_path: Path
) -> None:
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    recorded = (cache / "SHA256SUMS").read_text().splitlines()
    sums = {n: hashlib.sha256((cache / n).read_bytes()).hexdigest() for n in WHEELS}
    assert recorded == [f"{sums[n]}  {n}" for n in WHEELS]
    into = _context(tmp_path, "again")
    image._wheels(REPO, into, PYTHON)  # the second build: from the cache, checked
    lines = (into / "requirements.txt").read_text().splitlines()
    assert lines == [f"/src/wheels/{n} --hash=sha256:{sums[n]}" for n in WHEELS]


def test_a_wheel_envtool_did_not_record_is_refused(cache: Path, tmp_path: Path) -> None:
    _fake_wheel(cache / "evil-1.0-py3-none-any.whl", "import os; os.system('id')\n")
    _refused(tmp_path, "'evil-1.0-py3-none-any.whl' is not a wheel envtool recorded")
    assert not (tmp_path / "ctx" / "evil-1.0-py3-none-any.whl").exists()


def test_a_recorded_wheel_whose_bytes_changed_is_refused(cache: Path, tmp_path: Path) -> None:
    wheel = cache / WHEELS[0]
    data = bytearray(wheel.read_bytes())
    data[-30] ^= 0xFF  # same size, same name, other bytes
    wheel.write_bytes(bytes(data))
    _refused(tmp_path, f"{WHEELS[0]}: its sha256 is")


def test_a_recorded_wheel_replaced_by_a_link_is_refused(cache: Path, tmp_path: Path) -> None:
    wheel = cache / WHEELS[0]
    copy = tmp_path / "elsewhere.whl"
    copy.write_bytes(wheel.read_bytes())  # the same bytes, but someone else's file
    wheel.unlink()
    wheel.symlink_to(copy)
    _refused(tmp_path, WHEELS[0])


def test_a_cache_without_the_record_is_refused(cache: Path, tmp_path: Path) -> None:
    (cache / "SHA256SUMS").unlink()  # as today's caches were written
    _refused(tmp_path, "no SHA256SUMS envtool wrote")


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.chmod(0o770),
        lambda c: c.chmod(0o707),
        lambda c: c.parent.chmod(0o777),
    ],
    ids=["group-writable", "others-writable", "parent-writable"],
)
def test_a_cache_others_can_write_is_refused(
    cache: Path, tmp_path: Path, change: Callable[[Path], None]
) -> None:
    change(cache)
    _refused(tmp_path, "is writable by group or others")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_cache_another_user_owns_is_refused(cache: Path, tmp_path: Path) -> None:
    os.chown(cache, 4242, 4242)
    _refused(tmp_path, "belongs to uid 4242, not to you")


def test_an_interrupted_fill_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C (or SIGTERM, which envtool raises as KeyboardInterrupt) while the wheels are
    fetched: no temp folder and no cache folder stay (the next build fetches again)."""
    monkeypatch.setenv("ENVTOOL_CACHE_DIR", str(tmp_path / "cache"))

    def fetch(root: Path, into: Path, python: str) -> None:
        _fake_wheel(into / WHEELS[0])
        raise KeyboardInterrupt

    monkeypatch.setattr(image, "_fetch_wheels", fetch)
    with pytest.raises(KeyboardInterrupt):
        image._wheels(REPO, _context(tmp_path, "ctx"), PYTHON)
    assert list((tmp_path / "cache" / "build-wheels").iterdir()) == []


def test_the_pins_name_one_version_and_its_sha256() -> None:
    """Every requirement of the builder and of the wheel build is ``name==version`` with at
    least one sha256 (pip --require-hashes insists, and refuses anything else)."""
    for name in ("builder.txt", "backend.txt"):
        text = (REPO / "requirements" / name).read_text()
        entries = [e for e in re.split(r"\n(?=[a-z])", text.split("\n", 2)[2]) if e.strip()]
        assert entries, name
        for entry in entries:
            assert re.match(r"[a-z0-9-]+==[0-9][0-9.]*\s", entry), entry
            assert re.search(r"--hash=sha256:[0-9a-f]{64}", entry), entry


def test_a_builder_wheel_unlike_its_pinned_hash_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package index that serves other bytes under the pinned names and versions (here a
    local one, the only index pip sees): pip refuses them, nothing lands in the folder."""
    index = tmp_path / "index"
    index.mkdir()
    for name in (
        "setuptools-84.2.1-py3-none-any.whl",
        "click-8.5.1-py3-none-any.whl",
        "py_rattler-0.28.0-cp310-abi3-manylinux_2_17_x86_64.whl",
        "pyyaml-6.0.4-cp311-cp311-manylinux_2_17_x86_64.whl",
    ):
        _fake_wheel(index / name)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    into = _context(tmp_path, "wheels")
    with pytest.raises(image.BuildError) as caught:
        image._fetch_wheels(REPO, into, PYTHON)
    message = str(caught.value)
    assert "setuptools==84.2.1" in message and "does not match the sha256" in message, message
    assert "\n" not in message and list(into.iterdir()) == []
