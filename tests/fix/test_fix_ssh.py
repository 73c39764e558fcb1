"""verify → fix → verify on three real sshd nodes on loopback (tests/fixtures/sshnodes.py),
each with its own prefix (``--prefix ROOT/{node}/env``), installed from the tests' local
channel: node1 from the lock, node2 from an older lock (nccl 2.16.5.1), node3 from the lock
with a pip torch shadowing conda's pytorch (what ``pip install torch`` leaves). Each node runs
its own ``envtool fix --here`` over ssh. The plan changes nothing; ``--apply`` takes node2 and
node3 to zero findings and leaves node1 alone (still its directory); ``--rollback`` switches
them back. verify says which lock each prefix's install stamp names, before and after."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import VIRTUAL_CUDA, Project, require
from fixtures import sshnodes
from fixtures.fake_micromamba import make_fake_micromamba
from fixtures.prefixes import add_dist_info
from fixtures.runtime import LAB_ENV, SP, torch_version

OLD = LAB_ENV.replace("nccl=2.18.3.1", "nccl=2.16.5.1")


@dataclass
class Lab:
    project: Project
    cluster: sshnodes.Cluster
    root: Path

    def prefix(self, node: int) -> Path:
        return self.root / f"node{node}" / "env"

    def run(self, command: str, *args: str) -> tuple[int, str, str]:
        common = ("--hosts", "node[1-3]", "-F", str(self.cluster.ssh_config), "--timeout", "120")
        if command == "fix":
            common += ("--prefix", str(self.root / "{node}" / "env"), "--allow-insecure-url",
                       "--node-envtool", f"{sys.executable} -m envtool")  # fmt: skip
        else:
            common += ("--min-gpus", "0", "--format", "json")
        return self.project.run(command, *common, *args)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, python_channel: Path) -> Iterator[Lab]:
    require(sshnodes.available(), "OpenSSH sshd is not installed (apt-get install openssh-server)")
    require(torch_version() is not None, "torch is not installed (pip install torch==2.13.0)")
    root = tmp_path_factory.mktemp("fixlab")
    project = Project(root / "proj", python_channel, root / "cache")
    project.root.mkdir()
    (project.root / "virtual-packages.yml").write_text(VIRTUAL_CUDA)
    project.write_env(OLD.format(channel=python_channel.as_uri()))
    assert project.run("lock", "--lockfile", "old.yml")[0] == 0
    project.write_env(LAB_ENV.format(channel=python_channel.as_uri()))
    assert project.run("lock")[0] == 0
    made = Lab(project, sshnodes.Cluster(root, [], root / "x"), root)
    for node, lock in ((1, "conda-lock.yml"), (2, "old.yml"), (3, "conda-lock.yml")):
        code, _, err = project.run("install", "--lockfile", lock, "--prefix",
                                   str(made.prefix(node)), "--allow-stale")  # fmt: skip
        assert code == 0, err
    add_dist_info(made.prefix(3), "torch", "2.3.0", sp=SP)
    envs = [{"CONDA_PREFIX": str(made.prefix(n))} for n in (1, 2, 3)]
    made.cluster = sshnodes.start_cluster(root / "ssh", envs)
    try:
        yield made
    finally:
        made.cluster.stop()


def _errors(out: str) -> dict[str, list[str]]:
    by_host: dict[str, list[str]] = {}
    for f in json.loads(out)["findings"]:
        if f["severity"] == "error":
            for h in f["hosts"]:
                by_host.setdefault(h, []).append(f["kind"])
    return by_host


def _stamps(out: str) -> dict[str, bool]:
    """Whether each host's install stamp names this lock."""
    doc = json.loads(out)
    return {h["host"]: h["stamp"] == doc["lock_sha256"] for h in doc["hosts"]}


def test_verify_fix_verify(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    # every verify of this lab's nights is recorded (a store named): its history is read last
    monkeypatch.setenv("ENVTOOL_HISTORY", str(lab.root / "history.sqlite"))
    code, out, err = lab.run("verify")
    assert code == 1 and set(_errors(out)) == {"node2", "node3"}, out + err
    assert _stamps(out) == {"node1": True, "node2": False, "node3": True}  # node2: old.yml
    code, out, err = lab.run("fix", "--format", "json")  # the plan: nothing changes
    assert code == 0, out + err
    plans = {n["host"]: n["plan"]["changes"] for n in json.loads(out)["nodes"]}
    assert plans["node1"] == []
    assert [(c["action"], c["name"], c["before"], c["after"]) for c in plans["node2"]] == [
        ("replace", "nccl", "nccl=2.16.5.1=h0800d71_0", "nccl=2.18.3.1=h12f7317_0")
    ]
    assert [(c["action"], c["manager"], c["before"]) for c in plans["node3"]] == [
        ("remove", "pip", "torch==2.3.0")
    ]
    assert not any(lab.prefix(n).is_symlink() for n in (1, 2, 3))

    # the nodes read a cache this controller fills (their own caches empty): what a cluster
    # whose nodes cannot reach the channel does; each node says where its packages came from
    shared, own = lab.root / "shared-cache", lab.root / "empty-own-cache"
    code, out, err = lab.run("fix", "--apply", "--yes", "--cache", str(shared),
                             "--cache-dir", str(own))  # fmt: skip
    assert code == 0, out + err
    assert "fixed: 2 of 2 nodes now match the lock" in out and "left alone: node1" in out
    said = " ".join(out.split())
    filled = re.search(rf"cache {shared}: (\d+) conda packages of the lock, filled", said)
    assert filled, out
    n = filled[1]
    assert said.count(f"installed: {n} conda packages: {n} from the cache {shared}") == 2, out
    assert not lab.prefix(1).is_symlink()  # the matching node untouched
    for n in (2, 3):
        assert os.readlink(lab.prefix(n)) == "env.envtool-gen-1"
    code, out, err = lab.run("verify")
    assert _errors(out) == {} and code == 0, out + err
    assert _stamps(out) == {"node1": True, "node2": True, "node3": True}

    code, out, err = lab.run("fix", "--rollback", "--yes")
    assert code == 0, out + err
    assert not any(lab.prefix(n).is_symlink() for n in (1, 2, 3))
    code, out, _ = lab.run("verify")
    assert set(_errors(out)) == {"node2", "node3"}  # as they were

    # the three verify runs as a history: node2's older nccl and node3's pip torch first
    # seen in run 1, cleared at run 2 (the fix), back in run 3 (the rollback)
    code, out, err = lab.project.run("history", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    at = [r["at"] for r in doc["runs"]]
    assert len(at) == 3, doc["runs"]
    lives = [f for f in doc["findings"] if f["severity"] == "error"]
    assert {f["host"] for f in lives} == {"node2", "node3"}, lives
    for f in lives:
        assert (f["first_seen"], f["cleared_at"], f["last_seen"], f["came_back"]) == (
            at[0], None, at[2], 1), f  # fmt: skip
    [nccl] = [f for f in lives if f["host"] == "node2" and f["subject"] == "nccl"]
    assert nccl["kind"] == "version-differs" and nccl["runs"] == 2


def test_a_cache_pushed_over_ssh_fixes_the_nodes_and_nothing_is_left(lab: Lab) -> None:
    """No filesystem shared: the cache filled here is sent to each node over ssh (a tar of
    the lock's packages, read to its exact size into a folder beside the prefix, removed
    after), and read there; the nodes' own caches are empty."""
    shared, own = lab.root / "controller-cache", lab.root / "empty-own-cache-2"
    code, out, err = lab.run("fix", "--apply", "--yes", "--cache", str(shared), "--push",
                             "--cache-dir", str(own))  # fmt: skip
    assert code == 0, out + err
    said = " ".join(out.split())
    assert "fixed: 2 of 2 nodes now match the lock" in said, out
    filled = re.search(rf"cache {shared}: (\d+) conda packages of the lock, filled", said)
    assert filled, out
    n = filled[1]
    assert said.count(f"installed: {n} conda packages: {n} from the cache pushed") == 2, out
    for node in (1, 2, 3):  # nothing of the push left beside any prefix
        assert not list((lab.root / f"node{node}").glob(".envtool-fix.*")), node
    code, out, err = lab.run("fix", "--rollback", "--yes")  # as it was, for the next test
    assert code == 0, out + err


def test_verify_says_which_lock_each_prefix_was_installed_from(lab: Lab) -> None:
    _, out, _ = lab.project.run(
        "verify", "--hosts", "node[1-3]", "-F", str(lab.cluster.ssh_config), "--min-gpus", "0",
        "--timeout", "120",
    )  # fmt: skip
    said = " ".join(out.split())
    assert "installed from: this lock on node[1,3]; another lock (" in said, out
    assert ") on node2" in said


def test_nodes_without_envtool_fix_with_micromamba_and_roll_back(lab: Lab) -> None:
    """The nodes have no envtool, but micromamba on their PATH (the test double,
    tests/fixtures/fake_micromamba.py: py-rattler installs the explicit list, each archive's
    MD5 checked, as the real one does). The node package's fixgen plans as envtool would,
    then makes the generation with micromamba, checks it and switches (a canary first, over
    real ssh); fix's own verify afterwards finds both nodes matching; --rollback, run the
    same way, puts each prefix back."""
    mm = make_fake_micromamba(lab.root / "mm-bin").parent
    path = f"{mm}:/usr/local/bin:/usr/bin:/bin"
    before = [dict(node.env) for node in lab.cluster.nodes]
    for node in lab.cluster.nodes:
        sshnodes.set_env(node, {**node.env, "PATH": path,
                                "CONDA_PKGS_DIRS": str(lab.root / "mm-pkgs")})  # fmt: skip
    absent = ("--node-envtool", str(lab.root / "no-envtool-here"))
    try:
        code, out, err = lab.run("fix", *absent, "--format", "json")
        assert code == 0, out + err
        plans = {n["host"]: n["plan"]["changes"] for n in json.loads(out)["nodes"]}
        assert plans["node1"] == []
        assert [(c["action"], c["name"], c["after"]) for c in plans["node2"]] == [
            ("replace", "nccl", "nccl=2.18.3.1=h12f7317_0")
        ]
        assert [(c["action"], c["manager"], c["before"]) for c in plans["node3"]] == [
            ("remove", "pip", "torch==2.3.0")
        ]
        code, out, err = lab.run("fix", *absent, "--apply", "--yes", "--canary", "1")
        assert code == 0, out + err
        said = " ".join(out.split())
        assert "fixed: 2 of 2 nodes now match the lock" in said, out
        assert said.count("installed by micromamba from the lock's URLs") == 2, out
        for n in (2, 3):  # a new generation (the earlier tests' are still beside it)
            assert re.fullmatch(r"env\.envtool-gen-[1-9]\d*", os.readlink(lab.prefix(n)))
        assert not lab.prefix(1).is_symlink()  # "now match": fix's own verify afterwards
        code, out, err = lab.run("fix", *absent, "--rollback", "--yes")
        assert code == 0, out + err
        assert not any(lab.prefix(n).is_symlink() for n in (1, 2, 3))
        for node in (1, 2, 3):  # nothing of the payload left beside any prefix
            assert not list((lab.root / f"node{node}").glob(".envtool-fix.*")), node
    finally:
        for node, env in zip(lab.cluster.nodes, before, strict=True):
            sshnodes.set_env(node, env)
