"""``envtool fix`` on this machine's prefix (``--transport local``): real installs with
py-rattler from the tests' local channel, real switches. A prefix installed from an older
lock (nccl 2.16.5.1) is planned, then fixed to the lock (nccl 2.18.3.1) in a new generation
(``P`` becomes a link; the old directory is ``P.envtool-gen-0``), rolled back, fixed twice;
a hash that does not match, a Ctrl-C at each step and a generation an interrupted run left
each leave ``P`` as it was; a process running from the old generation keeps running and its
generation is kept."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from envtool.errors import InputError
from envtool.fix import apply, generations


def _install(lock: Path, prefix: Path) -> None:
    from envtool.lock.install import InstallOptions, install

    install(InstallOptions(lock, prefix, allow_stale=True, allow_insecure_url=True))


def _nccl(prefix: Path) -> str:
    [record] = (prefix / "conda-meta").glob("nccl-*.json")
    return str(json.loads(record.read_text())["version"])


@pytest.fixture
def drifted(locks: dict[str, Path], tmp_path: Path) -> Iterator[Path]:
    prefix = tmp_path / "env"
    _install(locks["old"], prefix)
    yield prefix


def _fix(lock: Path, prefix: Path, **kw: object) -> apply.FixOutcome:
    options = apply.FixOptions(lock, prefix, allow_insecure_url=True, **kw)  # type: ignore[arg-type]
    return apply.run(options)


def test_the_plan_changes_nothing(locks: dict[str, Path], drifted: Path) -> None:
    outcome = _fix(locks["new"], drifted)
    said = [(c.action, c.name, c.before and c.before.version, c.after and c.after.version)
            for c in outcome.plan.changes]  # fmt: skip
    assert said == [("replace", "nccl", "2.16.5.1", "2.18.3.1")]
    assert not outcome.applied and not drifted.is_symlink() and _nccl(drifted) == "2.16.5.1"


def test_fix_switches_to_a_new_generation_and_rollback_exchanges_it_back(
    locks: dict[str, Path], drifted: Path
) -> None:
    outcome = _fix(locks["new"], drifted, apply=True)
    assert (outcome.applied, outcome.generation, outcome.switch) == (
        True, "env.envtool-gen-1", "exchange"
    )  # fmt: skip
    assert os.readlink(drifted) == "env.envtool-gen-1" and _nccl(drifted) == "2.18.3.1"
    original = generations.path_of(drifted, 0)
    assert original.is_dir() and _nccl(original) == "2.16.5.1"  # kept (--keep 1)
    stamp = json.loads((drifted / "conda-meta" / "envtool-lock").read_text())
    assert stamp["lock"] == "conda-lock.yml" and len(stamp["lock_sha256"]) == 64
    loaded = subprocess.run([str(drifted / "bin" / "python"), "-c", "import torch; print(1)"],
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert loaded.stdout.strip() == "1", loaded.stderr
    assert _fix(locks["new"], drifted, apply=True).plan.empty  # nothing left to do
    back = apply.rollback(apply.FixOptions(locks["new"], drifted, allow_insecure_url=True))
    assert back.generation == "env" and not drifted.is_symlink() and not original.exists()
    assert _nccl(drifted) == "2.16.5.1"


def test_a_second_fix_renames_a_new_link_over_the_old(
    locks: dict[str, Path], drifted: Path
) -> None:
    _fix(locks["new"], drifted, apply=True)
    second = _fix(locks["old"], drifted, apply=True, keep=0)
    assert (second.generation, second.switch) == ("env.envtool-gen-2", "rename"), second
    assert _nccl(drifted) == "2.16.5.1"
    assert set(second.removed) == {"env.envtool-gen-1", "env.envtool-gen-0"}, second
    with pytest.raises(InputError, match=r"no generation before env\.envtool-gen-2"):
        apply.rollback(apply.FixOptions(locks["old"], drifted))  # --keep 0 kept none


def test_a_hash_that_does_not_match_leaves_the_prefix_as_it_was(
    locks: dict[str, Path], drifted: Path, tmp_path: Path, python_channel: Path
) -> None:
    channel = tmp_path / "channel"
    shutil.copytree(python_channel, channel)
    lock = tmp_path / "conda-lock.yml"
    lock.write_text(locks["new"].read_text().replace(python_channel.as_uri(), channel.as_uri()))
    [archive] = (channel / "linux-64").glob("nccl-2.18.3.1-*")
    archive.write_bytes(archive.read_bytes() + b"tampered")
    # a cache of its own, empty: the archive is what the install reads (a package a cache
    # holds, checked against the lock's sha256 there, never reads it)
    with pytest.raises(Exception, match="mismatch"):
        _fix(lock, drifted, apply=True, cache_dir=tmp_path / "empty-cache")
    assert not drifted.is_symlink() and _nccl(drifted) == "2.16.5.1"
    assert generations.generations(drifted) == []


@pytest.mark.parametrize("step", ["install", "_check", "switch"])
def test_ctrl_c_at_each_step_leaves_the_prefix_as_it_was(
    locks: dict[str, Path], drifted: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    def interrupt(*args: object, **kw: object) -> None:
        raise KeyboardInterrupt

    target = generations if step == "switch" else apply
    monkeypatch.setattr(target, step, interrupt)
    with pytest.raises(KeyboardInterrupt):
        _fix(locks["new"], drifted, apply=True)
    assert not drifted.is_symlink() and _nccl(drifted) == "2.16.5.1"
    assert generations.generations(drifted) == []


def test_a_generation_an_interrupted_run_left_is_removed_by_the_next(
    locks: dict[str, Path], drifted: Path
) -> None:
    left = generations.path_of(drifted, 1)  # SIGKILL between install and switch: its marker
    (left / "conda-meta").mkdir(parents=True)
    (left / apply.PENDING).write_text("envtool fix: not switched to yet\n")
    outcome = _fix(locks["new"], drifted, apply=True)
    assert outcome.removed == ("env.envtool-gen-1",)  # removed first, then made anew
    assert outcome.generation == "env.envtool-gen-1" and not (left / apply.PENDING).exists()
    assert _nccl(drifted) == "2.18.3.1"


def test_a_process_running_from_the_old_generation_keeps_it(
    locks: dict[str, Path], drifted: Path
) -> None:
    # it maps the prefix's CUDA runtime as a rank that loaded it does (the kernel's maps follow the
    # file when its folder is renamed: after the switch they name env.envtool-gen-0)
    code = ("import mmap, sys, time; f = open(sys.argv[1], 'rb'); "
            "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); print('up', flush=True); "
            "time.sleep(120)")  # fmt: skip
    holder = subprocess.Popen(
        [str(drifted / "bin" / "python"), "-c", code, str(drifted / "lib" / "libcudart.so.11.0")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "up"
        _fix(locks["new"], drifted, apply=True)  # P: gen-1; the old directory: gen-0
        outcome = _fix(locks["old"], drifted, apply=True, keep=0)
        assert holder.poll() is None  # still running
        kept = dict(outcome.kept_in_use)
        assert holder.pid in kept["env.envtool-gen-0"], outcome
        assert generations.path_of(drifted, 0).is_dir()
        assert "env.envtool-gen-1" in outcome.removed
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


def test_keep_keeps_the_generation_in_use_before_not_the_highest_number(
    locks: dict[str, Path], drifted: Path
) -> None:
    """fix → rollback → fix: the directory P was just before is what --keep 1 keeps (and what
    a rollback goes back to), not generation 1, which was in use before that."""
    _fix(locks["new"], drifted, apply=True)
    apply.rollback(apply.FixOptions(locks["new"], drifted))
    assert not drifted.is_symlink() and generations.path_of(drifted, 1).is_dir()
    again = _fix(locks["new"], drifted, apply=True, keep=1)
    assert (again.generation, again.removed) == ("env.envtool-gen-2", ("env.envtool-gen-1",))
    back = apply.rollback(apply.FixOptions(locks["new"], drifted))
    assert back.generation == "env" and not drifted.is_symlink() and _nccl(drifted) == "2.16.5.1"


def test_what_envtool_may_not_fix_is_refused_in_one_line(
    locks: dict[str, Path], drifted: Path, tmp_path: Path
) -> None:
    """Not a conda environment; a folder above the prefix that another user owns, or that
    every user can write (a fix there could be redirected); a lock for another platform."""
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(InputError, match=r"not a conda environment \(no conda-meta/\)"):
        _fix(locks["new"], plain, apply=True)
    with pytest.raises(InputError, match="no packages for osx-arm64"):
        _fix(locks["new"], drifted, apply=True, platform="osx-arm64")
    shared = tmp_path / "shared"
    shared.mkdir()
    shutil.copytree(drifted, shared / "env", symlinks=True)
    shared.chmod(0o777)  # every user can write it, not sticky
    with pytest.raises(InputError, match="can be written by every user"):
        _fix(locks["new"], shared / "env", apply=True)
    if os.geteuid() == 0:  # a folder another user owns (nobody)
        shared.chmod(0o755)
        os.chown(shared, 65534, 65534)
        with pytest.raises(InputError, match="belongs to uid 65534"):
            _fix(locks["new"], shared / "env", apply=True)
    assert not (shared / "env").is_symlink() and _nccl(shared / "env") == "2.16.5.1"
