"""Two envtools at once: one install into a prefix at a time (a second one fails with a clear
line and never removes the first one's work), and a lockfile's read-merge-write is locked
so two ``lock -p`` runs both keep their platforms."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from conftest import Project

from envtool.lock import filelock, lockfile

ENVTOOL = str(Path(sys.executable).parent / "envtool")


def _envtool(project: Project, *args: str) -> subprocess.Popen[str]:
    argv = [ENVTOOL, *args, "--cache-dir", str(project.cache)]
    argv += ["--allow-insecure-url"] if args[0] == "install" else []  # the tests' file:// channel
    return subprocess.Popen(argv, cwd=project.root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def test_a_second_install_into_a_busy_prefix_fails_and_touches_nothing(
    project: Project, tmp_path: Path
) -> None:
    assert project.run("lock")[0] == 0
    prefix = tmp_path / "env"
    with filelock.held(prefix, "install", wait=False):  # as a running install holds it
        run = _envtool(project, "install", "--prefix", str(prefix))
        _, err = run.communicate(timeout=120)
    assert run.returncode == 1
    assert f"{prefix}: another envtool install into it is running (pid {os.getpid()})" in err
    assert not prefix.exists()


def test_a_failing_install_beside_a_good_one_never_removes_its_prefix(
    project: Project, tmp_path: Path
) -> None:
    assert project.run("lock")[0] == 0
    data = lockfile.read(project.lock)
    bad = replace(data, packages=tuple(replace(p, md5="0" * 32) for p in data.packages))
    lockfile.write(bad, project.root / "bad-lock.yml")
    for round_ in range(4):
        prefix = tmp_path / f"env{round_}"
        good = _envtool(project, "install", "--prefix", str(prefix))
        failing = _envtool(
            project, "install", "--prefix", str(prefix), "--lockfile", "bad-lock.yml",
            "--allow-stale",
        )  # fmt: skip
        _, good_err = good.communicate(timeout=120)
        failing.communicate(timeout=120)
        assert failing.returncode == 1
        if good.returncode == 0:  # it finished: its prefix is there with every package (a
            # failing install after it may only mark it, conda-meta/envtool-incomplete)
            records = list((prefix / "conda-meta").glob("*.json"))
            assert len(records) == 9, (round_, records)
        else:  # it found the prefix busy, and said so
            assert "another envtool install into it is running" in good_err, good_err


def test_a_lock_run_keeps_the_platforms_another_one_wrote_meanwhile(project: Project) -> None:
    assert project.run("lock")[0] == 0
    with filelock.held(project.lock, "write", wait=True):  # another lock run is writing
        run = _envtool(project, "lock", "-p", "linux-64")
        time.sleep(3)  # it solves, then waits here for the lockfile
        assert run.poll() is None, run.communicate()
        data = lockfile.read(project.lock)
        osx = tuple(replace(p, platform="osx-64") for p in data.packages)
        meta = replace(
            data.metadata,
            platforms=(*data.metadata.platforms, "osx-64"),
            content_hash=(*data.metadata.content_hash, ("osx-64", "0" * 64)),
        )
        lockfile.write(lockfile.Lockfile(meta, data.packages + osx), project.lock)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    final = lockfile.read(project.lock)
    assert set(final.metadata.platforms) == {"linux-64", "osx-64"}
    assert {p.platform for p in final.packages} == {"linux-64", "osx-64"}


def test_a_lock_run_leaves_no_lock_file_beside_the_lockfile(project: Project) -> None:
    """``make lock`` used to leave ``.conda-lock.yml.envtool-write.lock`` in the checkout."""
    assert project.run("lock")[0] == 0
    assert project.lock.exists()
    assert [p.name for p in project.root.glob(".*envtool-*.lock")] == []


def test_removing_the_lock_file_never_lets_two_holders_in(tmp_path: Path) -> None:
    """Each holder removes the file it locked; a waiter that locked a removed file locks the
    new one instead. Sixteen threads (each its own open file, so flock tells them apart)
    enter one at a time, and the file is gone at the end."""
    import threading

    guarded = tmp_path / "conda-lock.yml"
    inside: list[int] = []
    overlaps: list[int] = []

    def work(n: int) -> None:
        for _ in range(20):
            with filelock.held(guarded, "write", wait=True):
                inside.append(n)
                if len(inside) > 1:
                    overlaps.append(n)
                time.sleep(0.0005)
                inside.remove(n)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []
    assert not filelock.lock_path(guarded, "write").exists()
