"""The rendezvous from every node (issue 28 item 3): does the rendezvous host resolve here,
to what, and can this node open a TCP connection to its port?

Every node resolves the rendezvous host (bounded: getaddrinfo runs in a thread with a
deadline; DNS can hang). The node that hosts the store (``--rdzv-role host``, or under Slurm
the node named by ``--rdzv-host-node``) listens on the rendezvous port for a window, before
any torch process, and records the nodes that greet it; it also connects to itself through
the address its own resolver gives (its name on 127.0.1.1 shows here). Every other node
connects, retrying a refused connection until the window ends (the host may start later),
and greets it with the run's token and its name: a greeting without this run's token (another
user's process on the store's node) is counted as a stranger, never as a node. The listener is
closed before torchrun needs the port. A port
already held on the host is rendezvous.PortTaken's finding (one cause, one finding).

Python 3.9, standard library only.
"""

from __future__ import annotations

import errno
import hmac
import select
import socket
import threading
import time
from typing import NamedTuple

from .rendezvous import HOST, PortTaken, holder, port_of
from .schema import CAUSE_PORT_TAKEN, RENDEZVOUS, digits

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

WINDOW = 10.0  # seconds the host listens at most (the controller may ask for less)
ATTEMPT = 3.0  # seconds one connect may take
RETRY = 0.2  # seconds between refused connects
RESOLVE = 5.0  # seconds getaddrinfo may take
GREETING = b"envtool-rdzv "
MAX_LINE = 256  # bytes of a greeting read
MAX_PEERS = 4096  # greetings recorded


class Heard(NamedTuple):
    """What the store's listener heard: the nodes' names, and the other connections."""

    names: list[str]
    strangers: int


class Ask(NamedTuple):
    """What the controller asked: the endpoint, how many nodes take part (0: resolve only),
    the window in seconds, and this node's role (rendezvous.role)."""

    endpoint: str
    nodes: int
    window: float
    role: str


def host_of(endpoint: str) -> str:
    """The host of ``HOST:PORT`` (``[v6]:PORT``, or a bare host)."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or not digits(port):
        host = endpoint
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def resolve(host: str, limit: float = RESOLVE) -> tuple[list[str], str | None]:
    """The addresses ``host`` resolves to here, in the resolver's order, or why none."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["infos"] = socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            box["error"] = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__

    worker = threading.Thread(target=run, name="envtool-resolve", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        return [], "name resolution did not finish within %g s" % limit
    if "error" in box:
        return [], str(box["error"])[:200]
    addresses: list[str] = []
    for info in box.get("infos", []):
        address = str(info[4][0])
        if address not in addresses:
            addresses.append(address)
    return addresses, None if addresses else "no address"


def _family(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def greeting(token: str, name: str) -> bytes:
    """What a node sends the store's listener: the run's token (only this run's nodes have
    it: it came on their stdin), then its name."""
    return (
        GREETING
        + token.encode("ascii", "replace")[:64]
        + b" "
        + name.encode("utf-8", "replace")[:200]
        + b"\n"
    )


def connect(address: str, port: int, name: str, deadline: float, token: str = "") -> dict[str, Any]:
    """One bounded TCP connect to ``address:port`` and a greeting, retried while refused
    (or unroutable) until ``deadline``: ``{ok, error, seconds, address, tried}``; ``tried``:
    the wall-clock span of the attempts (the judge sets it against the store's ``open``)."""
    start, began = time.monotonic(), time.time()
    error = "no attempt before the window closed"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        wait = min(ATTEMPT, left)
        sock = socket.socket(_family(address), socket.SOCK_STREAM)
        try:
            sock.settimeout(wait)
            sock.connect((address, port))
            sock.sendall(greeting(token, name))
            return {"ok": True, "error": None, "seconds": round(time.monotonic() - start, 3),
                    "address": address, "tried": [began, time.time()]}  # fmt: skip
        except socket.timeout:  # retried too: the whole time tried is what it says
            error = "timed out after %g s" % round(time.monotonic() - start, 1)
        except OSError as exc:
            error = (exc.strerror or str(exc)).lower()
            time.sleep(min(RETRY, max(0.0, deadline - time.monotonic())))
        finally:
            sock.close()
    seconds = round(time.monotonic() - start, 3)
    return {"ok": False, "error": error, "seconds": seconds, "address": address,
            "tried": [began, time.time()]}  # fmt: skip


def _bind(port: int, look: bool = True) -> socket.socket:
    """A listener on every address (IPv6 dual stack where the node has it), as TCPStore's;
    PortTaken when another process holds the port (``look``: naming it, a walk of /proc)."""
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 here
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind((address, port))
            sock.listen(128)
            return sock
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE:
                raise PortTaken(port, holder(port) if look else "") from None
            if family == socket.AF_INET:
                raise
    raise OSError("no socket family to listen with")


def _greeting(conn: socket.socket, deadline: float, token: str) -> str | None:
    """The name a connection greets with, or None: not envtool's greeting, not this run's
    token, or too slow (one second for the whole line, and never past ``deadline``, however
    slowly its bytes come)."""
    end = min(time.monotonic() + 1.0, deadline)
    data = b""
    try:
        while b"\n" not in data and len(data) < MAX_LINE:
            left = end - time.monotonic()
            if left <= 0:
                return None
            conn.settimeout(left)
            chunk = conn.recv(MAX_LINE - len(data))
            if not chunk:
                break
            data += chunk
    except OSError:
        return None
    finally:
        conn.close()
    if not data.startswith(GREETING):
        return None
    said, _, name = data[len(GREETING) :].split(b"\n", 1)[0].partition(b" ")
    if not hmac.compare_digest(said, token.encode("ascii", "replace")):
        return None  # another user's process greeting as a node: counted, never a node
    return name.decode("utf-8", "replace").strip()[:200]


def listen(sock: socket.socket, expected: int, deadline: float, token: str = "") -> Heard:
    """The names heard until ``expected`` nodes greeted with this run's token, or
    ``deadline`` passed; and how many connections were not this run's (strangers)."""
    names: list[str] = []
    strangers = 0
    while len(names) < min(expected, MAX_PEERS):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([sock], [], [], left)[0]:
            break
        try:
            conn, _ = sock.accept()
        except OSError:
            continue
        name = _greeting(conn, deadline, token)
        if name is not None:
            names.append(name)
        else:
            strangers += 1
    return Heard(names, strangers)


def _bind_within(port: int, deadline: float) -> socket.socket:
    """``_bind``, tried again while the port is held, until the deadline: another envtool
    check listening there (two verify runs at once) lets go within its own window, so the
    two take turns; a holder that keeps it the whole window is PortTaken as before."""
    while True:
        try:
            return _bind(port, look=False)
        except PortTaken:
            if time.monotonic() + RETRY >= deadline:
                raise PortTaken(port, holder(port)) from None  # named once, at the end
            time.sleep(RETRY)


def _host(doc: dict[str, Any], port: int, ask: Ask, name: str, deadline: float, token: str) -> None:
    """Listen for every node (this one too, through its own resolved address)."""
    try:
        sock = _bind_within(port, deadline)
    except PortTaken as exc:
        doc["listen"] = {"ok": False, "error": str(exc), "peers": [],
                         "cause": CAUSE_PORT_TAKEN, "holder": exc.holder}  # fmt: skip
        return
    except OSError as exc:
        doc["listen"] = {"ok": False, "error": exc.strerror or str(exc), "peers": []}
        return
    opened = time.time()
    box: dict[str, Any] = {}
    addresses = doc["addresses"]
    worker = None
    if addresses:
        worker = threading.Thread(
            target=lambda: box.update(connect(addresses[0], port, name, deadline, token)),
            name="envtool-reach", daemon=True,
        )  # fmt: skip
        worker.start()
    try:
        heard = listen(sock, ask.nodes, deadline, token)
    finally:
        sock.close()
    closed = time.time()
    if worker is not None:
        worker.join(max(0.0, deadline - time.monotonic()) + ATTEMPT)
        doc["reach"] = dict(box) or {"ok": False, "error": "no answer", "seconds": 0.0,
                                     "address": addresses[0]}  # fmt: skip
    # open: the wall-clock span the port took connections (a peer that tried only outside
    # it was not checked: its start lagged, judge/rendezvous.py)
    doc["listen"] = {"ok": True, "error": None, "peers": heard.names,
                     "strangers": heard.strangers, "open": [opened, closed]}  # fmt: skip


def check(ask: Ask, name: str, token: str = "") -> dict[str, Any]:
    """The ``rendezvous`` part of the node document (contract: envtool.rendezvous/1);
    ``token``: the run's (schema.TOKEN_VAR), which this node's greeting carries and the
    store's listener asks of every greeting."""
    host, port = host_of(ask.endpoint), port_of(ask.endpoint)
    addresses, error = resolve(host)
    doc: dict[str, Any] = {
        "schema": RENDEZVOUS, "host": host, "port": port,
        "role": "host" if ask.role == HOST else "peer", "addresses": addresses,
        "error": error, "reach": None, "listen": None, "nodes": ask.nodes,
    }  # fmt: skip
    if ask.nodes < 2:
        return doc  # the endpoint is no listed node: only its name is checked
    deadline = time.monotonic() + max(0.5, min(WINDOW, ask.window))
    if ask.role == HOST:
        _host(doc, port, ask, name, deadline, token)
    elif addresses:
        doc["reach"] = connect(addresses[0], port, name, deadline, token)
    return doc


_OWN = ("--rdzv-check", "--rdzv-nodes", "--rdzv-window", "--rdzv-role", "--rdzv-host-node")


def asked(argv: list[str], environ: dict[str, str]) -> tuple[Ask | None, list[str]]:
    """The check asked for in the node's arguments, and the arguments left. The role flags
    (transports.with_role, slurm's ``--rdzv-host-node``) come last, inside the all-reduce's
    own arguments when there are some: read there too, and left for the all-reduce."""
    head, tail = argv, []
    if "--allreduce" in argv:
        cut = argv.index("--allreduce")
        head, tail = argv[:cut], argv[cut:]
    told: dict[str, str] = {}
    left: list[str] = []
    i = 0
    while i < len(head):
        if head[i] in _OWN and i + 1 < len(head):
            told[head[i]] = head[i + 1]
            i += 2
            continue
        left.append(head[i])
        i += 1
    for i, arg in enumerate(tail[:-1]):
        if arg in ("--rdzv-role", "--rdzv-host-node"):
            told[arg] = tail[i + 1]
    if "--rdzv-check" not in told:
        return None, left + tail
    from .rendezvous import role

    here = role(told.get("--rdzv-role", ""), told.get("--rdzv-host-node", ""), environ)
    try:
        nodes, window = int(told.get("--rdzv-nodes", "0")), float(told.get("--rdzv-window", WINDOW))
    except ValueError:
        nodes, window = 0, WINDOW
    return Ask(told["--rdzv-check"], nodes, window, here), left + tail
