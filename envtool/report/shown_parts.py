"""Each host's node parts (GPUs, network, limits, rendezvous) as a report carries them: the
node's own shapes with every string the node sent made visible (report/text.py)."""

from __future__ import annotations

from dataclasses import replace

from envtool.protocol.gpu_types import GpuDevice, GpuLayer, GpuProcess
from envtool.protocol.limit_types import Limits
from envtool.protocol.net_types import IbPort, IfSelection, Infiniband, Interface, Network
from envtool.protocol.rdzv_types import Listen, Reach, RendezvousCheck
from envtool.report.text import visible, visible_all


def _maybe(text: str | None) -> str | None:
    return None if text is None else visible(text)


def _device(d: GpuDevice) -> GpuDevice:
    return replace(
        d, name=visible(d.name), uuid=visible(d.uuid), pci_bus_id=visible(d.pci_bus_id),
        compute_mode=_maybe(d.compute_mode), fabric_state=_maybe(d.fabric_state),
        fabric_status=_maybe(d.fabric_status),
        unread=tuple((visible(k), visible(v)) for k, v in d.unread),
        clock_events=None if d.clock_events is None else visible_all(d.clock_events),
    )  # fmt: skip


def gpus(layer: GpuLayer | None) -> GpuLayer | None:
    """The node's GPU layer with every string it sent made visible."""
    if layer is None:
        return None
    processes = tuple(
        GpuProcess(visible(p.gpu_uuid), p.pid, visible(p.name), _maybe(p.user), p.used_mib)
        for p in layer.processes
    )
    events = tuple(replace(e, pci=visible(e.pci), text=visible(e.text), sub=visible(e.sub),
                           first_text=visible(e.first_text)) for e in layer.xid.events)  # fmt: skip
    xid = replace(layer.xid, why=_maybe(layer.xid.why), events=events,
                  source=visible(layer.xid.source), partial=_maybe(layer.xid.partial))  # fmt: skip
    devices = tuple(_device(d) for d in layer.devices)
    return replace(layer, driver=_maybe(layer.driver), why=_maybe(layer.why), xid=xid,
                   devices=devices, processes=processes)  # fmt: skip


def _interface(i: Interface) -> Interface:
    return replace(i, name=visible(i.name), addresses=visible_all(i.addresses))


def _selection(s: IfSelection | None) -> IfSelection | None:
    if s is None:
        return None
    return replace(s, variable=visible(s.variable), value=_maybe(s.value),
                   selected=visible_all(s.selected), how=visible(s.how),
                   unmatched=visible_all(s.unmatched))  # fmt: skip


def _port(p: IbPort) -> IbPort:
    return replace(p, device=visible(p.device), state=_maybe(p.state),
                   phys_state=_maybe(p.phys_state), rate=_maybe(p.rate),
                   link_layer=_maybe(p.link_layer))  # fmt: skip


def _ib(ib: Infiniband | None) -> Infiniband | None:
    if ib is None:
        return None
    return replace(ib, ports=tuple(_port(p) for p in ib.ports),
                   hca_variable=_maybe(ib.hca_variable),
                   hca_missing=visible_all(ib.hca_missing))  # fmt: skip


def network(net: Network | None) -> Network | None:
    """The node's network part with every string it sent made visible."""
    if net is None:
        return None
    return replace(
        net,
        interfaces=tuple(_interface(i) for i in net.interfaces),
        nccl=_selection(net.nccl),
        gloo=_selection(net.gloo),
        ib=_ib(net.ib),
    )  # fmt: skip (replace: a field added later is kept)


def limits(lim: Limits | None) -> Limits | None:
    """The node's limits part with every string it sent made visible."""
    if lim is None:
        return None
    return replace(lim, shm_error=visible(lim.shm_error), kernel=visible(lim.kernel),
                   glibc=_maybe(lim.glibc))  # fmt: skip


def _reach(r: Reach | None) -> Reach | None:
    return None if r is None else replace(r, error=visible(r.error), address=visible(r.address))


def _listen(li: Listen | None) -> Listen | None:
    if li is None:
        return None
    return replace(li, error=visible(li.error), peers=visible_all(li.peers),
                   cause=visible(li.cause), holder=visible(li.holder))  # fmt: skip


def rendezvous(check: RendezvousCheck | None) -> RendezvousCheck | None:
    """The node's rendezvous part with every string it sent made visible."""
    if check is None:
        return None
    return replace(check, host=visible(check.host), role=visible(check.role),
                   addresses=visible_all(check.addresses), error=visible(check.error),
                   reach=_reach(check.reach), listen=_listen(check.listen))  # fmt: skip


def clock_offset(offset: tuple[float, float] | None) -> tuple[float, float] | None:
    """(offset_s, bound_s) to the millisecond."""
    return None if offset is None else (round(offset[0], 3), round(offset[1], 3))
