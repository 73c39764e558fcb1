"""The rendezvous of a run across nodes is envtool's: one node hosts the store, on a port it
checked free, and a port someone else holds is named with its holder, never blamed on the
nodes (issue 24 item 3).

torchrun's c10d backend guesses which node hosts the TCPStore by matching the endpoint's host
name, and when that guess cannot bind the port it quietly becomes a client of whatever listens
there: another user's plain listener (the run hangs until its deadline) or another user's
TCPStore (the run uses a store envtool does not own). Here the role is told: the node envtool
names (``--rdzv-role host``, or under Slurm the node whose ``SLURMD_NODENAME`` is
``--rdzv-host-node``) checks the port free, then gives torchrun ``is_host=true`` (torch then
fails instead of falling back); every other node ``is_host=false``. The store's keys are under
the run's random ``--rdzv-id`` (``envtool-<12 hex>``), one per run.

Python 3.9, standard library only.
"""

from __future__ import annotations

import errno
import os
import pwd
import socket

from .schema import ALLREDUCE, CAUSE_PORT_TAKEN, digits

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HOST, MEMBER, AUTO = "host", "member", "auto"
MAX_PROCS = 4096  # /proc entries looked at for the holder's pid
MAX_NET = 4 * 2**20  # bytes of /proc/net/tcp{,6} read


class PortTaken(Exception):
    """The rendezvous port is held by another process on the host node."""

    def __init__(self, port: int, holder: str) -> None:
        where = " by %s" % holder if holder else " (its holder is not visible to this user)"
        super().__init__("rendezvous port %d on this node is already taken%s" % (port, where))
        self.port = port
        self.holder = holder

    def document(self) -> dict[str, object]:
        """The all-reduce document the node reports instead of a result (``cause``: what
        envtool's reader turns into its own finding)."""
        return {"schema": ALLREDUCE, "backend": "?", "nranks": 0, "rows": [],
                "error": str(self), "cause": CAUSE_PORT_TAKEN, "port": self.port,
                "holder": self.holder}  # fmt: skip


def role(told: str, host_node: str, environ: dict[str, str]) -> str:
    """``host``, ``member`` or ``auto`` (torch's own guess: no node was named)."""
    if told in (HOST, MEMBER):
        return told
    here = environ.get("SLURMD_NODENAME", "")
    if host_node and here:
        return HOST if here == host_node else MEMBER
    return AUTO


def port_of(endpoint: str) -> int:
    """The port of ``HOST:PORT`` (``[v6]:PORT`` too); 29400, torchrun's default, when none."""
    _, sep, port = endpoint.rpartition(":")
    return int(port) if sep and digits(port) else 29400


def is_free(port: int) -> bool:
    """Nothing listens on ``port`` on any address: a bind to the wildcard address (IPv4 and
    IPv6) succeeds. SO_REUSEADDR as TCPStore sets it: the connections a previous run on this
    port left in TIME_WAIT do not count, a listener does. Closed at once (it never listened)."""
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 on this node
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:  # not EACCES (a port below 1024): torch says
                return False
        finally:
            sock.close()
    return True


def listeners(text: str, port: int) -> list[tuple[int, str]]:
    """(uid, socket inode) of each LISTEN socket on ``port`` in a ``/proc/net/tcp`` text."""
    out = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != "0A":  # 0A: TCP_LISTEN
            continue
        _, _, hexport = fields[1].rpartition(":")
        try:
            if int(hexport, 16) == port:
                out.append((int(fields[7]), fields[9]))
        except ValueError:
            continue
    return out


def _user(uid: int) -> str:
    try:
        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except KeyError:
        return "uid %d" % uid


def _pid_of(inode: str) -> str:
    """``pid N (comm)`` of the process holding socket ``inode``, where this user may look."""
    target = "socket:[%s]" % inode
    try:
        pids = [p for p in os.listdir("/proc") if digits(p)][:MAX_PROCS]
    except OSError:
        return ""
    for pid in pids:
        folder = "/proc/%s/fd" % pid
        try:
            fds = os.listdir(folder)
        except OSError:
            continue  # another user's process, or gone
        for fd in fds:
            try:
                if os.readlink(os.path.join(folder, fd)) == target:
                    with open("/proc/%s/comm" % pid, encoding="utf-8", errors="replace") as fh:
                        return "pid %s (%s)" % (pid, fh.read(64).strip())
            except OSError:
                continue
    return ""


def holder(port: int) -> str:
    """Who listens on ``port``: the user (always visible in /proc/net/tcp) and, where this
    user may see it, the process; "" when no listener shows (a firewall or a race)."""
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name, encoding="ascii", errors="replace") as fh:
                found = listeners(fh.read(MAX_NET), port)
        except OSError:
            continue
        for uid, inode in found:
            pid = _pid_of(inode)
            return "%s%s" % (_user(uid), ", %s" % pid if pid else "")
    return ""


def claim(port: int) -> None:
    """Raise PortTaken unless ``port`` is free on this node (the host, before torchrun)."""
    if not is_free(port):
        raise PortTaken(port, holder(port))


def taken_since(rendezvous: tuple[str, ...] | None, doc: dict[str, Any]) -> dict[str, Any]:
    """A failed run on the store's node (``rendezvous``: torchrun's arguments) whose port
    another process holds now: it took the port between envtool's check and torchrun's bind
    (the check cannot close that window: torchrun binds its own store). That, with its
    holder, is the cause; else ``doc``."""
    told = dict(zip(rendezvous[::2], rendezvous[1::2])) if rendezvous else {}
    if "is_host=true" not in told.get("--rdzv-conf", "").split(","):
        return doc
    port = port_of(told.get("--rdzv-endpoint", ""))
    if is_free(port):
        return doc
    taken = PortTaken(port, holder(port)).document()
    taken["error"] = "%s after envtool checked it free; the run failed: %s" % (
        taken["error"],
        str(doc.get("error", ""))[:200],
    )
    return taken


def conf(told_role: str, join_timeout: int) -> str:
    """torchrun's ``--rdzv-conf`` for this node's role."""
    parts = ["join_timeout=%d" % max(1, join_timeout)]
    if told_role in (HOST, MEMBER):
        parts.append("is_host=%s" % ("true" if told_role == HOST else "false"))
    return ",".join(parts)
