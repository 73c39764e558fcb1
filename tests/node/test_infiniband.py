"""The InfiniBand reader on a real recorded /sys/class/infiniband (prometheus/node_exporter's
fixture and prometheus/procfs's mlx5_0, tests/fixtures/data/SOURCES.md), and faults made from
it in a copy; NCCL_IB_HCA read with NCCL's syntax against the devices there."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO
from fixtures import ttar

from envtool_node import infiniband

ARCHIVE = REPO / "tests" / "fixtures" / "data" / "node_exporter-infiniband.ttar"
PROCFS = REPO / "tests" / "fixtures" / "data" / "procfs-infiniband-mlx5_0.ttar"


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    """The recorded tree unpacked: sys/class/infiniband/{i40iw0,mlx4_0}."""
    return ttar.extract(ARCHIVE, tmp_path) / "sys" / "class" / "infiniband"


def _read(root: Path, tmp_path: Path, **env: str) -> dict[str, object]:
    modules = tmp_path / "modules"
    modules.write_text("mlx4_ib 217088 0 - Live 0x0\n")
    return infiniband.read(str(root), env, str(tmp_path / "no-sys-module"), str(modules))


def test_the_recorded_ports_as_recorded(sysfs: Path, tmp_path: Path) -> None:
    doc = _read(sysfs, tmp_path)
    assert doc["present"] is True and doc["peermem"] is False
    assert doc["ports"] == [
        {"device": "i40iw0", "port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
         "rate_gbps": 10.0, "rate": "10 Gb/sec (4X)", "link_layer": "InfiniBand"},
        {"device": "mlx4_0", "port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
         "rate_gbps": 40.0, "rate": "40 Gb/sec (4X QDR)", "link_layer": "InfiniBand"},
        {"device": "mlx4_0", "port": 2, "state": "ACTIVE", "phys_state": "LinkUp",
         "rate_gbps": 40.0, "rate": "40 Gb/sec (4X QDR)", "link_layer": "InfiniBand"},
    ]  # fmt: skip
    assert doc["hca_variable"] is None and doc["hca_missing"] == []


def test_a_port_down_made_from_the_recorded_tree(sysfs: Path, tmp_path: Path) -> None:
    """Changed: mlx4_0/ports/2/state from "4: ACTIVE" to "1: DOWN" and its phys_state from
    "5: LinkUp" to "3: Disabled" (a port switched off; on RoCE, also one whose netdev is down
    or has no carrier); rate left as recorded."""
    (sysfs / "mlx4_0" / "ports" / "2" / "state").write_text("1: DOWN\n")
    (sysfs / "mlx4_0" / "ports" / "2" / "phys_state").write_text("3: Disabled\n")
    ports = _read(sysfs, tmp_path)["ports"]
    assert isinstance(ports, list)
    assert [(p["device"], p["port"], p["state"], p["phys_state"]) for p in ports] == [
        ("i40iw0", 1, "ACTIVE", "LinkUp"), ("mlx4_0", 1, "ACTIVE", "LinkUp"),
        ("mlx4_0", 2, "DOWN", "Disabled"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("state", "phys", "read_as"),
    [
        ("4: ACTIVE", "5: LinkUp", ("ACTIVE", "LinkUp")),  # the kernel's, as recorded
        ("ACTIVE", "LinkUp", ("ACTIVE", "LinkUp")),  # the bare word
        ("4", "5", ("ACTIVE", "LinkUp")),  # the bare number
        ("Active", "PhyTest", ("ACTIVE", "Phy Test")),  # ibstat's spelling
        ("PORT_ACTIVE (4)", "LINK_UP (5)", ("ACTIVE", "LinkUp")),  # ibv_devinfo's
        ("1: DOWN", "3: Disabled", ("DOWN", "Disabled")),
        ("1", "3", ("DOWN", "Disabled")),
        ("2: INIT", "DISABLED (3)", ("INIT", "Disabled")),
        ("Initializing", "PORT_CONFIGURATION TRAINNING (4)", ("INIT", "PortConfigurationTraining")),
        ("4: ACTIVE", "4: ACTIVE", ("ACTIVE", "ACTIVE")),  # procfs's: a word read as written
        ("Active", "Active", ("ACTIVE", "ACTIVE")),  # and in another case
        ("9: UNKNOWN", "9: <unknown>", ("UNKNOWN", "<unknown>")),  # out of the kernel's range
    ],
)
def test_every_form_of_state_and_phys_state(
    sysfs: Path, tmp_path: Path, state: str, phys: str, read_as: tuple[str, str]
) -> None:
    """Changed: mlx4_0/ports/1/state from "4: ACTIVE" and phys_state from "5: LinkUp" to each
    form a capture writes; the node sends the kernel's words whatever the form."""
    (sysfs / "mlx4_0" / "ports" / "1" / "state").write_text(state + "\n")
    (sysfs / "mlx4_0" / "ports" / "1" / "phys_state").write_text(phys + "\n")
    ports = _read(sysfs, tmp_path)["ports"]
    assert isinstance(ports, list)
    assert (ports[1]["device"], ports[1]["port"]) == ("mlx4_0", 1)
    assert (ports[1]["state"], ports[1]["phys_state"]) == read_as


def test_procfs_recorded_phys_state_active(tmp_path: Path) -> None:
    """prometheus/procfs's recorded mlx5_0 (unchanged) writes "4: ACTIVE" in phys_state."""
    root = ttar.extract(PROCFS, tmp_path) / "fixtures" / "sys" / "class" / "infiniband"
    assert _read(root, tmp_path)["ports"] == [
        {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "phys_state": "ACTIVE",
         "rate_gbps": 25.0, "rate": "25 Gb/sec (1X EDR)", "link_layer": "InfiniBand"},
    ]  # fmt: skip


def test_a_rate_trained_lower_and_a_file_that_cannot_be_read(sysfs: Path, tmp_path: Path) -> None:
    """Changed: mlx4_0/ports/1/rate from "40 Gb/sec (4X QDR)" to "10 Gb/sec (1X QDR)"; and
    i40iw0/ports/1/link_layer removed (a read that fails is null, not an exception)."""
    (sysfs / "mlx4_0" / "ports" / "1" / "rate").write_text("10 Gb/sec (1X QDR)\n")
    (sysfs / "i40iw0" / "ports" / "1" / "link_layer").unlink()
    ports = _read(sysfs, tmp_path)["ports"]
    assert isinstance(ports, list)
    assert [(p["rate_gbps"], p["link_layer"]) for p in ports] == [
        (10.0, None),
        (10.0, "InfiniBand"),
        (40.0, "InfiniBand"),
    ]


@pytest.mark.parametrize(
    ("value", "missing"),
    [
        ("mlx4_0", []),
        ("mlx4", []),  # a prefix: every mlx4 device
        ("mlx4_0:1,mlx4_0:2", []),
        ("mlx4_0:3", ["mlx4_0:3"]),  # the device is there, not that port
        ("mlx5_4", ["mlx5_4"]),
        ("=mlx4", ["mlx4"]),  # whole names: no device is called mlx4
        ("mlx4_0,mlx5_0,i40iw0", ["mlx5_0"]),
        ("^mlx5_0", []),  # excluding a device the node lacks is harmless
    ],
)
def test_nccl_ib_hca(sysfs: Path, tmp_path: Path, value: str, missing: list[str]) -> None:
    doc = _read(sysfs, tmp_path, NCCL_IB_HCA=value)
    assert (doc["hca_variable"], doc["hca_missing"]) == (value, missing)


def test_ib_disabled_asks_for_no_device(sysfs: Path, tmp_path: Path) -> None:
    assert _read(sysfs, tmp_path, NCCL_IB_HCA="mlx5_4", NCCL_IB_DISABLE="1")["hca_missing"] == []


def test_no_ib_and_nothing_asking_says_nothing_but_a_variable_is_still_checked(
    tmp_path: Path,
) -> None:
    absent = tmp_path / "no-infiniband"
    assert _read(absent, tmp_path) == {"present": False, "ports": [], "hca_variable": None,
                                       "hca_missing": [], "peermem": None}  # fmt: skip
    assert _read(absent, tmp_path, NCCL_IB_HCA="mlx5_0")["hca_missing"] == ["mlx5_0"]


def test_peermem_from_sys_module_or_proc_modules(tmp_path: Path) -> None:
    modules = tmp_path / "modules"
    modules.write_text(
        "nvidia_peermem 16384 0 - Live 0x0\nnvidia 56918016 1 nvidia_peermem, Live 0x0\n"
    )
    assert infiniband.peermem(str(tmp_path / "none"), str(modules))
    (tmp_path / "sys" / "nv_peer_mem").mkdir(parents=True)
    assert infiniband.peermem(str(tmp_path / "sys"), str(tmp_path / "absent"))
    modules.write_text("nvidia_peermemx 1 0 - Live 0x0\n")
    assert not infiniband.peermem(str(tmp_path / "none"), str(modules))
