"""Nothing left behind (issue 23, item 5): every temp file a run makes (the node script's
private folder, torchrun's log dir, the facts and result folders, torch's own) lives in the
run's one private folder and goes with it, finished, timed out or interrupted. Counted in
each node's TMPDIR and in envtool's own, before and after."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import require
from fixtures import faulty, sshnodes
from fixtures.channel import build_channel, realistic_packages
from fixtures.prefixes import install_prefix
from fixtures.runtime import runtime_packages

ENVTOOL = str(Path(sys.executable).parent / "envtool")
SWEEP = "-b 1K -e 1K -n 1 -w 1 --nproc {n} --backend gloo"
RANK = " -u -m envtool_node.allreduce --worker"  # a rank torchrun started (not torchrun)
ENDLESS = "-b 64K -e 64K -n 1000000 -w 1 --nproc 1 --backend gloo"


@dataclass
class Lab:
    """Two sshd nodes sharing one good prefix, each with a TMPDIR of its own; envtool's own
    TMPDIR (``admin``) beside them."""

    cluster: sshnodes.Cluster
    good: Path
    tmpdirs: list[Path]
    admin: Path

    def entries(self) -> dict[str, list[str]]:
        """What each TMPDIR holds (envtool's and every node's)."""
        return {str(d): sorted(p.name for p in d.iterdir()) for d in [self.admin, *self.tmpdirs]}

    def node_side(self) -> dict[int, str]:
        """The processes a run started on the nodes (all carry their node's TMPDIR)."""
        return sshnodes.processes_with_env("TMPDIR", {str(d) for d in self.tmpdirs})


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    require(sshnodes.available(), "OpenSSH sshd is not installed (apt-get install openssh-server)")
    require(importlib.util.find_spec("torch") is not None, "torch is not installed")
    root = tmp_path_factory.mktemp("leftovers")
    channel = build_channel(root / "channel", realistic_packages() + runtime_packages())
    good = install_prefix(channel, faulty.SPECS, root / "good-env", root / "cache")
    tmpdirs = [root / "tmp1", root / "tmp2"]
    for folder in [*tmpdirs, root / "admin-tmp"]:
        folder.mkdir()
    envs = [{"CONDA_PREFIX": str(good), "TMPDIR": str(t)} for t in tmpdirs]
    lab = Lab(sshnodes.start_cluster(root / "ssh", envs), good, tmpdirs, root / "admin-tmp")
    try:
        yield lab
    finally:
        for pid in lab.node_side():  # a failed test must not leave its ranks running
            os.kill(pid, signal.SIGKILL)
        lab.cluster.stop()


def _clean(lab: Lab) -> None:
    """Each test starts from empty TMPDIRs, whatever an earlier one left."""
    for folder in [lab.admin, *lab.tmpdirs]:
        subprocess.run(["rm", "-rf", *(str(p) for p in folder.iterdir())], check=True)


def _verify(lab: Lab, cwd: Path, *extra: str) -> subprocess.Popen[bytes]:
    argv = [ENVTOOL, "verify", "--no-lock", "--min-gpus", "0", "--format", "json", *extra]
    env = {**os.environ, "TMPDIR": str(lab.admin)}
    return subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _cluster(lab: Lab, sweep: str, timeout: int) -> tuple[str, ...]:
    port = sshnodes.free_port("127.0.0.2")
    return (
        "--hosts", "node[1-2]", "-F", str(lab.cluster.ssh_config), "--allreduce", "cluster",
        "--allreduce-args", sweep, "--rdzv-endpoint", f"127.0.0.2:{port}",
        "--timeout", str(timeout),
    )  # fmt: skip


def _empty_after(lab: Lab, seconds: float) -> dict[str, list[str]]:
    """The TMPDIRs once nothing of the run is left on the nodes (at most ``seconds``)."""
    end = time.monotonic() + seconds
    while (lab.node_side() or any(lab.entries().values())) and time.monotonic() < end:
        time.sleep(0.05)
    assert lab.node_side() == {}, "left running on the nodes"
    return lab.entries()


def test_a_cluster_allreduce_over_ssh_leaves_nothing(lab: Lab, tmp_path: Path) -> None:
    # torchrun's log dir (torchelastic_*) stayed in every node's TMPDIR before
    _clean(lab)
    before = lab.entries()
    run = _verify(lab, tmp_path, *_cluster(lab, SWEEP.format(n=1), 90))
    out, err = run.communicate(timeout=180)
    assert run.returncode == 0, out.decode() + err.decode()
    assert before == _empty_after(lab, 5) == {str(d): [] for d in [lab.admin, *lab.tmpdirs]}


def test_an_interrupted_cluster_allreduce_leaves_nothing(lab: Lab, tmp_path: Path) -> None:
    _clean(lab)
    before = lab.entries()
    run = _verify(lab, tmp_path, *_cluster(lab, ENDLESS, 120))
    try:
        end = time.monotonic() + 120
        while sum(RANK in a for a in lab.node_side().values()) < 2:
            assert time.monotonic() < end and run.poll() is None, "the ranks never ran"
            time.sleep(0.05)
        time.sleep(0.5)  # the sweep under way on both nodes
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err
    assert _empty_after(lab, 15) == before


def test_a_local_allreduce_leaves_nothing(lab: Lab, tmp_path: Path) -> None:
    _clean(lab)
    before = lab.entries()
    run = _verify(
        lab, tmp_path, "--transport", "local", "--hosts", "localhost", "--prefix", str(lab.good),
        "--allreduce", "node", "--allreduce-args", SWEEP.format(n=2), "--timeout", "90",
    )  # fmt: skip
    out, err = run.communicate(timeout=180)
    assert run.returncode == 0, out.decode() + err.decode()
    assert lab.entries() == before


def test_a_local_probe_stopped_by_envtool_leaves_nothing(lab: Lab, tmp_path: Path) -> None:
    # envtool used to SIGKILL the node script at once: its EXIT trap never removed its folder
    _clean(lab)
    before = lab.entries()
    prefix = tmp_path / "env"
    faulty._fake_python(prefix, "exec yes endless")  # stopped at --max-output
    (prefix / "conda-meta").mkdir()
    argv = ("--transport", "local", "--hosts", "localhost", "--prefix", str(prefix))
    argv += ("--max-output", "64K")
    run = _verify(lab, tmp_path, *argv)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 1, out.decode() + err.decode()
    assert b'"unreachable"' in out
    assert lab.entries() == before
