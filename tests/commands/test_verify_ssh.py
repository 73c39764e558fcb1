"""``envtool verify`` over real OpenSSH sshd nodes on loopback, each with its own prefix."""

from __future__ import annotations

import json
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import VIRTUAL_CUDA, Project, require, run_main
from fixtures import sshnodes
from fixtures.channel import build_channel, realistic_packages
from fixtures.prefixes import add_dist_info
from fixtures.runtime import (
    DRIFTED_BUILD,
    LAB_ENV,
    SP,
    TORCH_BUILD,
    TORCH_SPEC,
    other_torch,
    runtime_packages,
    torch_version,
)

from envtool.cli import main

GOOD_ENV = LAB_ENV
DRIFTED_ENV = GOOD_ENV.replace(TORCH_SPEC, DRIFTED_BUILD).replace("nccl=2.18.3.1", "nccl=2.16.5.1")
OTHER_TORCH = "1.13.1"  # on node5's PYTHONPATH


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Project, sshnodes.Cluster]]:
    """node1, node2: the lock; node3: drifted (older pytorch build, older nccl, pip torch);
    node4 hung; node5: node1's prefix with another torch on PYTHONPATH (records clean)."""
    require(sshnodes.available(), "OpenSSH sshd is not installed (apt-get install openssh-server)")
    require(torch_version() is not None, "torch is not installed (pip install torch==2.13.0)")
    root = tmp_path_factory.mktemp("lab")
    channel = build_channel(root / "channel", realistic_packages() + runtime_packages())
    proj = Project(root / "proj", channel, root / "cache")
    proj.root.mkdir()
    (proj.root / "virtual-packages.yml").write_text(VIRTUAL_CUDA)
    prefixes = []
    for i, text in enumerate([GOOD_ENV, GOOD_ENV, DRIFTED_ENV, GOOD_ENV], start=1):
        proj.write_env(text.format(channel=channel.as_uri()))
        code, _, err = proj.run("lock", "--lockfile", f"node{i}.lock.yml")
        assert code == 0, err
        prefix = root / f"prefix{i}"
        code, _, err = proj.run(
            "install",
            "--allow-insecure-url",
            "--lockfile",
            f"node{i}.lock.yml",
            "--prefix",
            str(prefix),
        )
        assert code == 0, err
        prefixes.append(prefix)
    add_dist_info(prefixes[2], "torch", "2.3.0", sp=SP)  # what pip install torch leaves
    proj.write_env(GOOD_ENV.format(channel=channel.as_uri()))
    assert proj.run("lock")[0] == 0
    envs = [{"CONDA_PREFIX": str(p)} for p in prefixes]
    envs.append(
        {"CONDA_PREFIX": str(prefixes[0]), "PYTHONPATH": str(other_torch(root / "o", OTHER_TORCH))}
    )
    cluster = sshnodes.start_cluster(root / "ssh", envs)
    try:
        yield proj, cluster
    finally:
        cluster.stop()


def _verify(
    proj: Project, cluster: sshnodes.Cluster, hosts: str, *extra: str
) -> tuple[int, str, str, float]:
    start = time.monotonic()
    code, out, err = run_main(
        main,
        proj.root,
        [],
        (
            "verify",
            "--hosts",
            hosts,
            "-F",
            str(cluster.ssh_config),
            "--timeout",
            "20",
            "--connect-timeout",
            "3",
            "--min-gpus",
            "0",
            *extra,
        ),
    )
    return code, out, err, time.monotonic() - start


def test_two_good_nodes_are_clean(lab: tuple[Project, sshnodes.Cluster]) -> None:
    proj, cluster = lab
    code, out, err, _ = _verify(proj, cluster, "node[1-2]", "--format", "json")
    assert code == 0, out + err
    doc = json.loads(out)
    assert doc["ok"] is True and [h["host"] for h in doc["hosts"]] == ["node1", "node2"]
    locked = (proj.root / "conda-lock.yml").read_text().count("manager: conda")
    assert all(h["ok"] and h["packages"] == locked for h in doc["hosts"])
    assert all(f["severity"] != "error" for f in doc["findings"])


def test_drifted_node_is_named_with_each_difference(lab: tuple[Project, sshnodes.Cluster]) -> None:
    proj, cluster = lab
    code, out, _, _ = _verify(proj, cluster, "node[1-3]", "--format", "json")
    assert code == 1
    findings = json.loads(out)["findings"]
    by_kind = {(f["kind"], f["subject"]): f for f in findings}
    assert by_kind[("build-differs", "pytorch")]["hosts"] == ["node3"]
    assert f"{TORCH_BUILD}_" in by_kind[("build-differs", "pytorch")]["actual"]
    assert by_kind[("version-differs", "nccl")]["hosts"] == ["node3"]
    assert by_kind[("pip-shadowing", "torch")]["hosts"] == ["node3"]


def test_a_drifted_runtime_on_one_of_three_nodes_is_named(
    lab: tuple[Project, sshnodes.Cluster],
) -> None:
    """node5's records are node1's (the lock), but another torch sits on its PYTHONPATH:
    named with that torch's version, its folder and the variable; node1 and node2 clean."""
    proj, cluster = lab
    code, out, _, _ = _verify(proj, cluster, "node[1-2,5]", "--format", "json")
    assert code == 1
    doc = json.loads(out)
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    assert [(f["kind"], f["subject"], f["hosts"]) for f in errors] == [
        ("loaded-outside-prefix", "torch", ["node5"])
    ]
    (f,) = errors
    assert f"torch {OTHER_TORCH}" in f["actual"] and "PYTHONPATH" in f["actual"]
    assert f["hint"].startswith("unset PYTHONPATH")
    runtime = {h["host"]: h["facts"]["runtime"] for h in doc["hosts"]}
    assert runtime["node5"]["torch_file"].startswith(str(proj.root.parent / "o"))
    for i in (1, 2):  # each good node's torch is its own prefix's
        assert runtime[f"node{i}"]["torch_file"].startswith(str(proj.root.parent / f"prefix{i}"))


def test_unreachable_and_hung_nodes_do_not_hold_the_others(
    lab: tuple[Project, sshnodes.Cluster], tmp_path: Path
) -> None:
    proj, cluster = lab
    hung = cluster.nodes[3]
    hung.pause()
    try:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text("node1\nnode2\nnode4\nroot@127.0.0.1:1\n")
        code, out, _, seconds = _verify(
            proj, cluster, str(hosts), "--format", "junit", "--timeout", "6"
        )
    finally:
        hung.stop()
    assert code == 1
    assert seconds < 6 + 3 + 5 + 5
    suite = ET.fromstring(out).find("testsuite")
    assert suite is not None
    failing = {
        (c.get("classname"), c.get("name"))
        for c in suite.iter("testcase")
        if c.find("failure") is not None
    }
    # a host given with its port is named with it (two sshd on one machine are two nodes)
    assert ("node4", "reachable") in failing and ("root@127.0.0.1:1", "reachable") in failing
    assert not any(host in ("node1", "node2") for host, _ in failing)


def test_hostile_names_start_no_process(
    lab: tuple[Project, sshnodes.Cluster], tmp_path: Path
) -> None:
    proj, cluster = lab
    marker = tmp_path / "pwned"
    hosts = tmp_path / "hosts.txt"
    hosts.write_text(f"node1\n-oProxyCommand=touch {marker}\n")
    code, _, err, seconds = _verify(proj, cluster, str(hosts))
    assert code == 2 and f"{hosts}:2: bad host name" in err
    assert not marker.exists() and seconds < 2


def test_cluster_allreduce_across_nodes_with_gloo(lab: tuple[Project, sshnodes.Cluster]) -> None:
    require(__import__("importlib").util.find_spec("torch") is not None, "torch is not installed")
    proj, cluster = lab
    port = sshnodes.free_port("127.0.0.2")
    code, out, err, _ = _verify(
        proj,
        cluster,
        "node[1-2]",
        "--format",
        "json",
        "--allreduce",
        "cluster",
        "--allreduce-args",
        "-b 1K -e 16K -f 4 -n 2 -w 1 --nproc 1 --backend gloo",
        "--rdzv-endpoint",
        f"127.0.0.2:{port}",
        "--timeout",
        "90",
    )
    assert code == 0, out + err
    hosts = json.loads(out)["hosts"]
    ran = [h["allreduce"] for h in hosts if h["allreduce"] and h["allreduce"]["nranks"]]
    results = [a for a in ran if not a["member"]]
    assert len(results) == 1  # rank 0's node carries the cross-node result
    assert results[0]["nranks"] == 2 and results[0]["wrong_total"] == 0
    assert results[0]["peak_busbw"] > 0


def test_cluster_allreduce_blocked_rendezvous_is_a_finding(
    lab: tuple[Project, sshnodes.Cluster],
) -> None:
    require(__import__("importlib").util.find_spec("torch") is not None, "torch is not installed")
    proj, cluster = lab
    taken = cluster.nodes[0]  # the rendezvous port is held by another service (node1's sshd)
    code, out, _, seconds = _verify(
        proj,
        cluster,
        "node[1-2]",
        "--format",
        "json",
        "--allreduce",
        "cluster",
        "--allreduce-args",
        "-b 8 -e 8 -n 1 -w 1 --nproc 1 --backend gloo",
        "--rdzv-endpoint",
        f"{taken.address}:{taken.port}",
        "--timeout",
        "20",
    )
    assert code == 1
    findings = json.loads(out)["findings"]
    # the port is named with its holder on the node that hosts the store, not the nodes blamed
    named = [f for f in findings if f["kind"] == "rendezvous-port-taken"]
    assert len(named) == 1 and named[0]["hosts"] == ["node1"], out
    assert f"port {taken.port} free" in named[0]["expected"], out
    assert "(uid " in named[0]["actual"] and "(sshd)" in named[0]["actual"], out
    assert not [f for f in findings if f["kind"] == "allreduce-failed"], out
    assert named[0]["follows"] >= 1  # node2's failure follows from it
    assert seconds < 20 + 3 + 5 + 5


def test_a_store_another_process_holds_is_not_joined(
    lab: tuple[Project, sshnodes.Cluster],
) -> None:
    """A TCPStore already listening on the rendezvous port (another job's, or planted): torch's
    c10d backend, left to guess, quietly becomes its client and the run passes through a store
    envtool does not own. Told to host the store, node1 checks the port and names its holder."""
    require(__import__("importlib").util.find_spec("torch") is not None, "torch is not installed")
    import subprocess

    proj, cluster = lab
    port = sshnodes.free_port("127.0.0.2")
    squatter = subprocess.Popen(
        [sys.executable, "-c",
         "import time; from torch.distributed import TCPStore; "
         f"s = TCPStore('127.0.0.2', {port}, is_master=True, wait_for_workers=False); "
         "print('up', flush=True); time.sleep(300)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert squatter.stdout is not None and squatter.stdout.readline().strip() == "up"
        code, out, err, _ = _verify(
            proj, cluster, "node[1-2]", "--format", "json", "--allreduce", "cluster",
            "--allreduce-args", "-b 8 -e 8 -n 1 -w 1 --nproc 1 --backend gloo",
            "--rdzv-endpoint", f"127.0.0.2:{port}", "--timeout", "25",
        )  # fmt: skip
    finally:
        squatter.kill()
        squatter.wait()
    assert code == 1, out + err
    findings = json.loads(out)["findings"]
    taken = [f for f in findings if f["kind"] == "rendezvous-port-taken"]
    assert len(taken) == 1 and taken[0]["hosts"] == ["node1"], out
    assert f"port {port}" in taken[0]["expected"], out
    assert f"pid {squatter.pid} (python" in taken[0]["actual"], out
    errors = [f["kind"] for f in findings if f["severity"] == "error"]
    assert errors == ["rendezvous-port-taken"], out  # node2's wait follows from it


def test_ctrl_c_exits_130_and_leaves_no_ssh_behind(
    lab: tuple[Project, sshnodes.Cluster], tmp_path: Path
) -> None:
    import signal
    import subprocess

    proj, cluster = lab
    hung = cluster.nodes[2]  # node3: paused, so verify is still waiting on it
    hung.pause()
    try:
        run = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "envtool"),
                "verify",
                "--hosts",
                "node1,node3",
                "-F",
                str(cluster.ssh_config),
                "--timeout",
                "60",
                "--connect-timeout",
                "30",
                "--min-gpus",
                "0",
            ],
            cwd=proj.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        time.sleep(3)
        start = time.monotonic()
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=30)
        elapsed = time.monotonic() - start
    finally:
        os_kill = __import__("os").kill
        os_kill(hung.pid, signal.SIGCONT)
    assert run.returncode == 130, err
    assert elapsed < 10 and b"interrupted" in err and b"Traceback" not in err
    time.sleep(0.5)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert str(cluster.ssh_config) not in ps  # no ssh client of this run is left


def test_unfinished_install_on_a_node_is_a_probe_failed_finding(
    lab: tuple[Project, sshnodes.Cluster],
) -> None:
    from envtool.lock.prefixes import INCOMPLETE_MARKER

    proj, cluster = lab
    prefix = Path(cluster.nodes[1].env["CONDA_PREFIX"])
    marker = prefix / INCOMPLETE_MARKER
    marker.write_text("envtool install did not finish; re-run envtool install\n")
    try:
        code, out, _, _ = _verify(proj, cluster, "node[1-2]", "--format", "json")
    finally:
        marker.unlink()
    assert code == 1
    failed = [f for f in json.loads(out)["findings"] if f["kind"] == "probe-failed"]
    assert [f["hosts"] for f in failed] == [["node2"]], failed
    assert f"the install into {prefix} did not finish" in failed[0]["actual"]
    assert "re-run envtool install" in failed[0]["actual"]
