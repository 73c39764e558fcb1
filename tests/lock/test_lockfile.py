"""The conda-lock v1 model: real files from public projects, round trips, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.lockfiles import HEAD

from envtool.errors import InputError
from envtool.lock import lockfile

SHA = "cee16ab07a11303de721915f0a269e8c7a54a5c834aa52f74b1cc3a59000ade8"
REAL = ("drdmannturb.conda-lock.yml", "pangeo-pytorch.conda-lock.yml")


def test_reads_every_real_v1_lockfile(shared_data: Path) -> None:
    paths = sorted((shared_data / "real").glob("*.conda-lock.yml"))
    assert {p.name for p in paths} >= set(REAL)
    for path in paths:
        lock = lockfile.read(path)
        assert lock.packages
        assert all(p.md5 for p in lock.packages if p.manager == "conda")
    for name in REAL:
        lock = lockfile.read(shared_data / "real" / name)
        torch = [p for p in lock.packages if p.name == "pytorch" and p.platform == "linux-64"]
        assert len(torch) == 1 and torch[0].build.startswith("cuda118_")


def test_multi_platform_lock_with_defaults_channel(shared_data: Path) -> None:
    lock = lockfile.read(shared_data / "real" / "drdmannturb.conda-lock.yml")
    assert set(lock.metadata.platforms) == {"linux-64", "osx-64", "osx-arm64", "win-64"}
    assert len(lock.packages) == 1114
    assert lock.metadata.channels == ("conda-forge", "defaults")
    win = {p.name: p for p in lock.for_platform("win-64")}
    assert win["pytorch"].version == "2.3.0"
    assert win["pytorch"].url.startswith("https://repo.anaconda.com/pkgs/main/")
    assert dict(win["pytorch"].dependencies)  # dependencies kept as name → spec
    assert {p.subdir for p in lock.for_platform("linux-64")} == {"linux-64", "noarch"}


def test_round_trip_keeps_every_field(shared_data: Path, tmp_path: Path) -> None:
    original = lockfile.read(shared_data / "real" / "pangeo-pytorch.conda-lock.yml")
    out = tmp_path / "conda-lock.yml"
    lockfile.write(original, out)
    again = lockfile.read(out)
    assert set(again.packages) == set(original.packages)
    assert again.metadata == original.metadata


def _lock_text() -> str:
    return (
        HEAD
        + """\
- name: zlib
  version: 1.3.1
  manager: conda
  platform: linux-64
  dependencies: {libgcc-ng: '>=12'}
  url: https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3.1-h4ab18f5_1.conda
  hash: {md5: 57d7dc60e9325e3de37ff8dffd18e814, sha256: SHA}
  category: main
  optional: false
""".replace("SHA", SHA)
    )


def _bad(tmp_path: Path, text: str) -> str:
    path = tmp_path / "conda-lock.yml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        lockfile.read(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


def test_minimal_lock_parses(tmp_path: Path) -> None:
    path = tmp_path / "conda-lock.yml"
    path.write_text(_lock_text())
    (pkg,) = lockfile.read(path).packages
    assert (pkg.name, pkg.build, pkg.subdir) == ("zlib", "h4ab18f5_1", "linux-64")
    assert pkg.channel_url == "https://conda.anaconda.org/conda-forge"


def test_unknown_version(tmp_path: Path) -> None:
    message = _bad(tmp_path, _lock_text().replace("version: 1", "version: 7"))
    assert "conda-lock.yml:1: unsupported lockfile version 7" in message


def test_truncated_lockfile_names_a_line(tmp_path: Path) -> None:
    text = _lock_text()
    message = _bad(tmp_path, text[: text.index("  hash:") + 20])
    assert "conda-lock.yml:" in message


def test_truncated_before_packages(tmp_path: Path) -> None:
    text = _lock_text()
    assert "incomplete lockfile" in _bad(tmp_path, text[: text.index("package:")])


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("md5: 57d7dc60e9325e3de37ff8dffd18e814, ", "", ":14: a conda entry must carry an md5"),
        (
            "  optional: false",
            "  optional: false\n  colour: red",
            ":17: unknown package field 'colour'",
        ),
        ("manager: conda", "manager: cargo", ":10: manager must be conda or pip"),
        ("md5: 57d7", "md5: zz7d", ":14: md5 must be 32 hex digits"),
        (
            "url: https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3.1-h4ab18f5_1.conda",
            "url: ''",
            ":13: 'url' must be",
        ),
        ("content_hash: {linux-64: abc}", "content_hash: 3", ":3: metadata needs 'content_hash'"),
        ("- name: zlib", "- name: ../../etc/zlib", ":8: '../../etc/zlib' is not a package name"),
        ("version: 1.3.1", "version: 1.3/../1", ":9: '1.3/../1' is not a version"),
        ("- name: zlib", "- name: -rf", ":8: '-rf' is not a package name"),
        ("version: 1.3.1", 'version: "1.3.1\\e[8m"', ":9: '1.3.1\\x1b[8m' is not a version"),
    ],
)
def test_bad_entries(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in _lock_text()
    assert expected in _bad(tmp_path, _lock_text().replace(old, new, 1))


def test_names_differing_only_by_case_are_one_package_twice(tmp_path: Path) -> None:
    text = _lock_text()
    entry = text[text.index("- name: zlib") :]
    twice = text + entry.replace("- name: zlib", "- name: ZLib", 1)
    assert "duplicate entry for ZLib (conda, linux-64)" in _bad(tmp_path, twice)


def test_write_is_atomic_and_keeps_old_file_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "conda-lock.yml"
    path.write_text(_lock_text())
    lock = lockfile.read(path)

    def boom(_: object) -> str:
        raise RuntimeError("disk full")

    monkeypatch.setattr(lockfile, "dumps", boom)
    with pytest.raises(RuntimeError):
        lockfile.write(lock, path)
    assert path.read_text() == _lock_text()
    assert [p.name for p in tmp_path.iterdir()] == ["conda-lock.yml"]


def test_pytorch_channel_shapes_round_trip(shared_data: Path, tmp_path: Path) -> None:
    """Records of the real anaconda.org pytorch channel (one per name), as lock entries."""
    import json

    from conda_lock.lockfile import parse_conda_lock_file

    repodata = json.loads(
        (shared_data / "real/rattler-pytorch-channel/linux-64/repodata.json").read_text()
    )
    base = "https://conda.anaconda.org/pytorch/linux-64/"
    packages = tuple(
        lockfile.LockedPackage(
            name=rec["name"],
            version=rec["version"],
            manager="conda",
            platform="linux-64",
            url=base + fn,
            md5=rec["md5"],
            sha256=rec.get("sha256"),
            dependencies=tuple(
                (d.split(" ", 1)[0], d.split(" ", 1)[1] if " " in d else "")
                for d in rec.get("depends", [])
            ),
        )
        for fn, rec in repodata["packages"].items()
        if rec["name"] != "pytorch" or rec["build"] == "py3.9_cuda11.8_cudnn8.7.0_0"
    )
    packages = tuple({p.name: p for p in packages}.values())  # a lock holds one per name
    meta = lockfile.LockMeta(
        (("linux-64", "0" * 64),), ("pytorch",), ("linux-64",), ("environment.yml",)
    )
    path = tmp_path / "conda-lock.yml"
    lockfile.write(lockfile.Lockfile(meta, packages), path)
    back = lockfile.read(path)
    assert len(back.packages) == len(packages) > 20
    builds = {(p.name, p.version, p.build) for p in back.packages}
    assert builds <= {(r["name"], r["version"], r["build"]) for r in repodata["packages"].values()}
    assert ("pytorch", "2.1.0", "py3.9_cuda11.8_cudnn8.7.0_0") in builds
    assert len(parse_conda_lock_file(path).package) == len(packages)


def test_duplicate_entries_are_rejected(tmp_path: Path) -> None:
    text = _lock_text()
    entry = text[text.index("- name: zlib") :]
    message = _bad(tmp_path, text + entry)
    assert "conda-lock.yml:17: duplicate entry for zlib (conda, linux-64)" in message


def test_an_explicit_file_is_named_for_what_it_is(tmp_path: Path) -> None:
    text = (
        "# Generated by conda-lock.\n# platform: linux-64\n@EXPLICIT\n"
        "https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3.1-h4ab18f5_1.conda"
        "#57d7dc60e9325e3de37ff8dffd18e814\n"
    )
    message = _bad(tmp_path, text)
    assert "conda-lock.yml:3: an @EXPLICIT package list" in message
    assert "not a conda-lock v1 lockfile" in message
