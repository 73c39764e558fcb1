"""pixi.lock is read wherever a lock is read (lock/pixi.py): formats 5 and 6 from real files
(tests/lock/data/SOURCES.md), format 7 (the current one) written by pixi's own writer
(py-rattler's LockFile) from the tests' local channel; each environment and platform, conda and
pypi packages, hashes. A format py-rattler does not read is refused by its number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Project, run_main

from envtool import environments
from envtool.cli import main
from envtool.errors import InputError
from envtool.lock import lockfile

DATA = Path(__file__).parent / "data"
V5 = DATA / "try-pixi.v5.pixi.lock"
V5_FLAT = DATA / "flat-index.v5.pixi.lock"
V6 = DATA / "numpy-as-pypi.v6.pixi.lock"
SOURCE_PACKAGES = DATA / "conda-path.v6.pixi.lock"
CUDA_STACK = [  # the pytorch channel's CUDA 11.8 torch, as the tests' channel has it
    ("_libgcc_mutex", "conda_forge"), ("libgcc-ng", "h807b86a_5"),
    ("python", "h0755675_1_cpython"), ("python_abi", "4_cp39"),
    ("cudatoolkit", "h4ba93d1_13"), ("nccl", "h12f7317_0"), ("numpy", "py39h474f0d3_0"),
    ("pip", "pyhd8ed1ab_0"), ("pytorch", "cuda118_py39h0a6d3b2_300"),
]  # fmt: skip
CPU = [*CUDA_STACK[:-1], ("pytorch", "cpu_py39h6b5f3f5_0")]


def _file_name(url: str) -> tuple[str, str, str]:
    """(name, version, build) from a conda file name: what format 6 leaves to the URL."""
    stem = url.rsplit("/", 1)[-1].removesuffix(".conda").removesuffix(".tar.bz2")
    name, version, build = stem.rsplit("-", 2)
    return name, version, build


def _expected(path: Path, environment: str, platform: str) -> set[tuple[Any, ...]]:
    """What the file says, read with PyYAML alone: each package of the environment's platform
    with its name, version, build (conda), manager, URL and hashes."""
    doc = yaml.safe_load(path.read_text())
    by_location = {p.get("conda") or p.get("url") or p.get("pypi") or p.get("path"): p
                   for p in doc["packages"]}  # fmt: skip
    out = set()
    for item in doc["environments"][environment]["packages"][platform]:
        location = item.get("conda") or item["pypi"]
        entry = by_location[location]
        if "conda" in item:
            name, version, build = _file_name(location)
            assert (entry.get("name", name), str(entry.get("version", version))) == (name, version)
            out.add((name, version, build, "conda", location, entry["md5"], entry["sha256"]))
        else:
            # an editable local project: its version is what it builds (pixi: "dynamic") and
            # its sha256 hashes the project's metadata, not a file (py-rattler drops both)
            local = entry.get("editable", False)
            version, sha = ("", None) if local else (str(entry["version"]), entry.get("sha256"))
            out.add((entry["name"], version, "", "pip", location, None, sha))
    return out


def _read(path: Path, environment: str) -> set[tuple[Any, ...]]:
    lock = lockfile.read(path, environment)
    return {(p.name, p.version, p.build, p.manager, p.url, p.md5, p.sha256) for p in lock.packages}


@pytest.mark.parametrize("environment", ["default", "cuda118", "cuda121"])
def test_format_5_each_environment_is_what_the_file_says(environment: str) -> None:
    read = _read(V5, environment)
    assert read == _expected(V5, environment, "win-64")
    assert ("try-pixi", "", "", "pip", ".", None, None) in read  # the project, editable
    assert lockfile.read(V5, environment).metadata.platforms == ("win-64",)


def test_format_5_pypi_wheels_and_a_relative_path() -> None:
    read = _read(V5_FLAT, "default")
    assert read == _expected(V5_FLAT, "default", "osx-arm64")
    assert {p[0] for p in read if p[3] == "pip"} >= {"certifi", "requests", "urllib3"}


def test_format_6_names_versions_builds_from_file_names_and_the_pypi_hash() -> None:
    read = _read(V6, "default")
    assert read == _expected(V6, "default", "osx-arm64")
    numpy = next(p for p in read if p[0] == "numpy")
    assert numpy[3] == "pip" and numpy[6] == (
        "3ecc47cd7f6ea0336042be87d9e7da378e5c7e9b3c8ad0f7c966f714fc10d821"
    )
    python = next(p for p in read if p[0] == "python")
    assert python[1:3] == ("3.13.0", "hbbac1ca_101_cp313")


def test_each_environment_keeps_its_own_torch(tmp_path: Path) -> None:
    """diff and check read the environment --environment names; the channel is the URL's."""
    envs = {e: environments.load(str(V5), "win-64", e) for e in ("cuda118", "cuda121")}
    torch = {e: next(p for p in env.packages if p.name == "pytorch") for e, env in envs.items()}
    assert torch["cuda118"].build == "py3.12_cuda11.8_cudnn8_0"
    assert torch["cuda121"].build == "py3.12_cuda12.1_cudnn8_0"
    assert {t.channel for t in torch.values()} == {"pytorch"}
    code, out, err = run_main(main, tmp_path, [], ("check", str(V5), "--platform", "win-64"))
    assert code == 0 and out.startswith(f"consistent: {V5} (16 packages)"), out + err


def _write_format_7(channel: Path, path: Path, envs: dict[str, list[tuple[str, str]]]) -> Path:
    """A pixi.lock written by pixi's writer (py-rattler's LockFile, format 7) from records of
    the tests' local channel."""
    from rattler import Channel, LockChannel, LockFile, LockPlatform, PackageName, SparseRepoData

    records, source = {}, Channel(channel.as_uri())
    for subdir in ("linux-64", "noarch"):
        sparse = SparseRepoData(source, subdir, channel / subdir / "repodata.json")
        for name in sparse.package_names():
            for record in sparse.load_records(PackageName(name)):
                records[(record.name.normalized, str(record.build))] = record
    lock, platform = LockFile([LockPlatform("linux-64")]), LockPlatform("linux-64")
    for env, pins in envs.items():
        lock.set_channels(env, [LockChannel(channel.as_uri())])
        for pin in pins:
            lock.add_conda_package(env, platform, records[pin])
    lock.to_path(path)
    assert path.read_text().startswith("version: 7\n")
    return path


def test_format_7_from_pixis_writer_is_read_by_install_diff_and_check(
    project: Project, tmp_path: Path
) -> None:
    pixi_lock = _write_format_7(project.channel, project.root / "pixi.lock",
                                {"default": CUDA_STACK, "cpu": CPU})  # fmt: skip
    prefix = tmp_path / "env"
    code, out, err = project.run("install", "--lockfile", "pixi.lock", "--prefix", str(prefix))
    assert code == 0 and "installed 9 conda packages" in out, err
    record = json.loads(next((prefix / "conda-meta").glob("pytorch-*.json")).read_text())
    assert record["build"] == "cuda118_py39h0a6d3b2_300"
    code, out, err = run_main(main, tmp_path, [], ("diff", str(pixi_lock), str(prefix)))
    assert code == 0 and out.startswith("identical:"), out + err
    argv = ("diff", str(pixi_lock), str(prefix), "--environment", "cpu", "--format", "json")
    code, out, err = run_main(main, tmp_path, [], argv)
    found = [(f["kind"], f["subject"]) for f in json.loads(out)["findings"]]
    assert code == 1 and found == [("build-differs", "pytorch")], out + err
    cpu = lockfile.read(pixi_lock, "cpu")
    assert cpu.origin == "pixi.lock format 7, environment 'cpu'"
    assert all(p.md5 and p.sha256 and p.url.startswith("file://") for p in cpu.packages)


def _quiet_node(tmp_path: Path) -> Path:
    """A prefix whose python answers with an empty export (no package installed)."""
    prefix = tmp_path / "quiet"
    (prefix / "bin").mkdir(parents=True)
    doc = {"schema": "envtool.node/1", "prefix": str(prefix), "node": "quiet",
           "export": {"schema": "envtool.export/1", "packages": []}}  # fmt: skip
    (prefix / "bin" / "python").write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(doc)}\nEOF\n")
    (prefix / "bin" / "python").chmod(0o755)
    return prefix


def test_verify_checks_a_node_against_a_pixi_lock(channel: Path, tmp_path: Path) -> None:
    pixi_lock = _write_format_7(channel, tmp_path / "pixi.lock", {"default": CUDA_STACK})
    argv = ("verify", "--transport", "local", "--hosts", "localhost", "--lockfile",
            str(pixi_lock), "--prefix", str(_quiet_node(tmp_path)), "--min-gpus", "0",
            "--format", "json", "--all")  # fmt: skip
    code, out, err = run_main(main, tmp_path, [], argv)
    missing = {f["subject"] for f in json.loads(out)["findings"] if f["kind"] == "missing"}
    assert code == 1 and missing == {name for name, _ in CUDA_STACK}, out + err


@pytest.mark.parametrize("version", ["3", "8", "1000", "'six'"])
def test_a_format_py_rattler_does_not_read_is_refused_by_its_number(
    tmp_path: Path, version: str
) -> None:
    path = tmp_path / "pixi.lock"
    path.write_text(V6.read_text().replace("version: 6", f"version: {version}", 1))
    for argv in (("check", str(path)), ("install", "--lockfile", str(path), "--prefix", "p")):
        code, out, err = run_main(main, tmp_path, [], argv)
        said = version.strip("'")
        assert code == 2 and err.count("\n") == 1 and not out, err
        assert f"pixi.lock format version '{said}' is not read" in err and "4 to 7" in err


def test_an_environment_the_lock_lacks_is_named_with_those_it_has(tmp_path: Path) -> None:
    code, _, err = run_main(main, tmp_path, [], ("diff", str(V5), str(V5), "-e", "cuda130"))
    assert code == 2 and "no environment 'cuda130' (has: cuda118, cuda121, default)" in err
    code, _, err = run_main(main, tmp_path, [], ("check", str(V5)))  # linux-64 by default
    assert code == 2 and "no packages for linux-64 in pixi.lock format 5, environment " in err
    assert "(has: win-64)" in err


def test_source_packages_are_refused_by_name(tmp_path: Path) -> None:
    code, _, err = run_main(main, tmp_path, [], ("check", str(SOURCE_PACKAGES)))
    assert code == 2 and err.count("\n") == 1
    assert "is built from source ('../" in err and "not a package file" in err


def test_envtool_lock_never_writes_over_a_pixi_lock(project: Project) -> None:
    target = project.root / "pixi.lock"
    target.write_bytes(V6.read_bytes())
    code, _, err = project.run("lock", "--lockfile", "pixi.lock", "-p", "linux-64")
    assert code == 2 and "a pixi.lock: envtool lock writes conda-lock's format" in err
    assert target.read_bytes() == V6.read_bytes()


def test_a_broken_pixi_lock_is_one_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "pixi.lock"
    path.write_text(V6.read_text().replace("- conda: https://prefix.dev", "- conda: ht tp:", 1))
    with pytest.raises(InputError, match=r"pixi\.lock: pixi\.lock format 6: ") as caught:
        lockfile.read(path)
    assert "\n" not in str(caught.value)
