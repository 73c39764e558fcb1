"""The lock's pip files in ``--cache DIR`` (lock/wheelcache.py), beside its conda packages:
filled from the lock's URLs and checked by sha256, then read by a real ``envtool install``
(py-rattler, then the prefix's pip) that cannot reach the wheels' folder; a file changed in
the cache is never installed (the lock's URL instead, said); a download that is not the
lock's leaves nothing in the cache; a URL's password goes to the server as its Basic
authorization and into no file of the cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import Project
from fixtures import pip_lock
from fixtures.authserve import behind_a_password
from fixtures.channel import build_channel, realistic_packages
from fixtures.wheels import make_wheel

from envtool.errors import InstallError
from envtool.lock.install import InstallOptions, fill_cache
from envtool.lock.lockfile import LockedPackage

PASSWORD = "hunter2-wh33ls"


@pytest.fixture(scope="module")
def pip_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A channel whose python runs this interpreter (so pip can install into the prefix)."""
    root = tmp_path_factory.mktemp("wheelcache")
    return build_channel(root / "channel", realistic_packages(python_exe=sys.executable))


def _wheels(folder: Path, base: str = "") -> tuple[LockedPackage, ...]:
    """Two wheels in ``folder``, as pip entries at ``base`` (default: their file:// URLs)."""
    made = [make_wheel(folder, "tiny-dep", "0.3"), make_wheel(folder, "tiny-dist", "1.0")]
    return tuple(LockedPackage(n, v, "pip", "linux-64", f"{base}/{w.name}" if base else
                               w.as_uri(), sha256=pip_lock.sha256(w))
                 for (n, v), w in zip((("tiny-dep", "0.3"), ("tiny-dist", "1.0")), made,
                                      strict=True))  # fmt: skip


def _fill(proj: Project, shared: Path) -> tuple[int, int]:
    return fill_cache(InstallOptions(proj.lock, shared, allow_insecure_url=True), shared)


def _install(proj: Project, prefix: Path, shared: Path, *mirror: str) -> tuple[int, str, str]:
    mirrors = ["--channel-mirror", f"w={mirror[0]}"] if mirror else []
    return proj.run("install", "--prefix", str(prefix), "--cache", str(shared), "--cache-dir",
                    str(proj.cache), *mirrors)  # fmt: skip


def _filled(channel: Path, tmp_path: Path) -> tuple[Project, Path, Path]:
    """A project locking two wheels of ``tmp_path/wheels``, and its filled cache."""
    proj = pip_lock.locked(tmp_path, channel, _wheels(tmp_path / "wheels"))
    shared = tmp_path / "shared"
    shared.mkdir()
    assert _fill(proj, shared) == (9, 2)
    return proj, tmp_path / "wheels", shared


def test_pip_files_come_from_the_cache_when_their_folder_is_gone(
    pip_channel: Path, tmp_path: Path
) -> None:
    proj, wheels, shared = _filled(pip_channel, tmp_path)
    assert sorted(p.name for p in (shared / "pip").iterdir()) == [
        "tiny_dep-0.3-py3-none-any.whl", "tiny_dist-1.0-py3-none-any.whl"]  # fmt: skip
    assert _fill(proj, shared) == (9, 2)  # filled again: the files kept, nothing left beside
    assert not list((shared / "pip").glob(".envtool-*"))
    wheels.rename(tmp_path / "gone")  # the lock's URLs lead nowhere from here on
    code, out, err = _install(proj, tmp_path / "env", shared, (tmp_path / "gone").as_uri())
    assert code == 0, err
    assert "2 pip files: 2 from the cache" in out, out
    assert list((tmp_path / "env").glob("lib/python*/site-packages/tiny_dist-1.0.dist-info"))


def test_a_pip_file_changed_in_the_cache_is_not_installed(
    pip_channel: Path, tmp_path: Path
) -> None:
    proj, wheels, shared = _filled(pip_channel, tmp_path)
    forged = make_wheel(tmp_path / "forged", "tiny-dep", "0.3")  # same name, other bytes
    forged.write_bytes(forged.read_bytes() + b"\0")
    (shared / "pip" / forged.name).write_bytes(forged.read_bytes())
    code, out, err = _install(proj, tmp_path / "env", shared, wheels.as_uri())
    assert code == 0, err
    said = ("2 pip files: 1 from the cache, 1 downloaded from the lock's URLs, 1 of them "
            "because the cache's copy is not the lock's")  # fmt: skip
    assert said in out, out


def test_a_download_that_is_not_the_lock_s_leaves_nothing(
    pip_channel: Path, tmp_path: Path
) -> None:
    (dep, dist) = _wheels(tmp_path / "wheels")
    proj = pip_lock.locked(tmp_path, pip_channel, (dep, LockedPackage(
        dist.name, dist.version, "pip", "linux-64", dist.url, sha256="0" * 64)))  # fmt: skip
    shared = tmp_path / "shared"
    shared.mkdir()
    with pytest.raises(InstallError) as caught:
        _fill(proj, shared)
    said = str(caught.value)
    assert "tiny_dist-1.0-py3-none-any.whl: sha256" in said and "is not the lock's" in said
    assert "\n" not in said
    assert [p.name for p in (shared / "pip").iterdir()] == ["tiny_dep-0.3-py3-none-any.whl"]


def test_a_password_in_a_pip_url_is_sent_and_kept_nowhere(
    pip_channel: Path, tmp_path: Path
) -> None:
    served = tmp_path / "served"
    entries = _wheels(served, "http://bob:" + PASSWORD + "@127.0.0.1:1")  # port set below
    shared, log = tmp_path / "shared", tmp_path / "log"
    shared.mkdir()
    with behind_a_password(served, "bob", PASSWORD, log) as url:
        port = url.rsplit(":", 1)[1]
        moved = tuple(LockedPackage(e.name, e.version, "pip", "linux-64",
                                    e.url.replace(":1/", f":{port}/"), sha256=e.sha256)
                      for e in entries)  # fmt: skip
        proj = pip_lock.locked(tmp_path, pip_channel, moved)
        assert _fill(proj, shared) == (9, 2)
    assert log.read_text().count("auth\n") == 2  # each wheel fetched with the header
    held = [p for p in shared.rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()]
    assert held == []


def test_push_sends_the_pip_files_and_the_node_installs_from_them(
    pip_channel: Path, tmp_path: Path
) -> None:
    """``fix --cache DIR --push``'s payload (cluster/fix_payload.py) carries the pip files in
    ``pkgs/pip/``; unpacked as a node unpacks it, it is the cache the node's install reads."""
    import tarfile

    from envtool.cluster import fix_payload

    proj, wheels, shared = _filled(pip_channel, tmp_path)
    out = tmp_path / "payload.tar"
    size = fix_payload.write(proj.lock, "linux-64", out, shared=shared)
    assert size == out.stat().st_size
    node = tmp_path / "node"
    with tarfile.open(out) as tar:
        names = tar.getnames()
        tar.extractall(node, filter="data")
    assert {"pkgs/pip/tiny_dep-0.3-py3-none-any.whl", "pkgs/pip/tiny_dist-1.0-py3-none-any.whl"
            } <= set(names)  # fmt: skip
    wheels.rename(tmp_path / "gone")
    code, out_text, err = _install(proj, tmp_path / "env", node / "pkgs",
                                   (tmp_path / "gone").as_uri())  # fmt: skip
    assert code == 0, err
    assert "2 pip files: 2 from the cache" in out_text, out_text
