"""envtool_node/rendezvous.py: the node told to host the store checks its port, and a port
someone else holds is named with its holder (issue 24 item 3), on real sockets and a real
second user."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator

import pytest
from conftest import require

from envtool_node import allreduce, rendezvous
from envtool_node.schema import ALLREDUCE, CAUSE_PORT_TAKEN


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def nobody_listens() -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """A plain listener on 127.0.0.1:PORT of another local user (``nobody``), as any user of a
    shared login node can open one before the job."""
    runuser = shutil.which("runuser")
    require(runuser is not None and os.geteuid() == 0, "needs root and runuser (util-linux)")
    require(os.path.exists("/usr/bin/python3"), "needs the system /usr/bin/python3")
    port = _port()
    code = (
        f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); "
        "print('up', flush=True); time.sleep(120)"
    )
    proc = subprocess.Popen(
        [str(runuser), "-u", "nobody", "--", "/usr/bin/python3", "-c", code],
        stdout=subprocess.PIPE, text=True, cwd="/",
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
        yield port, proc
    finally:
        proc.kill()
        proc.wait()


def test_a_port_another_user_listens_on_is_taken_and_named(
    nobody_listens: tuple[int, subprocess.Popen[str]],
) -> None:
    port, _ = nobody_listens
    assert not rendezvous.is_free(port)  # a listener on 127.0.0.1 blocks the wildcard bind
    with pytest.raises(rendezvous.PortTaken) as caught:
        rendezvous.claim(port)
    text = str(caught.value)
    assert f"rendezvous port {port} on this node is already taken by nobody (uid " in text
    assert "(python3)" in text  # root may look into every process's fds


def test_the_host_node_reports_the_taken_port_instead_of_starting_torchrun(
    nobody_listens: tuple[int, subprocess.Popen[str]],
) -> None:
    """The launcher's document, as the node prints it: the cause, the port, nothing started."""
    port, _ = nobody_listens
    args = allreduce.parse(
        ["--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-role", "host"]
    )
    doc = allreduce.launch(args)
    assert doc["schema"] == ALLREDUCE and doc["cause"] == CAUSE_PORT_TAKEN
    assert doc["port"] == port and "nobody" in doc["holder"]


def test_a_free_port_is_free_and_a_listener_of_ours_is_not() -> None:
    port = _port()
    assert rendezvous.is_free(port)
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert not rendezvous.is_free(port)
        assert f"pid {os.getpid()} (" in rendezvous.holder(port)
    assert rendezvous.is_free(port)


def test_roles_are_told_never_guessed_when_a_node_is_named() -> None:
    assert rendezvous.role("host", "", {}) == "host"
    assert rendezvous.role("member", "node1", {"SLURMD_NODENAME": "node1"}) == "member"
    assert rendezvous.role("auto", "node1", {"SLURMD_NODENAME": "node1"}) == "host"
    assert rendezvous.role("auto", "node1", {"SLURMD_NODENAME": "node2"}) == "member"
    assert rendezvous.role("auto", "", {"SLURMD_NODENAME": "node2"}) == "auto"
    assert rendezvous.conf("host", 30) == "join_timeout=30,is_host=true"
    assert rendezvous.conf("member", 0) == "join_timeout=1,is_host=false"
    assert rendezvous.conf("auto", 30) == "join_timeout=30"


def test_listeners_reads_the_kernels_table() -> None:
    """Lines as /proc/net/tcp writes them (one LISTEN on 0x7530 = 30000, one ESTABLISHED)."""
    text = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000  65534 "
        "       0 424242 1 0000000000000000 100 0 0 10 0\n"
        "   1: 0100007F:7530 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0 "
        "       0 434343 1 0000000000000000 20 4 30 10 -1\n"
        "   2: garbage\n"
    )
    assert rendezvous.listeners(text, 30000) == [(65534, "424242")]
    assert rendezvous.listeners(text, 30001) == []


def test_connections_a_previous_run_left_in_time_wait_do_not_count() -> None:
    """A pair's store on PORT closes, the next round's pair meets on PORT again: the server
    side's closed connections sit in TIME_WAIT, and TCPStore (SO_REUSEADDR) binds anyway."""
    port = _port()
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = server.accept()
        conn.close()  # the server side closes first: its end goes to TIME_WAIT
        client.close()
    with open("/proc/net/tcp", encoding="ascii") as fh:
        states = [ln.split()[3] for ln in fh.read().splitlines()[1:]
                  if ln.split()[1].endswith(f":{port:04X}")]  # fmt: skip
    assert "06" in states  # TCP_TIME_WAIT on PORT, as after a store's run
    assert rendezvous.is_free(port)


# what another user runs on the store's node: it waits for envtool's torchrun to start (its
# command line is world-readable in /proc) and takes the port in the second torchrun spends
# importing torch, after envtool checked it free and before torch's store binds it
_AFTER_THE_CHECK = """\
import os, socket, sys, time
port, end = int(sys.argv[1]), time.monotonic() + 60
while time.monotonic() < end:
    for pid in os.listdir('/proc'):
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as fh:
                if b'envtool_node.elastic' in fh.read():
                    s = socket.socket(); s.bind(('127.0.0.1', port)); s.listen()
                    print('taken', flush=True); time.sleep(60); sys.exit(0)
        except OSError:
            pass
    time.sleep(0.005)
"""


def test_a_port_taken_after_the_check_is_named_once_the_run_fails() -> None:
    """Issue 33 item 3: the port is free when the store's node checks it; another user binds
    it before torchrun's store does. The run fails, and the node says who holds the port
    (it said only torch's error before: allreduce-failed, no rendezvous-port-taken)."""
    runuser = shutil.which("runuser")
    require(runuser is not None and os.geteuid() == 0, "needs root and runuser (util-linux)")
    port = _port()
    taker = subprocess.Popen([str(runuser), "-u", "nobody", "--", "/usr/bin/python3", "-c",
                              _AFTER_THE_CHECK, str(port)], stdout=subprocess.PIPE, text=True,
                             cwd="/")  # fmt: skip
    try:
        endpoint = f"127.0.0.1:{port}"
        args = allreduce.parse(["--nnodes", "2", "--rdzv-endpoint", endpoint, "--rdzv-role",
                                "host", "--timeout", "60", "--backend", "gloo"])  # fmt: skip
        doc = allreduce.launch(args)
        assert taker.stdout is not None and taker.stdout.readline().strip() == "taken"
    finally:
        taker.kill()
        taker.wait()
    assert doc["cause"] == CAUSE_PORT_TAKEN and doc["port"] == port, doc
    assert "nobody" in doc["holder"] and "after envtool checked it free" in doc["error"], doc[
        "error"
    ]


def test_a_failed_run_whose_port_is_free_keeps_its_own_error() -> None:
    doc = {"schema": ALLREDUCE, "error": "rank 1 died"}
    rdzv_args = ("--rdzv-endpoint", f"127.0.0.1:{_port()}", "--rdzv-conf", "is_host=true")
    assert rendezvous.taken_since(rdzv_args, doc) is doc
    assert rendezvous.taken_since(None, doc) is doc
