"""The words of the network findings whose fix depends on what the node has (the rest use
their row's fix line, judge/rules_network.py); report/labels.py asks here first."""

from __future__ import annotations

from envtool.judge.findings import Finding, Kind
from envtool.judge.network import OFF_ASIDE, OFF_NAMED, OFF_ONLY

_ENABLE = "ibportstate ... enable; RoCE: ip link set its netdev up, and check its link"
_OFF = {  # an ib-port-down switched off (phys_state Disabled): the words after the states
    OFF_NAMED: ": switched off, and NCCL_IB_HCA asks for it",
    OFF_ONLY: ": switched off, and no other port is up (NCCL falls back to sockets)",
    OFF_ASIDE: ": switched off; NCCL leaves it out and uses the node's other ports",
}


def _port_words(f: Finding) -> tuple[str, str, str]:
    actual = f"{f.actual}{_OFF[f.cause]}"
    if f.cause == OFF_ASIDE:
        fix = (f"nothing, if {f.subject} is meant to be off; else enable it ({_ENABLE}); "
               f"NCCL_IB_HCA=^={f.subject} leaves it out")  # fmt: skip
        return f"{f.expected}, or off", actual, fix
    fix = f"enable port {f.subject} ({_ENABLE}), or leave it out of NCCL_IB_HCA"
    return f.expected, actual, fix


def net_words(f: Finding) -> tuple[str, str, str] | None:
    """(expected, actual, fix) of an interface variable that selects nothing, or of a port
    down because it is switched off; else None (the row's fix line)."""
    if f.kind is Kind.IB_PORT_DOWN and f.cause in _OFF:
        return _port_words(f)
    if f.kind is not Kind.IFNAME_UNMATCHED:
        return None
    syntax = " (NCCL: eth, =eth0, ^docker)" if f.subject.startswith("NCCL_") else ""
    fix = f"set {f.subject} to one of the node's interfaces{syntax}, or unset it"
    return f"{f.expected} selecting an interface", f"the node has {f.actual}", fix
