"""Hostile clients and resource limits: thousands of connections, a client
that never reads its replies, a multi of 100,000 operations, a znode with
100,000 children. Each must cost the server nothing beyond that client,
and every other client keeps being served."""

import socket
import time

import pytest

from zkwire import CreateMode, Op, connect_request, frame, m_create, request_header, path_watch_body


def rss_bytes(server) -> int:
    with open(f"/proc/{server.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def handshake(host, port) -> socket.socket:
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(frame(connect_request(timeout_ms=30000)))
    length = int.from_bytes(recv_exactly(s, 4), "big")
    recv_exactly(s, length)
    return s


def recv_exactly(s, n) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def test_two_thousand_sessions_at_once(server_factory, kazoo_factory):
    s = server_factory({"maxClientCnxns": "0"})
    zk = kazoo_factory(s)
    zk.create("/alive", b"yes")
    sockets = []
    try:
        for _ in range(2000):
            sockets.append(handshake(s.host, s.port))
        # Every one of them is a live session, and others still get answers.
        assert zk.get("/alive")[0] == b"yes"
        assert zk.create("/after", b"") == "/after"
    finally:
        for sock in sockets:
            sock.close()
    assert zk.exists("/after") is not None


def test_a_client_that_never_reads_does_not_grow_the_server(server_factory, kazoo_factory):
    s = server_factory({"maxClientCnxns": "0"})
    zk = kazoo_factory(s)
    zk.create("/big", b"x" * 100_000)
    # Warm up allocations, then measure.
    for _ in range(20):
        zk.get("/big")
    before = rss_bytes(s)
    hog = handshake(s.host, s.port)
    hog.setblocking(False)
    request = frame(request_header(1, Op.getData) + path_watch_body("/big"))
    # 4,000 pipelined reads of 100 KB each would be 400 MB of replies if the
    # server buffered them; it must instead stop reading from this client.
    deadline = time.monotonic() + 10
    pending = request * 4000
    while pending and time.monotonic() < deadline:
        try:
            pending = pending[hog.send(pending[:65536]):]
        except BlockingIOError:
            time.sleep(0.05)
    time.sleep(1)
    grown = rss_bytes(s) - before
    assert grown < 64 * 1024 * 1024, f"server grew by {grown >> 20} MB for one stalled client"
    # Everyone else is still served, writes included.
    assert zk.get("/big")[0] == b"x" * 100_000
    zk.set("/big", b"y")
    hog.close()
    assert zk.get("/big")[0] == b"y"


BIG_BUFFER = {"jute.maxbuffer": str(64 * 1024 * 1024)}


def test_a_multi_of_100k_operations(server_factory, raw_factory):
    s = server_factory(BIG_BUFFER)
    c = raw_factory(s, timeout_ms=30000, io_timeout=60)
    assert c.create("/m")[0] == 0
    ops = [m_create(f"/m/n{i:06d}") for i in range(100_000)]
    err, results = c.multi(ops)
    assert err == 0 and len(results) == 100_000
    assert c.get_all_children_number("/m") == (0, 100_000)
    # All or nothing: the last of another 100k fails, so none is created.
    ops = [m_create(f"/m/o{i:06d}") for i in range(99_999)] + [m_create("/m/n000000")]
    err, results = c.multi(ops)
    assert results[-1][0] == "error"
    assert c.get_all_children_number("/m") == (0, 100_000)


def test_a_znode_with_100k_children(server_factory, raw_factory):
    s = server_factory(BIG_BUFFER)
    c = raw_factory(s, timeout_ms=30000, io_timeout=60)
    assert c.create("/wide")[0] == 0
    for batch in range(10):
        err, _ = c.multi([m_create(f"/wide/c{batch * 10_000 + i:06d}")
                          for i in range(10_000)])
        assert err == 0
    err, children, stat = c.get_children("/wide")
    assert err == 0 and len(children) == 100_000 and stat.numChildren == 100_000
    assert sorted(children)[-1] == "c099999"
    # Ephemeral children of one session, gone with it.
    e = raw_factory(s, timeout_ms=30000, io_timeout=60)
    err, _ = e.multi([m_create(f"/wide/e{i:05d}", mode=CreateMode.EPHEMERAL)
                      for i in range(10_000)])
    assert err == 0
    e.close()
    assert c.get_all_children_number("/wide") == (0, 100_000)
