"""judge/network.py: interface variables against each node's interfaces, the selected
interface's MTU and speed across nodes, InfiniBand ports, rates, NCCL_IB_HCA and peermem; one
cause, one finding through the verdict."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from fixtures import ib_tree

from envtool.judge import network
from envtool.judge.cluster_policy import ClusterPolicy
from envtool.judge.findings import Finding, Kind, Severity, exit_code
from envtool.judge.gpu import GpuPolicy
from envtool.judge.verdict import Policy, decide
from envtool.protocol.net_types import IbPort, IfSelection, Infiniband, Interface, Network
from envtool.protocol.types import AllReduceResult, HostReport, NodeFacts

LO = Interface("lo", True, True, ("127.0.0.1/8",), 65536)
ETH0 = Interface("eth0", True, False, ("10.0.0.1/24",), 1500, 10000)
DEFAULT = IfSelection("NCCL_SOCKET_IFNAME", None, ("eth0",), "default")
GLOO = IfSelection("GLOO_SOCKET_IFNAME", None, ("eth0",), "hostname")
HDR = IbPort("mlx5_0", 1, "ACTIVE", "LinkUp", 200.0, "200 Gb/sec (4X HDR)", "InfiniBand")


def net(*interfaces: Interface, nccl: IfSelection = DEFAULT, gloo: IfSelection = GLOO,
        ib: Infiniband | None = None) -> Network:  # fmt: skip
    return Network(interfaces or (LO, ETH0), nccl, gloo, ib or Infiniband(False))


def hosts(**nets: Network) -> list[HostReport]:
    return [HostReport(h, network=n) for h, n in nets.items()]


def kinds(found: list[Finding]) -> list[tuple[Kind, str, tuple[str, ...]]]:
    return [(f.kind, f.subject, f.hosts) for f in found]


def test_healthy_nodes_say_nothing() -> None:
    ib = Infiniband(True, (HDR,), peermem=True)
    assert network.check(hosts(a=net(ib=ib), b=net(ib=ib), c=net(ib=ib))) == []


def test_a_variable_that_selects_nothing_folds_across_nodes() -> None:
    eth9 = IfSelection("NCCL_SOCKET_IFNAME", "eth9", (), "variable")
    found = decide(hosts(a=net(nccl=eth9), b=net(nccl=eth9), c=net(nccl=eth9)), None,
                   Policy(GpuPolicy(min_gpus=0)))  # fmt: skip
    [f] = found
    assert (f.kind, f.severity, f.subject, f.hosts) == (
        Kind.IFNAME_UNMATCHED,
        Severity.ERROR,
        "NCCL_SOCKET_IFNAME",
        ("a", "b", "c"),
    )
    assert (f.expected, f.actual) == ("NCCL_SOCKET_IFNAME=eth9", "lo, eth0")


def test_gloo_names_one_the_node_lacks() -> None:
    gloo = IfSelection("GLOO_SOCKET_IFNAME", "eth0,eth9", ("eth0",), "variable", ("eth9",))
    [f] = network.check(hosts(a=net(gloo=gloo)))
    assert (f.kind, f.subject, f.expected) == (
        Kind.IFNAME_UNMATCHED,
        "GLOO_SOCKET_IFNAME",
        "GLOO_SOCKET_IFNAME=eth9",
    )


def test_it_explains_that_nodes_failed_allreduce_and_its_env_difference() -> None:
    """node c alone sets eth9: its all-reduce failed and its variable differs from the
    others'; one finding says why."""
    eth9 = IfSelection("NCCL_SOCKET_IFNAME", "eth9", (), "variable")
    eth0 = IfSelection("NCCL_SOCKET_IFNAME", "eth0", ("eth0",), "variable")
    env = {"eth0": (("NCCL_SOCKET_IFNAME", "eth0"),), "eth9": (("NCCL_SOCKET_IFNAME", "eth9"),)}
    failed = AllReduceResult("nccl", 0, error="NCCL error: no socket interface found")
    reports = [
        HostReport(h, facts=NodeFacts(hostname=h, env=env[v]), network=net(nccl=sel),
                   allreduce=failed if v == "eth9" else None)
        for h, v, sel in (("a", "eth0", eth0), ("b", "eth0", eth0), ("c", "eth9", eth9))
    ]  # fmt: skip
    found = [f for f in decide(reports, None, Policy(GpuPolicy(min_gpus=0)))
             if f.severity is not Severity.INFO]  # no CUDA here: said as info  # fmt: skip
    assert kinds(found) == [(Kind.IFNAME_UNMATCHED, "NCCL_SOCKET_IFNAME", ("c",))]
    assert found[0].follows == 1  # the all-reduce failure (the env difference is the same cause)
    # the policy accepting the variable (info) must not hide the failed all-reduce it explained
    known = ClusterPolicy(accept=frozenset({Kind.IFNAME_UNMATCHED}))
    found = decide(reports, None, Policy(GpuPolicy(min_gpus=0), cluster=known))
    errors = [(f.kind, f.hosts) for f in found if f.severity is Severity.ERROR]
    assert errors == [(Kind.ALLREDUCE_FAILED, ("c",))]
    assert exit_code(found) == 1


def test_an_odd_mtu_and_speed_name_the_odd_node() -> None:
    odd = replace(ETH0, mtu=1400, speed_mbps=1000)
    found = network.check(hosts(a=net(), b=net(LO, odd), c=net()))
    assert [(f.kind, f.subject, f.expected, f.actual, f.hosts) for f in found] == [
        (Kind.MTU_DIFFERS, "MTU of eth0", "1500", "1400", ("b",)),
        (Kind.LINK_SPEED_DIFFERS, "speed of eth0", "10000 Mb/s", "1000 Mb/s", ("b",)),
    ]


def test_links_without_a_speed_and_loopback_only_nodes_are_left_out() -> None:
    virtual = replace(ETH0, speed_mbps=None)
    only_lo = IfSelection("NCCL_SOCKET_IFNAME", None, ("lo",), "default")
    lo_gloo = IfSelection("GLOO_SOCKET_IFNAME", None, ("lo",), "hostname")
    found = network.check(hosts(a=net(), b=net(LO, virtual), c=net(LO, nccl=only_lo, gloo=lo_gloo)))
    assert found == []


def test_ib_port_down_rate_differs_hca_missing_and_peermem() -> None:
    down = replace(HDR, port=2, state="DOWN", phys_state="Polling")
    slow = replace(HDR, rate_gbps=100.0, rate="100 Gb/sec (4X EDR)")
    good = Infiniband(True, (HDR,), peermem=True)
    gpus = NodeFacts(hostname="x", device_count=8)
    reports = [
        HostReport("a", facts=gpus, network=net(ib=Infiniband(True, (HDR, down), peermem=True))),
        HostReport("b", facts=gpus, network=net(ib=good)),
        HostReport("c", facts=gpus, network=net(ib=replace(good, ports=(slow,)))),
        HostReport("d", facts=gpus, network=net(ib=replace(
            good, hca_variable="mlx5_0,mlx5_4", hca_missing=("mlx5_4",), peermem=False))),
    ]  # fmt: skip
    found = network.check(reports)
    assert [(f.kind, f.subject, f.actual, f.hosts) for f in found] == [
        (Kind.IB_PORT_DOWN, "mlx5_0:2", "DOWN / Polling", ("a",)),
        (Kind.IB_HCA_MISSING, "NCCL_IB_HCA", "no mlx5_4 (has mlx5_0)", ("d",)),
        (Kind.PEERMEM_MISSING, "nvidia_peermem", "not loaded", ("d",)),
        (Kind.IB_RATE_DIFFERS, "mlx5_0:1", "100 Gb/s", ("c",)),
    ]
    assert found[2].severity is Severity.WARNING


def test_ports_nccl_ib_hca_leaves_out_are_not_judged() -> None:
    down = replace(HDR, device="mlx5_1", state="DOWN", phys_state="Disabled")
    for value in ("mlx5_0", "^mlx5_1", "=mlx5_0:1"):
        ib = Infiniband(True, (HDR, down), hca_variable=value, peermem=True)
        assert network.check(hosts(a=net(ib=ib))) == [], value
    ib = Infiniband(True, (HDR, down), hca_variable="mlx5", peermem=True)
    assert kinds(network.check(hosts(a=net(ib=ib)))) == [(Kind.IB_PORT_DOWN, "mlx5_1:1", ("a",))]


def test_no_ib_and_no_gpus_say_nothing_about_ib() -> None:
    no_gpu = Infiniband(True, (HDR,), peermem=False)
    assert network.check([HostReport("a", facts=NodeFacts(device_count=0),
                                     network=net(ib=no_gpu))]) == []  # fmt: skip
    assert network.check(hosts(a=net(ib=Infiniband(False)))) == []


ON_LO = IfSelection("GLOO_SOCKET_IFNAME", None, ("lo",), "hostname")


def _booted(reports: list[HostReport], boot: str, gpus: int = 0) -> list[HostReport]:
    return [replace(r, facts=NodeFacts(device_count=gpus, boot_id=boot)) for r in reports]


def test_gloo_on_loopback_is_named_where_the_others_do_not_share_it() -> None:
    """b's hostname resolves to 127.0.1.1 and GLOO_SOCKET_IFNAME is unset: gloo's own pick
    is lo, which a and c (other namespaces) cannot reach. An error without GPUs (gloo is the
    backend), a warning beside NCCL; nothing where the variable is set, or where every node
    shares one boot and one network namespace (one loopback: test nodes on 127.0.0.x)."""
    b = net(gloo=ON_LO)
    apart = hosts(a=replace(net(), netns=11), b=replace(b, netns=12), c=replace(net(), netns=13))
    [f] = network.check(_booted(apart, "boot-1"))
    assert (f.kind, f.severity, f.subject, f.hosts) == (
        Kind.GLOO_LOOPBACK,
        Severity.ERROR,
        "GLOO_SOCKET_IFNAME",
        ("b",),
    )
    [f] = network.check(_booted(apart, "boot-1", gpus=8))
    assert f.severity is Severity.WARNING
    shared = hosts(a=replace(net(), netns=7), b=replace(b, netns=7), c=replace(net(), netns=7))
    assert network.check(_booted(shared, "boot-1")) == []
    assert network.check(apart) == []  # no boot id (an older node): not known, not said
    assert network.check(_booted(apart[1:2], "boot-1")) == []  # one node: no peer to miss it
    set_lo = IfSelection("GLOO_SOCKET_IFNAME", "lo", ("lo",), "variable")
    assert network.check(_booted(hosts(a=net(), b=net(gloo=set_lo)), "x")) == []


# a port switched off, on the recorded trees (tests/fixtures/ib_tree.py): faults name what
# they changed from the recorded "4: ACTIVE" / "5: LinkUp"


def _ports(found: list[Finding]) -> list[tuple[str, Severity, str, str]]:
    return [(f.subject, f.severity, f.actual, f.cause) for f in found]


def _judged(ib: Infiniband) -> list[Finding]:
    return network.check(hosts(a=net(ib=ib)))


def test_a_phys_state_that_says_active_is_up(tmp_path: Path) -> None:
    """prometheus/procfs's recorded mlx5_0 (unchanged): "4: ACTIVE" in state and phys_state."""
    ib = ib_tree.read(ib_tree.tree(tmp_path, ib_tree.PROCFS))
    assert [(p.name, p.phys_state, p.up) for p in ib.ports] == [("mlx5_0:1", "ACTIVE", True)]
    assert _judged(ib) == []


def test_a_port_switched_off_beside_ports_that_carry_nccl_is_a_note(tmp_path: Path) -> None:
    """Changed: mlx4_0:2 switched off ("1: DOWN", "3: Disabled"); NCCL_IB_HCA unset, or a ^
    list that leaves out another port. NCCL uses i40iw0:1 and mlx4_0:1: info, exit code 0."""
    root = ib_tree.tree(tmp_path)
    ib_tree.switch_off(root, "mlx4_0:2")
    for env in ({}, {"NCCL_IB_HCA": "^i40iw0"}):
        found = _judged(ib_tree.read(root, env))
        assert _ports(found) == [("mlx4_0:2", Severity.INFO, "DOWN / Disabled",
                                  network.OFF_ASIDE)], env  # fmt: skip
        assert exit_code(found) == 0


@pytest.mark.parametrize("value", ["mlx4", "=mlx4_0", "mlx4_0:2", "i40iw0,mlx4_0:2"])
def test_a_port_switched_off_that_nccl_ib_hca_names_is_an_error(tmp_path: Path, value: str) -> None:
    """Changed: mlx4_0:2 switched off; NCCL_IB_HCA names it (a prefix, a whole name, a port)."""
    root = ib_tree.tree(tmp_path)
    ib_tree.switch_off(root, "mlx4_0:2")
    found = _judged(ib_tree.read(root, {"NCCL_IB_HCA": value}))
    assert _ports(found) == [("mlx4_0:2", Severity.ERROR, "DOWN / Disabled", network.OFF_NAMED)]


@pytest.mark.parametrize("value", ["i40iw0", "mlx4_0:1", "^=mlx4_0:2", "^mlx4"])
def test_a_port_switched_off_that_nccl_leaves_out_is_not_judged(tmp_path: Path, value: str) -> None:
    """Changed: mlx4_0:2 switched off; NCCL_IB_HCA selects other ports, or excludes it."""
    root = ib_tree.tree(tmp_path)
    ib_tree.switch_off(root, "mlx4_0:2")
    assert _judged(ib_tree.read(root, {"NCCL_IB_HCA": value})) == []


def test_the_nodes_only_ports_switched_off_are_errors(tmp_path: Path) -> None:
    """Changed: every recorded port switched off, NCCL_IB_HCA unset: no port is left for NCCL
    (it falls back to sockets); and a port down for want of a link (mlx4_0:1 "2: Polling")
    beside a port switched off leaves that one no rail either."""
    root = ib_tree.tree(tmp_path)
    ib_tree.switch_off(root, "i40iw0:1", "mlx4_0:1", "mlx4_0:2")
    assert _ports(_judged(ib_tree.read(root))) == [
        (p, Severity.ERROR, "DOWN / Disabled", network.OFF_ONLY)
        for p in ("i40iw0:1", "mlx4_0:1", "mlx4_0:2")
    ]
    ib_tree.write(root, "mlx4_0:1", phys_state="2: Polling")
    found = _judged(ib_tree.read(root, {"NCCL_IB_HCA": "^i40iw0"}))
    assert _ports(found) == [
        ("mlx4_0:1", Severity.ERROR, "DOWN / Polling", ""),
        ("mlx4_0:2", Severity.ERROR, "DOWN / Disabled", network.OFF_ONLY),
    ]


def test_a_roce_port_switched_off_is_judged_the_same(tmp_path: Path) -> None:
    """Changed: mlx4_0:1 and mlx4_0:2's link_layer from "InfiniBand" to "Ethernet" (RoCE) and
    mlx4_0:2 switched off (what RoCE drivers write for a netdev down or without carrier)."""
    root = ib_tree.tree(tmp_path)
    for port in ("mlx4_0:1", "mlx4_0:2"):
        ib_tree.write(root, port, link_layer="Ethernet")
    ib_tree.switch_off(root, "mlx4_0:2")
    assert _ports(_judged(ib_tree.read(root))) == [
        ("mlx4_0:2", Severity.INFO, "DOWN / Disabled", network.OFF_ASIDE)
    ]
    found = _judged(ib_tree.read(root, {"NCCL_IB_HCA": "=mlx4_0"}))
    assert _ports(found) == [("mlx4_0:2", Severity.ERROR, "DOWN / Disabled", network.OFF_NAMED)]


def test_a_port_down_for_want_of_a_link_stays_an_error_beside_ports_that_are_up(
    tmp_path: Path,
) -> None:
    """Changed: mlx4_0:2's state to "1: DOWN", phys_state to "2: Polling" (no cable, or the
    switch port down): NCCL skips it without a word, a rail lost; as before, an error."""
    root = ib_tree.tree(tmp_path)
    ib_tree.write(root, "mlx4_0:2", state="1: DOWN", phys_state="2: Polling")
    found = _judged(ib_tree.read(root))
    assert _ports(found) == [("mlx4_0:2", Severity.ERROR, "DOWN / Polling", "")]
