"""Limits on load, under ZooKeeper's zoo.cfg keys: connections per address
(maxClientCnxns) and in all (maxCnxns), the connection throttle
(connection_throttle_*), the accept queue (clientPortListenBacklog),
requests in process (globalOutstandingLimit) and the request throttler
(request_throttle_max_requests with throttled_op_wait_time). Each a client over a limit sees as ZooKeeper's
clients see it, and nobody else notices."""

import socket
import subprocess
import threading
import time

import pytest

from conftest import make_kazoo
from zkharness import paddock_bin
from zkwire import Op, RawClient, Writer, connect_request, frame

THROTTLED = -127

LIMIT = {"maxClientCnxns": "3"}


def connect_past_the_limit(server):
    """A socket to a server past its limit, or None when the server closed
    it while it was still connecting (EPIPE or a reset from connect, which
    ZooKeeper's quick close can cause)."""
    try:
        return socket.create_connection((server.host, server.port), timeout=5)
    except (BrokenPipeError, ConnectionResetError):
        return None


def closed_without_answer(sock, timeout=5.0) -> bool:
    if sock is None:
        return True
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
    assert closed_without_answer(connect_past_the_limit(s))
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


def mntr(server) -> dict:
    return dict(line.split("\t", 1) for line in server.four_letter("mntr").splitlines()
                if "\t" in line)


def test_connections_over_the_server_limit_are_closed(server_factory):
    s = server_factory({"maxCnxns": "2"})
    first = RawClient(s.host, s.port)
    idle = socket.create_connection((s.host, s.port), timeout=5)
    time.sleep(0.5)  # ZooKeeper counts a socket once its selector has it
    assert closed_without_answer(connect_past_the_limit(s))
    assert first.exists("/")[0] == 0
    idle.close()
    time.sleep(0.5)
    assert int(mntr(s)["zk_connection_rejected"]) >= 1
    first.close_socket()


@pytest.mark.paddock_only("the open-files reserve is Paddock's; the limit is set on its binary")
def test_a_connection_storm_leaves_the_server_the_files_it_needs(server_factory, tmp_path,
                                                                  monkeypatch):
    """With 256 open files, client sockets may take 192: past that a
    connection is refused, and the log and snapshots (a snapshot every 20
    writes) still open their files, so writes go on."""
    limited = tmp_path / "paddock-with-256-files"
    limited.write_text(f'#!/bin/sh\nexec prlimit --nofile=256:256 -- {paddock_bin()} "$@"\n')
    limited.chmod(0o755)
    monkeypatch.setenv("PADDOCK_BIN", str(limited))
    s = server_factory({"maxClientCnxns": "0", "snapCount": "20"})
    writer = make_kazoo(s)
    flood = [socket.create_connection((s.host, s.port), timeout=5) for _ in range(300)]
    for n in range(100):
        writer.create(f"/after-the-storm-{n}", b"x" * 100)
    assert s.proc.poll() is None, s.stderr_tail()
    for sock in flood:
        sock.close()
    time.sleep(0.5)
    assert int(mntr(s)["zk_connection_rejected"]) >= 300 - 192
    assert "raise the limit (ulimit -n, LimitNOFILE)" in s.log_path.read_text()
    assert len(writer.get_children("/")) == 101
    writer.stop()


def test_the_connection_throttle_refuses_handshakes_past_its_tokens(server_factory):
    # Two tokens, and the next one ten minutes away.
    s = server_factory({"connection_throttle_tokens": "2",
                        "connection_throttle_fill_time": "600000",
                        "connection_throttle_fill_count": "1"})
    admitted = [RawClient(s.host, s.port) for _ in range(2)]
    refused = socket.create_connection((s.host, s.port), timeout=5)
    refused.sendall(frame(connect_request()))
    assert closed_without_answer(refused), "the third handshake is not answered"
    for client in admitted:
        assert client.exists("/")[0] == 0, "admitted sessions keep working"
    stats = mntr(s)
    assert int(stats["zk_connection_rejected"]) == 1
    assert int(stats["zk_connection_request_count"]) == 2
    for client in admitted:
        client.close()


def accept_queue_length(port) -> int:
    """The accept queue of the socket listening on `port`, as the kernel
    holds it (`ss` shows it as a listener's Send-Q)."""
    out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], check=True,
                         capture_output=True, text=True).stdout
    return int(out.split()[2])


def test_the_accept_queue_is_as_long_as_clientportlistenbacklog(server_factory):
    s = server_factory({"clientPortListenBacklog": "100"})
    assert accept_queue_length(s.port) == 100
    conf = dict(line.split("=", 1) for line in s.four_letter("conf").splitlines()
                if "=" in line)
    assert conf["clientPortListenBacklog"] == "100"
    zk = make_kazoo(s)
    zk.start()
    assert zk.create("/backlog") == "/backlog"
    zk.stop()
    zk.close()


def pipelined_sets(client, path, count):
    body = Writer().string(path).buffer(b"v" * 100).int(-1).bytes()
    xids = client.submit_all(Op.setData, [body] * count)
    return [client.wait_reply(xid, timeout=60).err for xid in xids]


def test_requests_held_past_the_wait_time_are_answered_throttled(server_factory):
    s = server_factory({"request_throttle_max_requests": "1",
                        "throttled_op_wait_time": "1"})
    c = RawClient(s.host, s.port)
    # Even a lone request can wait past 1 ms on a cold or loaded server; a
    # throttled create is not applied, so it is sent again.
    creates_throttled = 0
    while (err := c.create("/throttled", b"")[0]) == THROTTLED and creates_throttled < 100:
        creates_throttled += 1
    assert err == 0
    errors = pipelined_sets(c, "/throttled", 50)
    assert set(errors) <= {0, THROTTLED}, errors
    # They arrive together and pass one at a time, so the later ones wait
    # past 1 ms. ZooKeeper counts the wait from a request's arrival: on a
    # loaded machine even the first one can be past it when it leaves the
    # throttler, so which ones are throttled is timing; that some are is not.
    assert THROTTLED in errors, "requests waited on each other past 1 ms"
    # A throttled request is not applied. Reads pass the throttler too, so
    # on a loaded machine the exists that checks this may itself be throttled.
    exists_throttled = 0
    while (reply := c.exists("/throttled"))[0] == THROTTLED and exists_throttled < 100:
        exists_throttled += 1
    err, stat = reply
    assert (err, stat.version) == (0, errors.count(0))
    throttled = creates_throttled + errors.count(THROTTLED) + exists_throttled
    assert int(mntr(s)["zk_throttled_ops"]) == throttled
    c.close()


def test_past_the_outstanding_limit_a_busy_connection_waits_and_others_do_not(
        server_factory):
    s = server_factory({"globalOutstandingLimit": "1"})
    busy, other = RawClient(s.host, s.port), RawClient(s.host, s.port)
    assert busy.create("/busy", b"")[0] == 0
    results = {}
    writer = threading.Thread(
        target=lambda: results.setdefault("errors", pipelined_sets(busy, "/busy", 500)))
    writer.start()
    reads = 0
    while writer.is_alive():
        assert other.exists("/busy")[0] == 0, "a connection with nothing in process is read"
        reads += 1
    writer.join()
    assert results["errors"] == [0] * 500, "the busy connection only waited"
    assert busy.exists("/busy")[1].version == 500
    assert reads > 0
    assert mntr(s)["zk_outstanding_requests"] == "0"
    busy.close()
    other.close()


def test_large_requests_past_their_maximum_close_the_connection(server_factory):
    # Requests over 1000 bytes are large; 3000 bytes of them at once at most.
    s = server_factory({"largeRequestThreshold": "1000", "largeRequestMaxBytes": "3000"})
    c = RawClient(s.host, s.port)
    assert c.create("/large", b"")[0] == 0
    body = Writer().string("/large").buffer(b"v" * 2000).int(-1).bytes()
    try:
        # In one write, so that the second arrives while the first is in
        # process: sent one at a time, each could be answered before the
        # next arrived, as on a fast machine they were.
        xids = c.submit_all(Op.setData, [body] * 10)
    except ConnectionError:
        # The server closed the connection while the client still sent
        # (a server that reads fast): the outcome expected below.
        xids = []
    errors = []
    for xid in xids:
        try:
            errors.append(c.wait_reply(xid, timeout=30).err)
        except ConnectionError:
            break
    # The second is past the maximum while the first is in process: the
    # connection closes at once, the first one's answer with it.
    assert c.wait_closed(10), "one past the maximum closes the connection"
    assert errors in ([], [0]), errors
    assert int(mntr(s)["zk_large_requests_rejected"]) >= 1
    # Small requests are not large; the server serves on, the first large
    # request applied.
    other = RawClient(s.host, s.port)
    err, stat = other.exists("/large")
    assert err == 0 and stat.version >= 1
    assert other.set_data("/large", b"small")[0] == 0
    other.close()
