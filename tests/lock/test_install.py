"""``envtool install``: a real install into a prefix with py-rattler, hashes checked."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Project


def _locked(project: Project) -> None:
    code, _, err = project.run("lock")
    assert code == 0, err


def test_install_creates_a_real_prefix(project: Project, tmp_path: Path) -> None:
    _locked(project)
    prefix = tmp_path / "env"
    code, out, err = project.run("install", "--prefix", str(prefix))
    assert code == 0, err
    assert "installed 9 conda packages" in out
    records = {
        json.loads(p.read_text())["name"]: json.loads(p.read_text())
        for p in (prefix / "conda-meta").glob("*.json")
    }
    assert set(records) == {
        "_libgcc_mutex",
        "libgcc-ng",
        "python",
        "python_abi",
        "cudatoolkit",
        "nccl",
        "numpy",
        "pytorch",
        "pip",
    }
    assert records["pytorch"]["build"] == "cuda118_py39h0a6d3b2_300"
    assert records["pytorch"]["url"].startswith(project.channel.as_uri())
    # noarch: python packages are relocated into the prefix's site-packages
    assert (prefix / "lib/python3.9/site-packages/pip-23.3.1.dist-info/METADATA").is_file()
    assert (prefix / "lib/libnccl.so.2").is_file()


def test_reinstall_is_idempotent_and_removes_extras(project: Project, tmp_path: Path) -> None:
    _locked(project)
    prefix = tmp_path / "env"
    assert project.run("install", "--prefix", str(prefix))[0] == 0
    stray = prefix / "conda-meta" / "stray-1.0-0.json"
    stray.write_text(
        json.dumps(
            {
                "name": "stray",
                "version": "1.0",
                "build": "0",
                "build_number": 0,
                "subdir": "linux-64",
                "depends": [],
                "files": [],
                "paths_data": {"paths": [], "paths_version": 1},
                "url": "file:///x/linux-64/stray-1.0-0.tar.bz2",
                "channel": "file:///x",
                "fn": "stray-1.0-0.tar.bz2",
            }
        )
    )
    code, _, err = project.run("install", "--prefix", str(prefix))
    assert code == 0, err
    assert not stray.exists()
    assert len(list((prefix / "conda-meta").glob("*.json"))) == 9


def test_tampered_package_fails_and_leaves_no_prefix(project: Project, tmp_path: Path) -> None:
    _locked(project)
    text = project.lock.read_text()
    # keep the archive but claim another hash: the install must refuse it
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "nccl-2.18.3.1" in line:
            sha_line = next(j for j in range(i, i + 5) if "sha256:" in lines[j])
            lines[sha_line] = lines[sha_line].split("sha256:")[0] + "sha256: '" + "0" * 64 + "'"
            md5_line = next(j for j in range(i, i + 5) if "md5:" in lines[j])
            lines[md5_line] = lines[md5_line].split("md5:")[0] + "md5: '" + "0" * 32 + "'"
            break
    project.lock.write_text("\n".join(lines) + "\n")
    prefix = tmp_path / "env"
    code, _, err = project.run("install", "--prefix", str(prefix))
    assert code == 1, err
    assert "nccl-2.18.3.1-h12f7317_0.tar.bz2: md5 mismatch" in err and err.count("\n") == 1
    assert not prefix.exists()


def test_failed_install_into_an_existing_prefix_is_marked(project: Project, tmp_path: Path) -> None:
    from envtool.lock.prefixes import INCOMPLETE_MARKER

    _locked(project)
    prefix = tmp_path / "env"
    assert project.run("install", "--prefix", str(prefix))[0] == 0
    assert not (prefix / INCOMPLETE_MARKER).exists()  # a whole install leaves no marker
    _tamper_sha256(project.lock, "nccl-2.18.3.1")
    code, _, err = project.run(
        "install", "--prefix", str(prefix), "--cache-dir", str(tmp_path / "fresh-cache")
    )
    assert code == 1 and "sha256 mismatch" in err, err
    assert (prefix / "conda-meta").is_dir()  # the prefix is kept (it was there before) ...
    text = (prefix / INCOMPLETE_MARKER).read_text()  # ... and marked as not what it was
    assert text.startswith("envtool install did not finish; re-run envtool install\n")
    assert f"lock: {project.lock}" in text and "platform: linux-64" in text


def test_stale_lock_is_refused_unless_allowed(project: Project, tmp_path: Path) -> None:
    _locked(project)
    project.env.write_text(project.env.read_text() + "  - zlib\n")
    prefix = tmp_path / "env"
    code, _, err = project.run("install", "--prefix", str(prefix))
    assert code == 1 and "stale for linux-64" in err and "--allow-stale" in err
    assert not prefix.exists()
    code, _, err = project.run("install", "--prefix", str(prefix), "--allow-stale")
    assert code == 0, err


def test_unknown_platform_in_lock(project: Project, tmp_path: Path) -> None:
    _locked(project)
    code, _, err = project.run("install", "--prefix", str(tmp_path / "e"), "--platform", "osx-64")
    assert code == 2 and "no packages for osx-64 (has: linux-64)" in err


def _tamper_sha256(lock: Path, filename_part: str) -> None:
    lines = lock.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if filename_part in line)
    j = next(j for j in range(start, start + 5) if "sha256:" in lines[j])
    lines[j] = lines[j].split("sha256:")[0] + "sha256: '" + "1" * 64 + "'"
    lock.write_text("\n".join(lines) + "\n")


def test_http_channel_install_and_hash_check(
    project: Project, http_channel: str, tmp_path: Path
) -> None:
    project.write_env(project.env.read_text().replace(project.channel.as_uri(), http_channel))
    _locked(project)
    prefix = tmp_path / "env"
    code, _, err = project.run("install", "--prefix", str(prefix))
    assert code == 0, err
    assert (prefix / "conda-meta").is_dir()
    _tamper_sha256(project.lock, "cudatoolkit-11.8.0")
    other = tmp_path / "env2"
    code, _, err = project.run(
        "install", "--prefix", str(other), "--cache-dir", str(tmp_path / "fresh-cache")
    )
    assert code == 1
    assert "hash mismatch" in err and err.count("\n") == 1
    assert not other.exists()


def test_a_device_behind_a_file_url_is_refused_not_read_forever() -> None:
    import pytest

    from envtool.errors import InstallError
    from envtool.lock.install import verify_local_archives
    from envtool.lock.lockfile import LockedPackage

    zero = LockedPackage("zlib", "1.3", "conda", "linux-64", "file:///dev/zero", md5="0" * 32)
    with pytest.raises(InstallError, match="not a regular file"):
        verify_local_archives([zero])


def test_only_https_or_a_configured_local_mirror_is_installed(
    project: Project, tmp_path: Path
) -> None:
    from conftest import run_main

    from envtool.cli import main

    _locked(project)  # the tests' channel is file://: its URLs are neither https nor a mirror
    prefix = tmp_path / "env"
    argv = ("install", "--prefix", str(prefix), "--cache-dir", str(project.cache))
    code, _, err = run_main(main, project.root, [], argv)
    assert code == 2 and "is neither https nor inside a file:// --channel-mirror" in err
    assert not prefix.exists()
    mirror = f"local={project.channel.as_uri()}"
    code, out, err = run_main(main, project.root, [], (*argv, "--channel-mirror", mirror))
    assert code == 0 and "installed 9 conda packages" in out, err


def test_http_needs_the_insecure_flag(project: Project, http_channel: str, tmp_path: Path) -> None:
    from conftest import run_main

    from envtool.cli import main

    project.write_env(project.env.read_text().replace(project.channel.as_uri(), http_channel))
    _locked(project)
    argv = ("install", "--prefix", str(tmp_path / "env"), "--cache-dir", str(project.cache))
    code, _, err = run_main(main, project.root, [], argv)
    assert code == 2 and f"{http_channel}/" in err and "--allow-insecure-url" in err
