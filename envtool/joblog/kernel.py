"""A kernel log's lines given to ``envtool explain`` (``dmesg``, ``dmesg -T``, ``dmesg
--raw``, a saved ``/dev/kmsg``, the journal's ``kernel:`` lines): the NVIDIA driver's own Xid
records, read by the node package's parser (envtool_node/xid_parse.py), and NCCL's header
values as compared across hosts. Pure."""

from __future__ import annotations

import re

from envtool_node import xid_parse

# a kernel log's head before the message: `dmesg --raw`'s <PRIO>, a /dev/kmsg record's
# PRIO,SEQ,USEC,FLAGS;, dmesg's [seconds] or -T's [date], a journal's
# "Dec 02 08:00:01 HOST kernel: "
_KERNEL = re.compile(
    r"(?:<(\d{1,4})>|(\d{1,4}),\d{1,20},\d{1,20},[^;]{0,20};)?(?:\[[^\]]{1,40}\] ?)?"
    r"(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d (\S{1,64}) kernel: (?:\[[^\]]{1,40}\] ?)?)?"
)


def driver_record(text: str) -> tuple[tuple[str, str], ...] | None:
    """The values (xid, pci, sub, the journal's host) of the NVIDIA driver's own Xid record
    (judge/explain.py weighs its code by NVIDIA's catalog): its message *begins* with
    ``NVRM: `` (text anyone makes the kernel print inside another message, a mount
    option's, is not the driver's), and where the log says the record's facility, it is the
    kernel's (0). None: not one."""
    head = _KERNEL.match(text)
    if head is None or not text.startswith(xid_parse.PREFIX, head.end()):
        return None
    prio = head.group(1) or head.group(2)
    if prio is not None and int(prio) >> 3 != 0:
        return None
    found = xid_parse.driver_event(text[head.end() :])
    if found is None:
        return None
    xid, pci, sub = found
    detail = [("xid", str(xid)), ("pci", pci)] + ([("sub", sub)] if sub else [])
    if head.group(3):
        detail.append(("host", head.group(3)))
    return tuple(detail)


_IFNAME = re.compile(r"(?:\[\d{1,3}\])?([^:\s\[\]]{1,60}):")


def header_value(key: str, value: str) -> str:
    """What an NCCL header line's value is, as compared across hosts: interface names
    without their addresses (each node has its own), the plugin loaded or ``internal``."""
    value = value.strip()
    if key in ("NET/Socket", "Bootstrap"):
        return ",".join(_IFNAME.findall(value)) or value
    if key == "NET/Plugin":
        loaded = value.partition("Loaded ")[2]
        return loaded[:80] if loaded else "internal"
    return value
