"""``envtool lock`` against a real local channel and the conda-forge snapshot."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO, Project

from envtool.lock import lockfile


def test_lock_picks_the_cuda118_build(project: Project) -> None:
    code, out, err = project.run("lock")
    assert code == 0, err
    assert "linux-64: 9 conda packages" in out
    lock = lockfile.read(project.lock)
    pkgs = {p.name: p for p in lock.packages}
    assert pkgs["pytorch"].build == "cuda118_py39h0a6d3b2_300"
    assert pkgs["python"].version == "3.9.18"
    assert pkgs["cudatoolkit"].version == "11.8.0"
    assert pkgs["pip"].subdir == "noarch"
    assert ("__cuda", "") in pkgs["pytorch"].dependencies
    for pkg in lock.packages:
        assert pkg.url.startswith(project.channel.as_uri() + "/")
        archive = project.channel / pkg.subdir / pkg.filename
        import hashlib

        data = archive.read_bytes()
        assert pkg.md5 == hashlib.md5(data).hexdigest()
        assert pkg.sha256 == hashlib.sha256(data).hexdigest()
    assert lock.metadata.sources == ("environment.yml",)


def test_check_fresh_then_stale(project: Project) -> None:
    assert project.run("lock")[0] == 0
    code, out, _ = project.run("lock", "--check")
    assert code == 0 and "up to date" in out
    project.env.write_text(project.env.read_text().replace("  - numpy\n", "  - numpy>=1.20\n"))
    code, out, _ = project.run("lock", "--check")
    assert code == 1 and "stale for linux-64" in out


def test_without_cuda_the_solver_explains(project: Project) -> None:
    (project.root / "virtual-packages.yml").write_text(
        'subdirs:\n  linux-64:\n    packages:\n      __glibc: "2.28"\n'
    )
    code, _, err = project.run("lock")
    assert code == 2
    assert err.startswith("envtool: error: ") and err.count("\n") == 1
    assert "cannot solve for linux-64" in err and "__cuda" in err
    assert not project.lock.exists()


def test_failed_lock_never_overwrites(project: Project) -> None:
    assert project.run("lock")[0] == 0
    before = project.lock.read_bytes()
    project.env.write_text(project.env.read_text().replace("  - nccl\n", "  - nccl>=9\n"))
    code, _, err = project.run("lock")
    assert code == 2 and "nccl" in err
    assert project.lock.read_bytes() == before


def test_bad_spec_names_file_and_line(project: Project) -> None:
    project.env.write_text(project.env.read_text().replace("  - nccl\n", "  - nccl >>=2\n"))
    code, _, err = project.run("lock")
    assert code == 2
    assert "environment.yml:8: bad spec 'nccl >>=2'" in err


def test_unreadable_channel_is_one_line(project: Project, tmp_path: Path) -> None:
    project.env.write_text(
        project.env.read_text().replace(project.channel.as_uri(), (tmp_path / "nowhere").as_uri())
    )
    code, _, err = project.run("lock")
    assert code == 2 and "cannot read a channel" in err and err.count("\n") == 1


def test_mirror_records_canonical_urls(project: Project) -> None:
    project.write_env(project.env.read_text().replace(project.channel.as_uri(), "conda-forge"))
    code, _, err = project.run(
        "lock", "--channel-mirror", f"conda-forge={project.channel.as_uri()}"
    )
    assert code == 0, err
    lock = lockfile.read(project.lock)
    assert lock.metadata.channels == ("conda-forge",)
    for pkg in lock.packages:
        assert pkg.url == f"https://conda.anaconda.org/conda-forge/{pkg.subdir}/{pkg.filename}"


def test_bad_mirror_option(project: Project) -> None:
    code, _, err = project.run("lock", "--channel-mirror", "conda-forge")
    assert code == 2 and "expected NAME=URL" in err


def test_platform_lock_keeps_other_platforms(project: Project) -> None:
    assert project.run("lock")[0] == 0
    lock = lockfile.read(project.lock)
    fake = lock.packages[0]
    from dataclasses import replace

    osx = replace(fake, platform="osx-64")
    meta = replace(
        lock.metadata,
        platforms=("linux-64", "osx-64"),
        content_hash=(*lock.metadata.content_hash, ("osx-64", "0" * 64)),
    )
    lockfile.write(lockfile.Lockfile(meta, (*lock.packages, osx)), project.lock)
    assert project.run("lock", "-p", "linux-64")[0] == 0
    again = lockfile.read(project.lock)
    assert again.metadata.platforms == ("linux-64", "osx-64")
    assert len(again.for_platform("osx-64")) == 1


def test_snapshot_lock_matches_the_real_conda_forge_records(
    shared_data: Path, tmp_path: Path
) -> None:
    snapshot = shared_data / "conda-forge-snapshot"
    for name in ("environment.yml", "virtual-packages.yml"):
        (tmp_path / name).write_text((REPO / name).read_text())
    from conftest import run_main

    from envtool.cli import main

    code, _, err = run_main(
        main,
        tmp_path,
        ["--cache-dir", str(tmp_path / "c")],
        ("lock", "--channel-mirror", f"conda-forge={snapshot.as_uri()}"),
    )
    assert code == 0, err
    lock = lockfile.read(tmp_path / "conda-lock.yml")
    pkgs = {p.name: p for p in lock.packages}
    assert len(pkgs) == 68
    assert pkgs["python"].version.startswith("3.9.")
    assert pkgs["pytorch"].build.startswith("cuda118_py39")
    assert pkgs["cudatoolkit"].version.startswith("11.8")
    assert "nccl" in pkgs
    records = {}
    for subdir in ("linux-64", "noarch"):
        repodata = json.loads((snapshot / subdir / "repodata.json").read_text())
        for key in ("packages", "packages.conda"):
            for fn, rec in repodata.get(key, {}).items():
                records[f"https://conda.anaconda.org/conda-forge/{subdir}/{fn}"] = rec
    for pkg in lock.packages:
        rec = records[pkg.url]
        assert (rec["md5"], rec["sha256"]) == (pkg.md5, pkg.sha256)


def test_shipped_lock_is_fresh_and_real(shared_data: Path) -> None:
    from conftest import run_main

    from envtool.cli import main

    code, out, _ = run_main(main, REPO, [], ("lock", "--check"))
    assert code == 0, out
    shipped = lockfile.read(REPO / "conda-lock.yml")
    assert {p.platform for p in shipped.packages} == {"linux-64"}
    assert all(
        p.url.startswith("https://conda.anaconda.org/conda-forge/") for p in shipped.packages
    )
    assert any(p.name == "pytorch" and "cuda118" in p.build for p in shipped.packages)
