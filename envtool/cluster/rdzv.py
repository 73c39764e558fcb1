"""What every node is told for the rendezvous check (envtool_node/reach.py): the endpoint,
how many nodes take part, how long the store's node listens. The node that hosts the store
learns its role the way the all-reduce's does (FanoutOptions.rdzv_host: transports.with_role,
slurm's ``--rdzv-host-node``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from envtool.cluster.fanout import effective_fanout
from envtool.cluster.hosts import Host, check_name
from envtool.cluster.options import FanoutOptions
from envtool_node.schema import digits

DEFAULT_PORT = 29400  # torchrun's c10d default
WINDOW = 10.0  # seconds the store's node listens at most (a third of --timeout when less)
TRANSPORTS = ("ssh", "slurm")  # separate machines; local and docker nodes share this one


def endpoint(hosts: Sequence[Host], given: str, environ: Mapping[str, str]) -> str:
    """``--rdzv-endpoint``, else ``MASTER_ADDR``, else the first host; on ``MASTER_PORT``
    where it is set (a job script exports it for its launcher), else torchrun's 29400."""
    if given:
        return given
    text = environ.get("MASTER_PORT", "").strip()
    port = int(text) if digits(text) and 0 < int(text) < 65536 else DEFAULT_PORT
    addr = environ.get("MASTER_ADDR", "").strip()
    if addr:
        check_name(addr, "MASTER_ADDR")
        return f"{addr}:{port}"
    return f"{hosts[0].name}:{port}"


def store(hosts: Sequence[Host], at: str) -> Host | None:
    """The listed host the endpoint ``at`` names (by its name or its label), if any."""
    name = at.rpartition(":")[0] or at
    return next((h for h in hosts if name in (h.name, h.label)), None)


def args(hosts: Sequence[Host], at: str, options: FanoutOptions) -> tuple[str, ...]:
    """The node arguments of the check; () where it does not apply (one host; local or
    docker nodes). ``--rdzv-nodes 0`` (only the name is resolved) where no listed host is
    the endpoint, or where the hosts do not all run at once (more than --fanout)."""
    if len(hosts) < 2 or options.transport not in TRANSPORTS:
        return ()
    nodes = len(hosts) if unchecked(hosts, at, options) is None else 0
    return ("--rdzv-check", at, "--rdzv-nodes", str(nodes), "--rdzv-window", f"{window(options):g}")


def unchecked(hosts: Sequence[Host], at: str, options: FanoutOptions) -> str | None:
    """Why this run does not check the rendezvous port from every node (said beside "all
    good", and in the JSON report's ``unchecked``); None where it does, or where there is no
    rendezvous between nodes to check (one host)."""
    if len(hosts) < 2:
        return None
    if options.transport not in TRANSPORTS:
        return f"rendezvous ({options.transport} nodes share this machine: nothing to cross)"
    if store(hosts, at) is None:
        return (
            "rendezvous port (the endpoint is not one of the hosts: "
            "only its name was resolved on each node)"
        )
    if options.transport != "slurm" and len(hosts) > (most := effective_fanout(options.fanout)):
        return (
            f"rendezvous port (more hosts than --fanout {most} do not all run at once: "
            "only its name was resolved on each node)"
        )
    return None


def window(options: FanoutOptions) -> float:
    """How long the store's node listens (and the others retry): 10 s, or a third of
    --timeout when that is less; the all-reduce after it has that much less time."""
    return min(WINDOW, max(1.0, options.timeout / 3))
