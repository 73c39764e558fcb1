"""The network under the environment as a node reports it (envtool.network/1), as frozen
dataclasses (validated data; protocol/net_fields.py reads them)."""

from __future__ import annotations

from dataclasses import dataclass

ACTIVE, LINK_UP = "ACTIVE", "LinkUp"  # an IB port that carries traffic: its state, phys_state
DISABLED = "Disabled"  # phys_state 3: switched off (IB), its netdev down or no carrier (RoCE)


@dataclass(frozen=True)
class Interface:
    """One network interface as /sys/class/net shows it."""

    name: str
    up: bool
    loopback: bool = False
    addresses: tuple[str, ...] = ()  # "10.0.0.1/24", "fd00::1/64"
    mtu: int | None = None
    speed_mbps: int | None = None  # None: the link does not say (virtual links)


@dataclass(frozen=True)
class IfSelection:
    """What an interface variable (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME) selects on a node,
    or what NCCL or gloo picks when it is unset."""

    variable: str
    value: str | None  # None: unset
    selected: tuple[str, ...]  # among the interfaces that are up and have an address
    how: str  # variable | default (NCCL's own order) | hostname (gloo: the hostname's address)
    unmatched: tuple[str, ...] = ()  # gloo: names in the variable no usable interface has


@dataclass(frozen=True)
class IbPort:
    """One InfiniBand/RoCE port (/sys/class/infiniband/DEV/ports/N)."""

    device: str
    port: int
    state: str | None  # the kernel's words (envtool_node.infiniband.STATES): ACTIVE, DOWN, ...
    phys_state: str | None  # its PHYS_STATES: LinkUp, Polling, Disabled, ... or as written
    rate_gbps: float | None
    rate: str | None  # the kernel's words: "200 Gb/sec (4X HDR)"
    link_layer: str | None  # InfiniBand | Ethernet (RoCE)

    @property
    def name(self) -> str:
        """``mlx5_0:1``, as NCCL_IB_HCA writes it."""
        return f"{self.device}:{self.port}"

    @property
    def up(self) -> bool:
        """The port carries traffic: ACTIVE and LinkUp (or a phys_state that says ACTIVE, as
        prometheus/procfs's recorded mlx5_0 writes it: a link that says it is active is up)."""
        return self.state == ACTIVE and self.phys_state in (LINK_UP, ACTIVE)

    @property
    def disabled(self) -> bool:
        """Down because it is switched off (phys_state Disabled), not for want of a link."""
        return not self.up and self.phys_state == DISABLED


@dataclass(frozen=True)
class Infiniband:
    """The node's IB devices' ports, NCCL_IB_HCA against them, and GPUDirect RDMA's module."""

    present: bool
    ports: tuple[IbPort, ...] = ()
    hca_variable: str | None = None
    hca_missing: tuple[str, ...] = ()  # entries of NCCL_IB_HCA no device here matches
    peermem: bool | None = None  # nvidia_peermem (or nv_peer_mem) loaded; None: not asked


@dataclass(frozen=True)
class Network:
    """The network part of a node's answer."""

    interfaces: tuple[Interface, ...]
    nccl: IfSelection | None = None
    gloo: IfSelection | None = None
    ib: Infiniband | None = None
    netns: int | None = None  # the network namespace's inode (one loopback where it and the
    # boot id are the same); None: an older node, or /proc/self/ns unreadable

    def interface(self, name: str) -> Interface | None:
        """The interface of that name, if the node has it."""
        return next((i for i in self.interfaces if i.name == name), None)

    @property
    def usable(self) -> tuple[str, ...]:
        """The interfaces a socket can use (up, with an address)."""
        return tuple(i.name for i in self.interfaces if i.up and i.addresses)
