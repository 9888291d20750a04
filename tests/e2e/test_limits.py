"""Per-address connection limits (maxClientCnxns)."""

import socket
import time

from zkwire import RawClient

LIMIT = {"maxClientCnxns": "3"}


def closed_without_answer(sock, timeout=5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_connections_over_the_limit_are_closed(server_factory):
    s = server_factory(LIMIT)
    # Sockets count from accept, before any handshake: a client cannot
    # hold more slots than the limit by never sending a connect request.
    idle = [socket.create_connection((s.host, s.port), timeout=5) for _ in range(2)]
    session = RawClient(s.host, s.port)
    extra = socket.create_connection((s.host, s.port), timeout=5)
    assert closed_without_answer(extra)
    assert session.exists("/")[0] == 0, "connections within the limit keep working"
    # Freeing a slot lets the next connection in.
    idle.pop().close()
    again = None
    for _ in range(50):
        try:
            again = RawClient(s.host, s.port)
            break
        except (ConnectionError, OSError):
            time.sleep(0.1)
    assert again is not None and again.exists("/")[0] == 0
    for sock in idle:
        sock.close()
    session.close_socket()
    again.close_socket()
