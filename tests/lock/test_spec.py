"""environment.yml and virtual-package files: valid input, and bad input named by file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from envtool.errors import InputError
from envtool.lock import spec


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "environment.yml"
    path.write_text(text)
    return path


def test_reads_conda_and_pip_dependencies_with_lines(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "name: x\nchannels: [conda-forge, nodefaults]\ndependencies:\n"
        "  - python=3.9\n  - pip\n  - pip:\n    - tiny-dist==1.0\n",
    )
    env = spec.read_env(path)
    assert env.name == "x"
    assert env.channels == ("conda-forge",)
    assert [(d.spec, d.line) for d in env.conda] == [("python=3.9", 4), ("pip", 5)]
    assert [(d.spec, d.line) for d in env.pip] == [("tiny-dist==1.0", 7)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("channels: [a\ndependencies: [x]\n", "environment.yml:2: invalid YAML"),
        ("channels: [a]\ndependencies: [x]\nfoo: 1\n", "environment.yml:3: unknown key 'foo'"),
        ("channels: [a]\ndependencies: 3\n", "environment.yml:2: 'dependencies' must be"),
        ("channels: [a]\ndependencies:\n  - x\n  - {pip: 3}\n", "environment.yml:4: a dependency"),
        ("channels: [a]\ndependencies:\n  - x\n  - 7\n", "environment.yml:4: a dependency"),
        ("- just\n- a list\n", "environment.yml:1: expected a mapping"),
        ("dependencies: [x]\n", "no channels given"),
        (
            "channels: [a]\nplatforms: [linux-65]\ndependencies: [x]\n",
            "environment.yml:2: unknown platform 'linux-65'",
        ),
    ],
)
def test_bad_environment_files_name_file_and_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(InputError) as info:
        spec.read_env(_write(tmp_path, text))
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        spec.read_env(tmp_path / "nope.yml")
    bad = tmp_path / "environment.yml"
    bad.write_bytes(b"channels: [\xff]\n")
    with pytest.raises(InputError, match="not UTF-8"):
        spec.read_env(bad)


def test_virtual_package_file_and_defaults(tmp_path: Path) -> None:
    path = tmp_path / "virtual-packages.yml"
    path.write_text(
        'subdirs:\n  linux-64:\n    packages:\n      __cuda: "11.8"\n      __archspec: "1 x86_64"\n'
    )
    table = spec.read_virtual_packages(path)
    assert spec.VirtualPackage("__cuda", "11.8", "0") in table["linux-64"]
    assert spec.VirtualPackage("__archspec", "1", "x86_64") in table["linux-64"]
    defaults = spec.read_virtual_packages(None)
    assert {v.name for v in defaults["linux-64"]} >= {"__glibc", "__cuda", "__linux"}
    path.write_text("subdirs:\n  linux-64:\n    packages:\n      cuda: 1\n")
    with pytest.raises(InputError, match=r"virtual-packages\.yml:4: virtual package 'cuda'"):
        spec.read_virtual_packages(path)


def test_content_hash_changes_with_inputs(tmp_path: Path) -> None:
    env = spec.read_env(_write(tmp_path, "channels: [a]\ndependencies: [x, y]\n"))
    same = spec.read_env(_write(tmp_path, "channels: [a]\ndependencies: [y, x]  # order\n"))
    other = spec.read_env(_write(tmp_path, "channels: [a]\ndependencies: [x, 'y>=2']\n"))
    vp = spec.read_virtual_packages(None)
    h = spec.content_hash(env, "linux-64", vp)
    assert h == spec.content_hash(same, "linux-64", vp)
    assert h != spec.content_hash(other, "linux-64", vp)
    assert h != spec.content_hash(env, "osx-64", vp)
    cuda12 = {"linux-64": (spec.VirtualPackage("__cuda", "12.0"),)}
    assert h != spec.content_hash(env, "linux-64", cuda12)
