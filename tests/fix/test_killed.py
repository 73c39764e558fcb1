"""A node that dies mid-fix: ``envtool fix --here --apply`` (what each node runs) killed
with SIGKILL, its whole process group, at a sweep of moments from the install's start to
after its end, each run starting from what the kill before it left. After every kill ``P``
is the prefix it was (nccl 2.16.5.1, a real directory) or wholly switched (a link to a
generation that holds the lock: nccl 2.18.3.1, no install marker): never missing, never
half-made. The next whole fix removes what the kills left and ends at the lock, nothing
unfinished beside it. Real installs from the tests' channel; SIGKILL runs no handler, so
this is what a node losing power between two steps leaves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from envtool.fix import generations
from envtool.lock.install import InstallOptions, install
from envtool_node.schema import INCOMPLETE_MARKER

DELAYS = tuple(0.3 * i for i in range(1, 9))  # s after the start; a fix here takes ~2 s


def _nccl(prefix: Path) -> str:
    [record] = (prefix / "conda-meta").glob("nccl-*.json")
    return str(json.loads(record.read_text())["version"])


def _fix(lock: Path, prefix: Path, cache: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "envtool", "fix", "--here", "--apply", "--lockfile",
            str(lock), "--prefix", str(prefix), "--allow-insecure-url", "--cache-dir",
            str(cache), "--format", "json"]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip


def test_sigkill_at_any_moment_leaves_p_as_it_was_or_wholly_switched(
    locks: dict[str, Path], tmp_path: Path
) -> None:
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    install(InstallOptions(locks["old"], prefix, allow_stale=True, allow_insecure_url=True,
                           cache_dir=cache))  # fmt: skip
    seen = []
    for delay in DELAYS:
        run = _fix(locks["new"], prefix, cache)
        time.sleep(delay)
        ended = run.poll() is not None
        if not ended:
            os.killpg(run.pid, signal.SIGKILL)
        run.communicate(timeout=30)
        state = "switched" if prefix.is_symlink() else "as it was"
        seen.append(f"{delay:.1f}s: {'ended' if ended else 'killed'}, {state}")
        if prefix.is_symlink():
            target = prefix.parent / os.readlink(prefix)
            assert _nccl(target) == "2.18.3.1" and not (target / INCOMPLETE_MARKER).exists()
        else:
            assert _nccl(prefix) == "2.16.5.1", seen
    run = _fix(locks["new"], prefix, cache)
    _, err = run.communicate(timeout=300)
    assert run.returncode == 0, (seen, err)
    assert prefix.is_symlink() and _nccl(prefix) == "2.18.3.1", seen
    now = generations.current(prefix)
    left = [g.path.name for g in generations.generations(prefix) if g != now
            and generations.unfinished(g)]  # fmt: skip
    assert left == [], (seen, left)
    assert not list(tmp_path.glob(".env.envtool-*.lock")), seen  # no lock file left either
    assert any("killed" in s for s in seen), seen  # at least one kill came mid-fix
