"""``envtool fix --transport slurm`` on the tests' real Slurm cluster (tests/fixtures/slurm.py:
three slurmd, each its own hostname): each node's ``envtool fix --here`` runs as one srun step
on that node, ``{node}`` in --prefix its SLURMD_NODENAME. node2's prefix, from the older lock
(nccl 2.16.5.1), is fixed from a cache this machine fills and pushes on the step's stdin
(``--cache DIR --push``: no filesystem need be shared); node1 and node3 match and are left
alone, and nothing of the push is left beside any prefix."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import require, run_main
from fixtures import slurm

from envtool.cli import main
from envtool.lock.install import InstallOptions, install


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory, locks: dict[str, Path]) -> Iterator[Path]:
    require(slurm.available(), "Slurm is not installed (apt-get install slurmctld slurmd)")
    require(os.geteuid() == 0, "the tests' slurmd run as root")
    root = tmp_path_factory.mktemp("fixslurm")
    for node, lock in (("node1", "new"), ("node2", "old"), ("node3", "new")):
        install(InstallOptions(locks[lock], root / "envs" / node, allow_stale=True,
                               allow_insecure_url=True))  # fmt: skip
    cluster = slurm.start(root / "slurm", nodes=3)
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield root / "envs"
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        cluster.stop()


def test_fix_over_slurm_fixes_node2_only(envs: Path, locks: dict[str, Path]) -> None:
    args = ("fix", "--transport", "slurm", "--hosts", "node[1-3]", "--prefix",
            str(envs / "{node}"), "--lockfile", str(locks["new"]), "--allow-insecure-url",
            "--node-envtool", f"{sys.executable} -m envtool", "--apply", "--yes",
            "--timeout", "300", "--cache", str(envs.parent / "pushed"), "--push",
            "--cache-dir", str(envs.parent / "own-empty"))  # fmt: skip
    code, out, err = run_main(main, locks["new"].parent, [], args)
    said = " ".join(out.split())
    assert code == 0, out + err
    assert "fixed: 1 of 1 node now matches the lock" in said and "left alone: node1, node3" in said
    assert os.readlink(envs / "node2") == "node2.envtool-gen-1"
    assert re.search(r"installed: (\d+) conda packages: \1 from the cache pushed", said), out
    assert not list(envs.glob(".envtool-fix.*"))
    assert not (envs / "node1").is_symlink() and not (envs / "node3").is_symlink()
