"""What a node reported about the rendezvous (its ``rendezvous`` part, envtool.rendezvous/1):
the host it resolved and to what, its connect to the port, and on the node that hosts the
store the listener envtool opened there and who greeted it (envtool_node/reach.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reach:
    """One node's bounded TCP connect to the rendezvous port."""

    ok: bool
    error: str  # "" when ok: "timed out after 3 s", "connection refused"
    seconds: float
    address: str  # the address it connected to (its first resolved one)
    tried: tuple[float, float] | None = None  # the attempts' wall-clock span on the node


@dataclass(frozen=True)
class Listen:
    """The listener on the store's node: whether it opened, and who greeted it."""

    ok: bool
    error: str
    peers: tuple[str, ...]  # the names of the nodes heard, itself included
    cause: str = ""  # schemas.CAUSE_PORT_TAKEN: another process holds the port
    holder: str = ""  # that process's user (and pid, where visible)
    open: tuple[float, float] | None = None  # the wall-clock span it took connections
    strangers: int = 0  # connections whose greeting did not carry this run's token


@dataclass(frozen=True)
class RendezvousCheck:
    """The rendezvous as one node sees it."""

    host: str  # the rendezvous host's name (or address) as given
    port: int
    role: str  # "host": this node hosts the store; "peer"
    addresses: tuple[str, ...]  # what ``host`` resolves to on this node
    error: str  # why it resolves to nothing ("" when it resolves)
    reach: Reach | None  # None: no connect was made (resolution only, or unresolved)
    listen: Listen | None  # only on the store's node
    nodes: int = 0  # the nodes taking part (0: resolution only)

    @property
    def is_host(self) -> bool:
        """This node hosts the store."""
        return self.role == "host"
