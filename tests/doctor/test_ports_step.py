"""doctor's ports step (envtool/doctor/machine.py): a port a finished run's connections left
in TIME_WAIT is free for torchrun (TCPStore binds with SO_REUSEADDR), a listener is not."""

from __future__ import annotations

import socket

from envtool.doctor.machine import port_free


def _time_wait() -> int:
    """A port whose listener accepted a connection and closed first: its side of that
    connection is in TIME_WAIT, nothing listens."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = int(server.getsockname()[1])
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = server.accept()
    conn.close()  # the accepting side closes first: it holds the TIME_WAIT
    server.close()
    client.close()
    return port


def test_time_wait_is_free_and_a_listener_is_not() -> None:
    port = _time_wait()
    assert port_free(port)
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("", port))
        held.listen()
        assert not port_free(port)
