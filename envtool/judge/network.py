"""Pure checks of the network under the environment: the interface variables against the
interfaces each node has, the selected interface's MTU and speed across nodes, InfiniBand
ports, rates, NCCL_IB_HCA and GPUDirect RDMA's module. Findings, no I/O, no text.

One cause, one finding: an interface variable that selects nothing explains that node's
failed all-reduce (rules_network.py) and its ``nccl-env-differs`` about that variable
(``one_cause``).

Which IB/RoCE ports NCCL would use is NCCL's own rule (net_ib.cc, ncclIbInit): every port
whose state is ACTIVE (link layer InfiniBand or Ethernet) that ``NCCL_IB_HCA`` selects, all
of them where it is unset; a port that is not ACTIVE is skipped without a word, named or not,
and where none is left NCCL falls back to sockets. So a port that is not up among those
``NCCL_IB_HCA`` selects is ``ib-port-down``, an error: NCCL runs on fewer rails than the node
has, or on sockets. Except a port switched off (phys_state ``Disabled``: ``ibportstate ...
disable`` on IB; on RoCE its netdev down or without carrier, as the drivers write it): that
one is an error only where NCCL would select it, that is where an ``NCCL_IB_HCA`` list names
it (a prefix, ``=`` a whole name, ``:port``; a ``^`` list names what to leave out) or where no
other port NCCL would use on the node is up (its only rail: NCCL finds no IB device there).
Elsewhere it is info: the node's other ports carry NCCL, as an admin who switched a spare
port off expects; a port a ``^`` list leaves out is not judged at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from envtool.judge.consensus import Machines, differences, without_hosts
from envtool.judge.findings import Finding, Kind, Severity
from envtool.judge.rules import severity
from envtool.protocol.net_types import IbPort, Infiniband, Interface, Network
from envtool.protocol.types import HostReport
from envtool_node.infiniband import parse_list

NOTHING = "no interface up with an address"
# why an ib-port-down's port is down where it is switched off (phys_state Disabled)
OFF_NAMED = "switched off, named"  # an NCCL_IB_HCA list selects it (error)
OFF_ONLY = "switched off, no other port"  # no other port NCCL would use is up (error)
OFF_ASIDE = "switched off, left out"  # the node's other ports carry NCCL (info)


def _has(net: Network) -> str:
    """The interfaces a variable could select on this node, as a finding shows them."""
    return ", ".join(net.usable) or NOTHING


def _unmatched(host: str, net: Network) -> list[Finding]:
    """An interface variable that selects nothing (or, gloo's, names one the node lacks)."""
    out = []
    for sel in (net.nccl, net.gloo):
        if sel is None or sel.how != "variable":
            continue
        if sel.selected and not sel.unmatched:
            continue
        kind = Kind.IFNAME_UNMATCHED
        wanted = ", ".join(sel.unmatched) if sel.selected else sel.value or ""
        out.append(Finding(kind, severity(kind), sel.variable, f"{sel.variable}={wanted}",
                           _has(net), (host,)))  # fmt: skip
    return out


def _chosen(net: Network) -> Interface | None:
    """The interface NCCL (else gloo) sends through on this node; None for loopback only."""
    for sel in (net.nccl, net.gloo):
        for name in sel.selected if sel is not None else ():
            found = net.interface(name)
            if found is not None and not found.loopback:
                return found
    return None


def _link_checks(nets: Mapping[str, Network], machines: Machines) -> list[Finding]:
    """The selected interface's MTU and speed, compared across nodes."""
    chosen = {h: i for h, n in nets.items() if (i := _chosen(n)) is not None}
    names = {i.name for i in chosen.values()}
    where = names.pop() if len(names) == 1 else "the selected interface"
    out: list[Finding] = []
    checks: tuple[tuple[Kind, str, Callable[[Interface], int | None], str], ...] = (
        (Kind.MTU_DIFFERS, f"MTU of {where}", lambda i: i.mtu, ""),
        (Kind.LINK_SPEED_DIFFERS, f"speed of {where}", lambda i: i.speed_mbps, " Mb/s"),
    )
    for kind, subject, get, unit in checks:
        values = {h: f"{v}{unit}" for h, i in chosen.items() if (v := get(i)) is not None}
        out += differences(values, kind, severity(kind), subject, machines=machines)
    return out


def _used(ib: Infiniband) -> list[IbPort]:
    """The ports NCCL would use: all, or those NCCL_IB_HCA selects (NCCL's syntax)."""
    if not ib.hca_variable:
        return list(ib.ports)
    exclude, exact, entries = parse_list(ib.hca_variable)

    def hit(port: IbPort) -> bool:
        for entry in entries:
            name, _, number = entry.partition(":")
            same = port.device == name if exact else port.device.startswith(name)
            if same and (not number.isdigit() or int(number) == port.port):
                return True
        return False

    return [p for p in ib.ports if hit(p) != exclude]


def _off(ib: Infiniband, used: list[IbPort]) -> str:
    """Why a port switched off matters (OFF_NAMED, OFF_ONLY) or does not (OFF_ASIDE)."""
    if ib.hca_variable and not parse_list(ib.hca_variable)[0]:
        return OFF_NAMED
    return OFF_ASIDE if any(p.up for p in used) else OFF_ONLY


def _down(host: str, ib: Infiniband) -> list[Finding]:
    """The ports NCCL would use that are not up (the module's docstring says which)."""
    used, kind, out = _used(ib), Kind.IB_PORT_DOWN, []
    for port in used:
        if port.up:
            continue
        cause = _off(ib, used) if port.disabled else ""
        level = Severity.INFO if cause == OFF_ASIDE else severity(kind)
        actual = f"{port.state or '?'} / {port.phys_state or '?'}"
        out.append(Finding(kind, level, port.name, "ACTIVE / LinkUp", actual, (host,),
                           cause=cause))  # fmt: skip
    return out


def _ib_checks(host: str, ib: Infiniband, gpus: bool) -> list[Finding]:
    out = _down(host, ib)
    if ib.hca_missing:
        devices = ", ".join(sorted({p.device for p in ib.ports})) or "no IB device"
        kind = Kind.IB_HCA_MISSING
        out.append(Finding(kind, severity(kind), "NCCL_IB_HCA", f"NCCL_IB_HCA={ib.hca_variable}",
                           f"no {', '.join(ib.hca_missing)} (has {devices})", (host,)))  # fmt: skip
    if ib.present and gpus and ib.peermem is False:
        kind = Kind.PEERMEM_MISSING
        out.append(Finding(kind, severity(kind), "nvidia_peermem", "loaded", "not loaded",
                           (host,)))  # fmt: skip
    return out


def _rate_checks(nets: Mapping[str, Network], machines: Machines) -> list[Finding]:
    """Each IB port's rate against the same port on the other nodes (ports that are up)."""
    rates: dict[str, dict[str, str]] = {}
    for host, net in nets.items():
        for port in _used(net.ib) if net.ib is not None else []:
            if port.up and port.rate_gbps is not None:
                rates.setdefault(port.name, {})[host] = f"{port.rate_gbps:g} Gb/s"
    kind, out = Kind.IB_RATE_DIFFERS, []
    for name, values in sorted(rates.items()):
        out += differences(values, kind, severity(kind), name, machines=machines)
    return out


def _has_gpus(report: HostReport) -> bool:
    cards = report.gpus is not None and bool(report.gpus.devices)
    return cards or (report.facts is not None and report.facts.device_count > 0)


def _gloo_loopback(reports: list[HostReport]) -> list[Finding]:
    """GLOO_SOCKET_IFNAME unset and the hostname on loopback: gloo's own pick is lo. Only
    where another node is known not to share that loopback (same boot id and network
    namespace: nodes of one machine's one namespace reach each other there)."""
    where: dict[str, tuple[str, int] | None] = {}
    for r in reports:
        if r.network is not None:
            boot = r.facts.boot_id if r.facts is not None else ""
            where[r.host] = (boot, r.network.netns) if boot and r.network.netns else None
    out = []
    for r in reports:
        net, mine = r.network, where.get(r.host)
        if net is None or net.gloo is None or net.gloo.how != "hostname":
            continue
        chosen = [net.interface(name) for name in net.gloo.selected]
        if not chosen or not all(i is not None and i.loopback for i in chosen):
            continue
        others = [o for h, o in where.items() if h != r.host and o is not None]
        if mine is None or all(o == mine for o in others):
            continue  # one loopback, no peer, or not known (an older node, no boot id)
        kind = Kind.GLOO_LOOPBACK
        out.append(Finding(kind, severity(kind, ordinary=_has_gpus(r)), "GLOO_SOCKET_IFNAME",
                           "an interface the other nodes reach",
                           "unset, and the hostname resolves to loopback: gloo would use lo",
                           (r.host,)))  # fmt: skip
    return out


def check(reports: list[HostReport], machines: Machines | None = None) -> list[Finding]:
    """Network findings across the hosts that sent their network part (``machines``: names
    of one machine, which count once in a comparison)."""
    machines = machines or {}
    nets = {r.host: r.network for r in reports if r.network is not None}
    out: list[Finding] = []
    for r in reports:
        if r.network is not None:
            out += _unmatched(r.host, r.network)
            if r.network.ib is not None:
                out += _ib_checks(r.host, r.network.ib, _has_gpus(r))
    out += _gloo_loopback(reports)
    return out + _link_checks(nets, machines) + _rate_checks(nets, machines)


def one_cause(found: list[Finding]) -> list[Finding]:
    """A variable that differs between nodes (``nccl-env-differs``) on a node where it
    selects no interface is that node's ``socket-ifname-unmatched``, not a second finding."""
    unmatched: dict[str, set[str]] = {}
    for f in found:
        if f.kind is Kind.IFNAME_UNMATCHED:
            unmatched.setdefault(f.subject, set()).update(f.hosts)
    out = []
    for f in found:
        if f.kind is Kind.NCCL_ENV_DIFFERS and f.subject in unmatched:
            kept = without_hosts(f, unmatched[f.subject])
            out += [kept] if kept is not None else []
        else:
            out.append(f)
    return out
