"""Every URL ``envtool install`` uses is the one it checked (issue 24, item 5): a line break
in a pip URL adds no requirement, ``..`` cannot leave a ``--channel-mirror``, and the summary
counts what pip really installed."""

from __future__ import annotations

import hashlib
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import Project, run_main
from fixtures import pip_lock
from fixtures.channel import build_channel, realistic_packages
from fixtures.wheels import make_wheel

from envtool.lock import lockfile
from envtool.lock.lockfile import LockedPackage


@pytest.fixture(scope="module")
def pip_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A channel whose python runs this interpreter (so pip can install into the prefix)."""
    root = tmp_path_factory.mktemp("urls")
    return build_channel(root / "channel", realistic_packages(python_exe=sys.executable))


_sha256, _project = pip_lock.sha256, pip_lock.locked


def _install(proj: Project, prefix: Path, *mirrors: Path) -> tuple[int, str, str]:
    """``envtool install`` under the default policy (no --allow-insecure-url)."""
    from envtool.cli import main

    argv = ["install", "--prefix", str(prefix), "--cache-dir", str(proj.cache)]
    argv += ["--channel-mirror", f"local={proj.channel.as_uri()}"]
    for i, mirror in enumerate(mirrors):
        argv += ["--channel-mirror", f"m{i}={mirror.as_uri()}"]
    return run_main(main, proj.root, [], tuple(argv))


def _site_names(prefix: Path) -> set[str]:
    return {p.name for p in prefix.glob("lib/python*/site-packages/*.dist-info")}


def test_a_line_break_in_a_pip_url_adds_no_requirement(pip_channel: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"  # a configured mirror: its wheels may be installed
    make_wheel(wheels, "tiny-dep", "0.3")
    evil = make_wheel(tmp_path / "elsewhere", "evil", "1.0")  # outside every mirror
    url = (
        f"{wheels.as_uri()}/tiny_dep-0.3-py3-none-any.whl ; python_version < '0'\n"
        f"evil @ {evil.as_uri()}"
    )
    entry = LockedPackage("tiny-dep", "0.3", "pip", "linux-64", url, sha256=_sha256(evil))
    proj = _project(tmp_path, pip_channel, (entry,))
    prefix = tmp_path / "env"
    code, out, err = _install(proj, prefix, wheels)
    assert code == 2, (out, err)
    assert "conda-lock.yml:" in err and "tiny-dep" in err and "line break" in err
    assert err.count("\n") == 1
    assert not prefix.exists()


@pytest.mark.parametrize("field", ["url", "name", "version", "sha256"])
def test_a_line_break_or_nul_in_any_field_is_refused(tmp_path: Path, field: str) -> None:
    from fixtures.lockfiles import HEAD

    from envtool.errors import InputError

    values = {
        "name": "six",
        "version": "1.16.0",
        "url": "https://files.example/six-1.16.0-py2.py3-none-any.whl",
        "sha256": "a" * 64,
    }
    values[field] += "\\r\\n--index-url http://evil\\u0000"
    path = tmp_path / "conda-lock.yml"
    path.write_text(
        HEAD + f'- name: "{values["name"]}"\n  version: "{values["version"]}"\n'
        f'  manager: pip\n  platform: linux-64\n  url: "{values["url"]}"\n'
        f'  hash: {{sha256: "{values["sha256"]}"}}\n  dependencies: {{}}\n'
    )
    with pytest.raises(InputError) as caught:
        lockfile.read(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:") and "\n" not in message and "\r" not in message
    assert "six" in message and field in message


def test_a_pip_option_as_url_is_refused(tmp_path: Path) -> None:
    from fixtures.lockfiles import HEAD

    from envtool.errors import InputError

    path = tmp_path / "conda-lock.yml"
    path.write_text(
        HEAD + "- name: six\n  version: '1.16.0'\n  manager: pip\n  platform: linux-64\n"
        "  url: '--index-url=http://evil/simple'\n"
        f"  hash: {{sha256: '{'a' * 64}'}}\n  dependencies: {{}}\n"
    )
    with pytest.raises(InputError, match=r"six.*pip option"):
        lockfile.read(path)


def _escape(mirror: Path, target: Path, dots: str) -> str:
    return mirror.as_uri() + f"/{dots}" * len(mirror.parts) + str(target)


@pytest.mark.parametrize("dots", ["..", "%2e%2e", ".%2E", "linux-64/../.."])
def test_dot_dot_cannot_leave_the_mirror(pip_channel: Path, tmp_path: Path, dots: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the admin's secret\n")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    proj = _project(tmp_path, pip_channel)
    data = lockfile.read(proj.lock)
    bad = _escape(mirror, secret, dots)
    packages = tuple(replace(p, url=bad) if p.name == "nccl" else p for p in data.packages)
    lockfile.write(lockfile.Lockfile(data.metadata, packages), proj.lock)
    prefix = tmp_path / "env"
    code, out, err = _install(proj, prefix, mirror)
    assert code == 2, (out, err)
    assert "is neither https nor inside a file:// --channel-mirror" in err
    assert hashlib.md5(secret.read_bytes()).hexdigest() not in out + err
    assert not prefix.exists()


def test_dot_dot_inside_the_mirror_installs_the_resolved_file(
    pip_channel: Path, tmp_path: Path
) -> None:
    proj = _project(tmp_path, pip_channel)
    data = lockfile.read(proj.lock)
    channel = pip_channel.as_uri()

    def detour(p: LockedPackage) -> LockedPackage:
        if p.name != "nccl":
            return p
        return replace(p, url=p.url.replace(channel, f"{channel}/noarch/..", 1))

    lockfile.write(lockfile.Lockfile(data.metadata, tuple(map(detour, data.packages))), proj.lock)
    prefix = tmp_path / "env"
    code, out, err = _install(proj, prefix)
    assert code == 0, err
    assert "installed 9 conda packages" in out


def test_the_summary_counts_what_pip_installed(pip_channel: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    other = make_wheel(wheels, "tiny-dep", "0.1")  # the lock claims 0.3 at this URL
    entry = LockedPackage(
        "tiny-dep", "0.3", "pip", "linux-64", other.as_uri(), sha256=_sha256(other)
    )
    proj = _project(tmp_path, pip_channel, (entry,))
    prefix = tmp_path / "env"
    code, out, err = _install(proj, prefix, wheels)
    assert code == 1, (out, err)
    assert "tiny-dep 0.1" in err and "0.3" in err and err.count("\n") == 1
    assert not prefix.exists()


def test_pip_entries_install_and_are_counted(pip_channel: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    made = [make_wheel(wheels, "tiny-dep", "0.3"), make_wheel(wheels, "tiny-dist", "1.0")]
    entries = tuple(
        LockedPackage(n, v, "pip", "linux-64", w.as_uri(), sha256=_sha256(w))
        for (n, v), w in zip((("tiny-dep", "0.3"), ("tiny-dist", "1.0")), made, strict=True)
    )
    proj = _project(tmp_path, pip_channel, entries)
    prefix = tmp_path / "env"
    code, out, err = _install(proj, prefix, wheels)
    assert code == 0, err
    assert "installed 9 conda and 2 pip packages" in out
    assert {"tiny_dep-0.3.dist-info", "tiny_dist-1.0.dist-info"} <= _site_names(prefix)
