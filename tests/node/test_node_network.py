"""The node's network part: NCCL's interface syntax and default order, gloo's, and the
interfaces as /sys/class/net shows them (this machine's real tree, and a folder that stands
for a node whose speed file cannot be read)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import require

from envtool_node import network

NAMES = ["lo", "eth0", "eth1", "docker0", "ib0", "enp1s0"]


def _up(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "up": True, "addresses": ["10.0.0.1/24"]} for n in names]


@pytest.mark.parametrize(
    ("value", "selected"),
    [
        ("eth", ["eth0", "eth1"]),  # prefixes
        ("eth,ib", ["eth0", "eth1", "ib0"]),
        ("^docker,lo", ["eth0", "eth1", "ib0", "enp1s0"]),  # everything but
        ("=eth0", ["eth0"]),  # whole names only
        ("=eth", []),  # no interface is called eth
        ("^=eth0", ["lo", "eth1", "docker0", "ib0", "enp1s0"]),  # all but that name
        ("=eth0,enp1s0", ["eth0", "enp1s0"]),
        ("eth0:5555", ["eth0"]),  # NCCL's own :port after an entry
        ("eth9", []),
    ],
)
def test_nccl_syntax(value: str, selected: list[str]) -> None:
    assert network.nccl_match(value, NAMES) == selected
    doc = network.nccl_selection(value, _up(*NAMES))
    assert (doc["selected"], doc["how"], doc["value"]) == (selected, "variable", value)


@pytest.mark.parametrize(
    ("names", "selected"),
    [
        (["lo", "eth0", "docker0", "ib0"], ["ib0"]),  # IB first
        (["lo", "eth0", "docker0"], ["eth0"]),  # then anything but docker and lo
        (["lo", "docker0"], ["docker0"]),  # then docker
        (["lo"], ["lo"]),  # lo as the last resort
        ([], []),
    ],
)
def test_nccl_default_order(names: list[str], selected: list[str]) -> None:
    doc = network.nccl_selection(None, _up(*names))
    assert (doc["selected"], doc["how"]) == (selected, "default")


def test_nccl_ignores_a_value_of_one_character_and_interfaces_down_or_without_address() -> None:
    found = [*_up("lo"), {"name": "eth0", "up": False, "addresses": ["10.0.0.2/24"]},
             {"name": "eth1", "up": True, "addresses": []}, *_up("eth2")]  # fmt: skip
    assert network.nccl_selection("^", found)["how"] == "default"
    assert network.nccl_selection("eth", found)["selected"] == ["eth2"]


def test_gloo_whole_names_and_the_ones_missing() -> None:
    doc = network.gloo_selection("eth0,eth9", _up("lo", "eth0", "eth01"))
    assert (doc["selected"], doc["unmatched"], doc["how"]) == (["eth0"], ["eth9"], "variable")


def test_gloo_unset_uses_the_hostnames_address() -> None:
    """torch resolves this machine's hostname and binds where that address lives (lo when
    it lives nowhere): whatever it resolves to here, the answer is the interface holding it."""
    found = network.interfaces()
    doc = network.gloo_selection(None, found)
    assert doc["how"] == "hostname" and doc["value"] is None
    addresses = {i[4][0] for i in socket.getaddrinfo(socket.gethostname(), None)}
    holders = {n for a in addresses for n in network._holding(a, found)}
    assert doc["selected"] == [] or set(doc["selected"]) <= holders | {"lo"}


def test_this_machines_interfaces_from_sysfs() -> None:
    found = {i["name"]: i for i in network.interfaces()}
    lo = found["lo"]
    assert lo["loopback"] and lo["up"] and "127.0.0.1/8" in lo["addresses"]
    assert lo["mtu"] == int(Path("/sys/class/net/lo/mtu").read_text())
    assert lo["speed_mbps"] is None  # lo has no speed: reading it fails (EINVAL)


def _fake_net(root: Path, name: str, files: dict[str, str]) -> None:
    here = root / "class" / "net" / name
    here.mkdir(parents=True)
    for key, value in files.items():
        (here / key).write_text(value + "\n")


def test_a_node_tree_read_defensively(tmp_path: Path) -> None:
    """A tree standing for a node: an interface up with a speed, one down, one whose speed
    file cannot be read (here a folder: the read fails like EINVAL does), a stray file."""
    _fake_net(tmp_path, "ens1", {"flags": "0x1003", "operstate": "up", "mtu": "9000",
                                 "speed": "100000", "ifindex": "3", "type": "1"})  # fmt: skip
    _fake_net(tmp_path, "ens2", {"flags": "0x1002", "operstate": "down", "mtu": "1500",
                                 "speed": "-1", "ifindex": "2", "type": "1"})  # fmt: skip
    _fake_net(tmp_path, "veth7", {"flags": "0x1003", "operstate": "up", "mtu": "x" * 9000,
                                  "ifindex": "4"})  # fmt: skip
    (tmp_path / "class" / "net" / "veth7" / "speed").mkdir()
    (tmp_path / "class" / "net" / "bonding_masters").write_text("bond0\n")
    found = network.interfaces(str(tmp_path), str(tmp_path / "proc"))
    assert [(i["name"], i["up"], i["mtu"], i["speed_mbps"]) for i in found] == [
        ("ens2", False, 1500, None), ("ens1", True, 9000, 100000), ("veth7", True, None, None),
    ]  # fmt: skip
    doc = network.collect({"NCCL_SOCKET_IFNAME": "ens"}, str(tmp_path), str(tmp_path / "proc"))
    assert doc["schema"] == "envtool.network/1"
    assert doc["nccl"]["selected"] == []  # no interface of that tree has an address here
    assert doc["ib"] == {"present": False, "ports": [], "hca_variable": None,
                         "hca_missing": [], "peermem": None}  # fmt: skip


SECONDARY = """
mount -t sysfs sysfs /sys && ip link set lo up &&
ip link add v0 type veth peer name v1 && ip link set v0 up && ip link set v1 up &&
ip addr add 10.1.0.1/24 dev v0 && ip addr add 10.1.0.2/24 dev v0 &&
ip addr add 10.2.0.1/16 dev v0 label v0:7 &&
exec "$0" -c 'import json, sys; sys.path.insert(0, sys.argv[1]); from envtool_node import network
found = network.interfaces()
print(json.dumps([found, network._holding("10.2.0.5", found)]))' "$1"
"""


def test_secondary_and_labelled_addresses_are_read_as_nccl_lists_them() -> None:
    """A network namespace of its own whose v0 has a primary address, a secondary one in the
    same subnet and a labelled one (v0:7) in another (`ip addr add ... label`): getifaddrs
    lists all three, as NCCL's interface walk sees them, under v0; the labelled subnet is
    v0's when gloo looks for the interface holding its hostname's address (SIOCGIFADDR gave
    the primary only: 10.2.0.5 was held by no interface)."""
    require(shutil.which("unshare") is not None and os.geteuid() == 0 and shutil.which("ip")
            is not None, "needs root, unshare and iproute2")  # fmt: skip
    probes = str(Path(network.__file__).resolve().parents[1])
    out = subprocess.run(
        ["unshare", "--net", "--mount", "sh", "-c", SECONDARY, sys.executable, probes],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    found, holders = json.loads(out.stdout)
    v0 = next(i for i in found if i["name"] == "v0")
    ipv4 = [a for a in v0["addresses"] if ":" not in a]
    assert sorted(ipv4) == ["10.1.0.1/24", "10.1.0.2/24", "10.2.0.1/16"]
    assert not any(i["name"].startswith("v0:") for i in found)
    assert holders == ["v0"]
