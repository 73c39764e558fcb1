"""The rendezvous from every node (issue 28 item 3) on three sshd nodes that each have their
own network namespace, hostname and /etc/hosts (tests/fixtures/netns.py): healthy nodes are
clean and the store's node hears every node; a node whose /etc/hosts maps its own name to
127.0.1.1 (Debian's habit) is named; a rendezvous port dropped by iptables inside one node's
namespace names that node, the store's node and the port, and explains the cross-node
all-reduce that fails on it (one cause, one finding); a node whose start lagged past the
window is said not checked, not unreachable."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import RuntimeLab as Rig
from conftest import require, runtime_lab
from fixtures import sshnodes

from envtool.cluster import survey
from envtool.cluster.options import FanoutOptions
from envtool.commands import verify

# own namespaces; judged by timing: no CPU-heavy module beside it (fixtures/cpu.py)
pytestmark = pytest.mark.usefixtures("default_rendezvous_port", "cpu_shared")
PORT = 29400  # the default endpoint: the first host, torchrun's port
ARGS = "-b 64K -e 64K -f 2 -n 1 -w 1 --backend gloo"


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, python_channel: Path) -> Iterator[Rig]:
    """One lab for the module: three nodes whose sessions find a prefix with this torch."""
    require(subprocess.run(["iptables", "-V"], capture_output=True).returncode == 0,
            "needs iptables")  # fmt: skip
    with runtime_lab(tmp_path_factory.mktemp("rdzv"), python_channel) as rig:
        yield rig


def _verify(rig: Rig, *extra: str) -> tuple[int, list[dict[str, object]]]:
    code, out, err = rig.project.run(
        "verify", "--hosts", "node[1-3]", "-F", str(rig.lab.cluster.ssh_config),
        "--min-gpus", "0", "--format", "json", *extra,
    )  # fmt: skip
    assert out, err
    findings = json.loads(out)["findings"]
    assert isinstance(findings, list)
    return code, findings


def _rendezvous(findings: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return [(f["kind"], f["subject"], f["hosts"]) for f in findings
            if str(f["kind"]).startswith("rendezvous-")]  # fmt: skip


def test_healthy_nodes_are_clean_and_the_store_hears_every_node(rig: Rig) -> None:
    args = verify.VerifyArgs(
        "node[1-3]", rig.project.lock,
        FanoutOptions(ssh_config=rig.lab.cluster.ssh_config, timeout=60),
    )  # fmt: skip
    plan = verify.plan(args)
    reports = survey.survey(plan.hosts, plan.fan)
    checks = {r.host: r.rendezvous for r in reports}
    store = checks["node1"]
    assert store is not None and store.is_host and store.listen is not None
    assert store.listen.ok and sorted(store.listen.peers) == ["node1", "node2", "node3"]
    for host, c in checks.items():
        assert c is not None and c.addresses == (rig.lab.address(1),), host
        assert c.reach is not None and c.reach.ok, host
        assert (c.host, c.port, c.is_host) == ("node1", PORT, host == "node1")
    code, findings = _verify(rig)
    assert _rendezvous(findings) == [] and code == 0, findings


def test_a_name_on_127_0_1_1_is_named_on_that_node(rig: Rig) -> None:
    hosts = rig.root / "hosts1"
    before = hosts.read_text()
    try:  # in place (the same inode, bind-mounted): node1 alone now sees its name on loopback
        hosts.write_text(before.replace(f"{rig.lab.address(1)} node1", "127.0.1.1 node1"))
        code, findings = _verify(rig)
    finally:
        hosts.write_text(before)
    assert code == 1
    assert _rendezvous(findings) == [("rendezvous-loopback", "node1", ["node1"])], findings
    (loop,) = [f for f in findings if f["kind"] == "rendezvous-loopback"]
    assert loop["actual"] == "127.0.1.1"


def _drop(rig: Rig, op: str) -> None:
    """node3's own firewall drops what it sends to node1's rendezvous port."""
    subprocess.run(
        ["ip", "netns", "exec", rig.lab.ns(3), "iptables", op, "OUTPUT", "-p", "tcp",
         "-d", rig.lab.address(1), "--dport", str(PORT), "-j", "DROP"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip


def test_a_blocked_port_names_the_pair_and_explains_the_failed_all_reduce(rig: Rig) -> None:
    _drop(rig, "-A")
    try:
        code, alone = _verify(rig)
        code_ar, findings = _verify(rig, "--allreduce", "cluster", "--allreduce-args", ARGS,
                                    "--timeout", "40")  # fmt: skip
    finally:
        _drop(rig, "-D")
    expected = [("rendezvous-unreachable", f"node1:{PORT}", ["node3"])]
    assert code == 1 and _rendezvous(alone) == expected, alone
    (blocked,) = [f for f in alone if f["kind"] == "rendezvous-unreachable"]
    assert str(blocked["actual"]).startswith("timed out after")
    assert rig.lab.address(1) in str(blocked["actual"])
    # across nodes the all-reduce fails on it, and is not a second finding
    errors = [(f["kind"], f["subject"], f["hosts"]) for f in findings if f["severity"] == "error"]
    assert code_ar == 1 and errors == expected, findings
    (cause,) = [f for f in findings if f["kind"] == "rendezvous-unreachable"]
    assert isinstance(cause["follows"], int) and cause["follows"] >= 1


def test_a_node_that_started_past_the_window_is_not_checked_not_unreachable(
    rig: Rig, tmp_path: Path
) -> None:
    """node3's python takes 14 s to start (a sitecustomize that sleeps, as site-packages on a
    cold network filesystem would): node1 stopped listening after its 10 s window, node3's
    connects were refused because nobody listened any more. That is no blocked port: it is
    rendezvous-late, a warning that the port was not checked from node3 (it was
    rendezvous-unreachable, an error, before the nodes sent their spans)."""
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(
        "import os, time\n"
        "if not os.environ.get('ENVTOOL_TEST_SLOWED'):  # once: not its subprocesses\n"
        "    os.environ['ENVTOOL_TEST_SLOWED'] = '1'\n"
        "    time.sleep(14)\n"
    )
    node3 = rig.lab.cluster.nodes[2]
    before = dict(node3.env)
    sshnodes.set_env(node3, {**before, "PYTHONPATH": str(slow)})
    try:
        code, findings = _verify(rig, "--timeout", "60")
    finally:
        sshnodes.set_env(node3, before)
    assert code == 0  # a warning: the port was not checked from node3, nothing found broken
    assert _rendezvous(findings) == [("rendezvous-late", f"node1:{PORT}", ["node3"])], findings
    (late,) = [f for f in findings if f["kind"] == "rendezvous-late"]
    assert late["severity"] == "warning" and "after the port closed" in str(late["actual"])


def test_gloo_on_a_hostname_that_resolves_to_loopback_is_named_on_that_node(rig: Rig) -> None:
    """node2's /etc/hosts gives its own name 127.0.1.1 (Debian's habit) and its sessions have
    no GLOO_SOCKET_IFNAME: gloo's own pick there is lo, which node1 and node3 (namespaces of
    their own) cannot reach. Named on node2 alone; the others, whose hostnames resolve to
    their eth0, are clean."""
    hosts = rig.root / "hosts2"
    before, node2 = hosts.read_text(), rig.lab.cluster.nodes[1]
    env = dict(node2.env)
    try:  # in place (the same inode, bind-mounted)
        hosts.write_text(before.replace(f"{rig.lab.address(2)} node2", "127.0.1.1 node2"))
        sshnodes.set_env(node2, {k: v for k, v in env.items() if k != "GLOO_SOCKET_IFNAME"})
        _code, findings = _verify(rig)
    finally:
        hosts.write_text(before)
        sshnodes.set_env(node2, env)
    gloo = [(f["kind"], f["subject"], f["hosts"]) for f in findings if f["kind"] == "gloo-loopback"]
    assert gloo == [("gloo-loopback", "GLOO_SOCKET_IFNAME", ["node2"])], findings


# --- issue 33 item 3: no node, and no other user, speaks for anyone else ------------------
_FORGER = """\
import socket, sys, time
addr, port, end = sys.argv[1], int(sys.argv[2]), time.monotonic() + 14
lines = [b"envtool-rdzv node2\\n", b"envtool-rdzv node3\\n"]
lines.append(b"envtool-rdzv " + b"0" * 32 + b" node2\\n")
while time.monotonic() < end:
    for line in lines:
        try:
            with socket.create_connection((addr, port), timeout=0.5) as s:
                s.sendall(line)
        except OSError:
            time.sleep(0.01)
"""


def test_forged_greetings_on_the_store_node_are_strangers_not_nodes(rig: Rig) -> None:
    """Another user on node1 greets node1's listener as node2 and node3, first and often (the
    old greeting, and one with a made-up token). Before the run's token the listener closed
    on those names and the real node2 and node3 found the port shut: two false
    rendezvous-unreachable errors. Now they are counted and said, and the nodes are heard."""
    forger = subprocess.Popen(
        ["ip", "netns", "exec", rig.lab.ns(1), "runuser", "-u", "nobody", "--",
         "/usr/bin/python3", "-c", _FORGER, rig.lab.address(1), str(PORT)],
        cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        code, findings = _verify(rig)
    finally:
        forger.kill()
        forger.wait()
    assert code == 0, findings
    assert _rendezvous(findings) == [("rendezvous-strangers", f"node1:{PORT}", ["node1"])]
    (said,) = [f for f in findings if f["kind"] == "rendezvous-strangers"]
    assert said["severity"] == "warning" and "without this run's token" in str(said["actual"])


_LIAR_CLOCK = """\
import json, os
if not os.environ.get("ENVTOOL_TEST_CLOCK"):  # the node process only, not what it starts
    os.environ["ENVTOOL_TEST_CLOCK"] = "1"
    _dumps = json.dumps
    def dumps(obj, *args, **kwargs):
        if isinstance(obj, dict) and isinstance(obj.get("clock"), dict):
            obj = dict(obj, clock=dict(obj["clock"], time=obj["clock"]["time"] + 100))
        return _dumps(obj, *args, **kwargs)
    json.dumps = dumps
"""


def test_the_store_node_s_clock_entry_cannot_excuse_a_blocked_port(
    rig: Rig, tmp_path: Path
) -> None:
    """node1 (the store's node) adds 100 s to its clock entry, its listener span as it was;
    node3's firewall drops the port. node3 stays rendezvous-unreachable, an error: before,
    the shifted clock put node3's connects "after the port closed", a rendezvous-late
    warning, and verify passed."""
    liar = tmp_path / "liar"
    liar.mkdir()
    (liar / "sitecustomize.py").write_text(_LIAR_CLOCK)
    node1 = rig.lab.cluster.nodes[0]
    before = dict(node1.env)
    sshnodes.set_env(node1, {**before, "PYTHONPATH": str(liar)})
    _drop(rig, "-A")
    try:
        code, findings = _verify(rig)
    finally:
        _drop(rig, "-D")
        sshnodes.set_env(node1, before)
    assert code == 1, findings
    assert ("rendezvous-unreachable", f"node1:{PORT}", ["node3"]) in _rendezvous(findings)
    assert "rendezvous-late" not in [k for k, _, _ in _rendezvous(findings)]
    skew = [f for f in findings if f["kind"] == "clock-skew"]
    assert [f["hosts"] for f in skew] == [["node1"]]  # the liar's clock is its own finding
