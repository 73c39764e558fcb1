"""This node's network as NCCL and gloo will use it (the ``network`` part, envtool.network/1).

The interfaces under /sys/class/net (up, loopback, MTU, speed) with their addresses (IPv4 from
``getifaddrs``, as NCCL lists them, secondary and labelled ones too, else ``SIOCGIFADDR``'s one;
IPv6 from /proc/net/if_inet6: no process started), the interfaces
``NCCL_SOCKET_IFNAME`` and ``GLOO_SOCKET_IFNAME`` select (or, unset, the ones NCCL and gloo
would pick themselves), and the InfiniBand ports (envtool_node/infiniband.py).

Python 3.9, standard library only; every file read is bounded.
"""

from __future__ import annotations

import ctypes
import fcntl
import ipaddress
import os
import socket
import struct

from . import infiniband
from .infiniband import parse_list, read_text
from .reach import resolve
from .schema import NETWORK

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

MAX_INTERFACES = 256
IFF_UP, IFF_LOOPBACK, ARPHRD_LOOPBACK = 0x1, 0x8, "772"
SIOCGIFADDR, SIOCGIFNETMASK = 0x8915, 0x891B
# NCCL's own order when NCCL_SOCKET_IFNAME is unset (src/misc/socket.cc, ncclFindInterfaces):
# IB interfaces first, then anything but docker and lo, then docker, lo as the last resort.
NCCL_DEFAULT_ORDER = ("ib", "^docker,lo", "docker", "lo")
RESOLVE_SECONDS = 1.0  # the hostname's lookup, as gloo makes it; /etc/hosts answers at once


def _integer(text: str | None, base: int = 10) -> int | None:
    try:
        return int(text or "", base)
    except ValueError:
        return None


def _ipv4(name: str) -> list[str]:
    """The interface's IPv4 address with its prefix length, from the kernel (one per name)."""
    request = struct.pack("256s", name.encode("utf-8", "replace")[:15])
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            addr = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, request)[20:24]
            mask = fcntl.ioctl(sock.fileno(), SIOCGIFNETMASK, request)[20:24]
    except OSError:  # no IPv4 address (EADDRNOTAVAIL), or no such interface here
        return []
    bits = bin(int.from_bytes(mask, "big")).count("1")
    return ["%s/%d" % (socket.inet_ntoa(addr), bits)]


class _Sockaddr(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("data", ctypes.c_ubyte * 14)]


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = [
    ("next", ctypes.POINTER(_Ifaddrs)),
    ("name", ctypes.c_char_p),
    ("flags", ctypes.c_uint),
    ("addr", ctypes.POINTER(_Sockaddr)),
    ("netmask", ctypes.POINTER(_Sockaddr)),
    ("ifu", ctypes.c_void_p),
    ("data", ctypes.c_void_p),
]  # fmt: skip  (struct ifaddrs, <ifaddrs.h>)


def _ipv4_all() -> dict[str, list[str]] | None:
    """Interface name → every IPv4 address with its prefix length, from libc's getifaddrs
    (what NCCL walks): secondary addresses too, a labelled one (``eth0:1``) under its
    interface. None where getifaddrs cannot be called (then SIOCGIFADDR gives one each)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        head = ctypes.POINTER(_Ifaddrs)()
        if libc.getifaddrs(ctypes.byref(head)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    out: dict[str, list[str]] = {}
    try:
        node = head
        for _ in range(MAX_INTERFACES * 16):  # a bounded walk of a list the kernel made
            if not node:
                break
            entry = node.contents
            if entry.addr and entry.addr.contents.family == socket.AF_INET and entry.name:
                name = entry.name.decode("utf-8", "replace").split(":", 1)[0]
                addr = socket.inet_ntoa(bytes(entry.addr.contents.data[2:6]))
                mask = bytes(entry.netmask.contents.data[2:6]) if entry.netmask else b"\xff" * 4
                bits = bin(int.from_bytes(mask, "big")).count("1")
                out.setdefault(name, []).append("%s/%d" % (addr, bits))
            node = entry.next
    finally:
        libc.freeifaddrs(head)
    return out


def _ipv6(proc: str) -> dict[str, list[str]]:
    """Interface name → its IPv6 addresses (loopback's ``::1`` left out, as NCCL does)."""
    out: dict[str, list[str]] = {}
    for line in (read_text(os.path.join(proc, "net", "if_inet6"), 1 << 20) or "").splitlines():
        fields = line.split()
        if len(fields) != 6 or len(fields[0]) != 32:
            continue
        try:
            address = ipaddress.IPv6Address(bytes.fromhex(fields[0]))
        except ValueError:
            continue
        if not address.is_loopback:
            out.setdefault(fields[5], []).append("%s/%d" % (address, int(fields[2], 16)))
    return out


def _interface(
    sysfs: str, name: str, ipv4: Mapping[str, list[str]] | None, ipv6: Mapping[str, list[str]]
) -> dict[str, Any]:
    here = os.path.join(sysfs, "class", "net", name)
    flags = _integer(read_text(os.path.join(here, "flags")), 16) or 0
    operstate = read_text(os.path.join(here, "operstate"))
    speed = _integer(read_text(os.path.join(here, "speed")))  # EINVAL on a virtual link
    return {
        "name": name,
        "up": bool(flags & IFF_UP) and operstate in ("up", "unknown"),
        "loopback": bool(flags & IFF_LOOPBACK)
        or read_text(os.path.join(here, "type")) == ARPHRD_LOOPBACK,
        "addresses": (_ipv4(name) if ipv4 is None else list(ipv4.get(name, [])))
        + list(ipv6.get(name, [])),
        "mtu": _integer(read_text(os.path.join(here, "mtu"))),
        "speed_mbps": speed if speed is not None and speed > 0 else None,
    }


def interfaces(sysfs: str = "/sys", proc: str = "/proc") -> list[dict[str, Any]]:
    """Every interface, in the kernel's order (its ifindex)."""
    folder = os.path.join(sysfs, "class", "net")
    try:
        names = [n for n in os.listdir(folder) if os.path.isdir(os.path.join(folder, n))]
    except OSError:
        return []
    index = {n: _integer(read_text(os.path.join(folder, n, "ifindex"))) or 0 for n in names}
    names = sorted(names, key=lambda n: (index[n], n))[:MAX_INTERFACES]
    ipv4, ipv6 = _ipv4_all(), _ipv6(proc)
    return [_interface(sysfs, n, ipv4, ipv6) for n in names]


def usable(found: list[dict[str, Any]]) -> list[str]:
    """The interfaces a socket can use: up, with an address."""
    return [str(i["name"]) for i in found if i["up"] and i["addresses"]]


def nccl_match(value: str, names: list[str]) -> list[str]:
    """The names NCCL's list syntax selects: prefixes (``eth``), whole names (``=eth0``), or
    everything but them (``^docker,lo``, ``^=eth0``); ``:port`` after an entry is NCCL's own."""
    exclude, exact, entries = parse_list(value)
    wanted = [e.partition(":")[0] for e in entries]

    def hit(name: str) -> bool:
        return any(name == w if exact else name.startswith(w) for w in wanted)

    return [n for n in names if hit(n) != exclude]


def nccl_selection(value: str | None, found: list[dict[str, Any]]) -> dict[str, Any]:
    """What NCCL_SOCKET_IFNAME selects, or NCCL's own choice when it is unset (NCCL ignores a
    value of one character, as if unset)."""
    names = usable(found)
    if value is not None and len(value) > 1:
        selected, how = nccl_match(value, names), "variable"
    else:
        selected, how = [], "default"
        for pattern in NCCL_DEFAULT_ORDER:
            selected = nccl_match(pattern, names)
            if selected:
                break
    return {"variable": "NCCL_SOCKET_IFNAME", "value": value, "selected": selected, "how": how}


def _holding(address: str, found: list[dict[str, Any]]) -> list[str]:
    """The up interfaces whose subnet holds ``address`` (127.0.1.1 is lo's)."""
    try:
        ip = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return []
    return [
        str(i["name"])
        for i in found
        if i["up"] and any(ip in ipaddress.ip_interface(a).network for a in i["addresses"])
    ]


def gloo_selection(value: str | None, found: list[dict[str, Any]]) -> dict[str, Any]:
    """What GLOO_SOCKET_IFNAME selects (whole names, comma-separated: torch makes one device
    each, and fails on a name without an address), or, unset, the interface holding the
    address this node's hostname resolves to (torch's createDefaultDevice; lo when none)."""
    doc: dict[str, Any] = {"variable": "GLOO_SOCKET_IFNAME", "value": value}
    names = usable(found)
    if value:
        entries = [e.strip() for e in value.split(",") if e.strip()]
        doc["selected"] = [e for e in entries if e in names]
        doc["unmatched"] = [e for e in entries if e not in names]
        doc["how"] = "variable"
        return doc
    selected: list[str] = []
    for address in resolve(socket.gethostname(), RESOLVE_SECONDS)[0]:
        selected = _holding(address, found)
        if selected:
            break
    doc["selected"] = selected[:1] or [n for n in names if n == "lo"]
    doc["how"] = "hostname"
    return doc


def netns(proc: str = "/proc") -> int | None:
    """The inode of this process's network namespace: with the boot id, nodes that share one
    (one loopback) are told from nodes that only share a kernel (containers, namespaces)."""
    try:
        return os.stat(os.path.join(proc, "self", "ns", "net")).st_ino
    except OSError:
        return None


def collect(environ: Mapping[str, str], sysfs: str = "/sys", proc: str = "/proc") -> dict[str, Any]:
    """The ``network`` part of the node document."""
    found = interfaces(sysfs, proc)
    return {
        "schema": NETWORK,
        "netns": netns(proc),
        "interfaces": found,
        "nccl": nccl_selection(environ.get("NCCL_SOCKET_IFNAME"), found),
        "gloo": gloo_selection(environ.get("GLOO_SOCKET_IFNAME") or None, found),
        "ib": infiniband.read(
            os.path.join(sysfs, "class", "infiniband"),
            environ,
            os.path.join(sysfs, "module"),
            os.path.join(proc, "modules"),
        ),
    }
