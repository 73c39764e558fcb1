"""What a verify run could not check, said beside its verdict and in the JSON report's
``unchecked`` (pure): parts a node's answer lacked, and what a node sent its part for but could
not read (/dev/shm's size, the Xid log, card health fields). No finding rests on them."""

from __future__ import annotations

from envtool.judge import gpu_link
from envtool.protocol.types import HostReport

SENT_PARTS = ("gpus", "network", "limits")  # the node package always sends these


def missing_parts(reports: list[HostReport]) -> tuple[str, ...]:
    """Each part the node package always sends that a host's answer lacked without saying
    why (a hand-made or older document, judged on what it holds): no finding, but said
    beside "all good" and in the JSON report's ``unchecked``, never passed over in silence."""
    out = []
    for part in SENT_PARTS:
        hosts = [
            r.host
            for r in reports
            if r.ok
            and getattr(r, part) is None
            and not {part, "answer"} & {p.part for p in r.problems}
        ]
        if hosts:
            out.append(f"{part} on {_on(hosts)} (not in the node's answer)")
    return tuple(out)


def _on(hosts: list[str]) -> str:
    return ", ".join(hosts[:3]) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")


def unread(reports: list[HostReport]) -> tuple[str, ...]:
    """What a node sent its part for but could not read, so no finding can rest on it: the
    size of /dev/shm, on a node with GPUs its kernel's Xid log (``dmesg_restrict`` for a
    user that is not root), and each health field group its cards could not read. Said
    beside "all good" and in ``unchecked``, with the first node's reason."""
    shm = [(r.host, r.limits.shm_error) for r in reports if r.limits and r.limits.shm_bytes is None]
    xid = [(r.host, r.gpus.xid.why or "") for r in reports
           if r.gpus is not None and r.gpus.devices and not r.gpus.xid.read]  # fmt: skip
    cut = [(r.host, r.gpus.xid.partial or "") for r in reports
           if r.gpus is not None and r.gpus.xid.read and r.gpus.xid.partial]  # fmt: skip
    out = []
    for what, found, how in (("/dev/shm size", shm, "not readable there"),
                             ("Xid log", xid, "not readable there"),
                             ("Xid log", cut, "read in part there")):  # fmt: skip
        if found:
            why = f": {found[0][1][:120]}" if found[0][1] else ""
            out.append(f"{what} on {_on([h for h, _ in found])} ({how}{why})")
    return tuple(out) + _health(reports)


def _health(reports: list[HostReport]) -> tuple[str, ...]:
    """Each card health group a node could not read (gpu_link.unread_health), hosts alike
    said once: ``ECC errors on gpu01, gpu02 GPU 0-7 (not readable there: [N/A])``."""
    by: dict[tuple[str, str, str], list[str]] = {}
    for r in reports:
        for group, gpus, why in gpu_link.unread_health(r.gpus) if r.gpus is not None else ():
            by.setdefault((group, gpus, why[:120]), []).append(r.host)
    return tuple(f"{group} on {_on(hosts)} {gpus} (not readable there{': ' + why if why else ''})"
                 for (group, gpus, why), hosts in by.items())  # fmt: skip
