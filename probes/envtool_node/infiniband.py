"""This node's InfiniBand / RoCE ports as the kernel shows them under /sys/class/infiniband,
``NCCL_IB_HCA`` read with NCCL's own syntax against the devices present, and whether the
GPUDirect RDMA module (``nvidia_peermem``, or the older ``nv_peer_mem``) is loaded.

Python 3.9, standard library only. Every read is bounded; a file that cannot be read is
null, never an exception. A node without IB where nothing asks for it reports
``present: false`` and nothing else to judge.

A port's ``state`` and ``phys_state`` are sent as the kernel's words (``ACTIVE``, ``LinkUp``,
``Disabled``), whichever real form the file holds: the kernel's ``4: ACTIVE`` / ``5: LinkUp``
(drivers/infiniband/core/sysfs.c), a bare word or a bare number (recorded trees), another
tool's spelling (ibstat's ``Active``, ibv_devinfo's ``PORT_ACTIVE (4)``, ``LINK_UP (5)``). A
word is read as written where it is known, the number only stands in for a missing word:
prometheus/procfs's recorded mlx5_0 writes ``4: ACTIVE`` in ``phys_state``, and that is read
as ``ACTIVE`` (judge/network.py takes it for a link that is up), not as phys_state 4
(PortConfigurationTraining).
"""

from __future__ import annotations

import os

from .schema import digits

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

MAX_READ = 4096  # sysfs attributes are one short line; never trust that
MAX_DEVICES, MAX_PORTS = 64, 16
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")  # the driver's module; Mellanox's older one


def read_text(path: str, limit: int = MAX_READ) -> str | None:
    """The first ``limit`` bytes of a file, stripped; None when it cannot be read (sysfs
    attributes may raise EINVAL, a device may vanish between listing and reading)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit)
    except OSError:
        return None
    return data.decode("utf-8", "replace").strip()


def _listing(path: str, limit: int) -> list[str]:
    try:
        return sorted(os.listdir(path))[:limit]
    except OSError:
        return []


# The kernel's words by number (sysfs.c: state_show, phys_state_to_str); 0 is no state
STATES = ("NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER")
PHYS_STATES = ("<unknown>", "Sleep", "Polling", "Disabled", "PortConfigurationTraining",
               "LinkUp", "LinkErrorRecovery", "Phy Test")  # fmt: skip


def _key(word: str) -> str:
    return "".join(c for c in word.lower() if c.isascii() and c.isalnum())


# every spelling by its key: the kernel's, ibstat's (Active, Initializing, PhyTest) and
# ibv_devinfo's (PORT_ACTIVE, LINK_UP, its "PORT_CONFIGURATION TRAINNING"); and in phys_state
# the logical state's ACTIVE, as procfs's recorded mlx5_0 writes it
_STATE_WORDS = {**{_key(w): w for w in STATES}, **{"port" + _key(w): w for w in STATES},
                "initializing": "INIT"}  # fmt: skip
_PHYS_WORDS = {**{_key(w): w for w in PHYS_STATES}, "active": "ACTIVE",
               "portconfigurationtrainning": "PortConfigurationTraining"}  # fmt: skip


def _split(text: str) -> tuple[int | None, str]:
    """``4: ACTIVE``, ``PORT_ACTIVE (4)``, ``4``, ``ACTIVE`` → (number or None, word)."""
    head, colon, tail = text.partition(":")
    if colon and digits(head.strip()):
        return int(head), tail.strip()
    word, paren, number = text.rstrip(")").rpartition("(")
    if paren and text.endswith(")") and digits(number.strip()):
        return int(number), word.strip()
    return (int(text), "") if digits(text) else (None, text)


def _word(text: str | None, names: tuple[str, ...], words: dict[str, str]) -> str | None:
    if text is None:
        return None
    number, word = _split(text.strip())
    if word:
        return words.get(_key(word), word)
    if number is not None and number < len(names):
        return names[number]
    return text.strip() or None


def port_state(text: str | None) -> str | None:
    """A port's ``state`` as the kernel's word (``4: ACTIVE``, ``Active``, ``4`` → ACTIVE)."""
    return _word(text, STATES, _STATE_WORDS)


def phys_state(text: str | None) -> str | None:
    """A port's ``phys_state`` as the kernel's word (``3: Disabled``, ``DISABLED (3)``, ``3``
    → Disabled); procfs's ``4: ACTIVE`` → ACTIVE; a word no table has is kept as written."""
    return _word(text, PHYS_STATES, _PHYS_WORDS)


def _gbps(rate: str | None) -> float | None:
    """``200 Gb/sec (4X HDR)`` → 200.0; None when the text does not start with a number."""
    try:
        return float((rate or "").split()[0])
    except (IndexError, ValueError):
        return None


def _port(root: str, device: str, port: str) -> dict[str, Any]:
    here = os.path.join(root, device, "ports", port)
    rate = read_text(os.path.join(here, "rate"))
    return {
        "device": device,
        "port": int(port),
        "state": port_state(read_text(os.path.join(here, "state"))),
        "phys_state": phys_state(read_text(os.path.join(here, "phys_state"))),
        "rate_gbps": _gbps(rate),
        "rate": rate,
        "link_layer": read_text(os.path.join(here, "link_layer")),
    }


def ports(root: str) -> list[dict[str, Any]]:
    """Every port of every device under ``root``, by device name and port number."""
    out = []
    for device in _listing(root, MAX_DEVICES):
        numbers = [p for p in _listing(os.path.join(root, device, "ports"), 256) if digits(p)]
        for port in sorted(numbers, key=int)[:MAX_PORTS]:
            out.append(_port(root, device, port))
    return out


def parse_list(value: str) -> tuple[bool, bool, list[str]]:
    """NCCL's list syntax (NCCL_SOCKET_IFNAME, NCCL_IB_HCA): (exclude, exact, entries). A
    leading ``^`` excludes, then a leading ``=`` means whole names, else prefixes; entries are
    comma-separated."""
    exclude = value.startswith("^")
    rest = value[1:] if exclude else value
    exact = rest.startswith("=")
    rest = rest[1:] if exact else rest
    return exclude, exact, [e.strip() for e in rest.split(",") if e.strip()]


def _names(entry: str) -> tuple[str, int | None]:
    """``mlx5_0:1`` → (``mlx5_0``, 1); a port that is not a number is no port."""
    name, _, port = entry.partition(":")
    return name, int(port) if digits(port) else None


def _matches(entry: str, exact: bool, device: str) -> bool:
    return device == entry if exact else device.startswith(entry)


def hca_missing(value: str, found: list[dict[str, Any]]) -> list[str]:
    """The entries of an NCCL_IB_HCA list that name no device (or no such port) here; an
    exclusion list names nothing that must exist."""
    exclude, exact, entries = parse_list(value)
    if exclude:
        return []
    missing = []
    for entry in entries:
        name, port = _names(entry)
        hits = [p for p in found if _matches(name, exact, str(p["device"]))]
        if not hits or (port is not None and all(p["port"] != port for p in hits)):
            missing.append(entry)
    return missing


def _module_listed(name: str, proc_modules: str) -> bool:
    text = read_text(proc_modules, 1 << 18) or ""
    return any(line.split(" ", 1)[0] == name for line in text.splitlines())


def peermem(sys_module: str = "/sys/module", proc_modules: str = "/proc/modules") -> bool:
    """Whether a GPUDirect RDMA module is loaded."""
    return any(
        os.path.isdir(os.path.join(sys_module, name)) or _module_listed(name, proc_modules)
        for name in PEERMEM_MODULES
    )


def read(
    root: str = "/sys/class/infiniband",
    environ: Mapping[str, str] | None = None,
    sys_module: str = "/sys/module",
    proc_modules: str = "/proc/modules",
) -> dict[str, Any]:
    """The ``ib`` part of the network document (envtool.network/1)."""
    environ = os.environ if environ is None else environ
    found = ports(root)
    value = environ.get("NCCL_IB_HCA") or None
    disabled = environ.get("NCCL_IB_DISABLE", "").strip() == "1"
    present = bool(found)
    return {
        "present": present,
        "ports": found,
        "hca_variable": value,
        "hca_missing": hca_missing(value, found) if value and not disabled else [],
        "peermem": peermem(sys_module, proc_modules) if present else None,
    }
