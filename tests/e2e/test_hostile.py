"""Hostile clients and resource limits: thousands of connections, a client
that never reads its replies, a multi of 100,000 operations, a znode with a
million children. Each must cost the server nothing beyond that client,
and every other client keeps being served."""

import collections
import itertools
import socket
import threading
import time

import pytest

from zkwire import (CreateMode, Op, connect_request, frame, m_create, m_delete,
                    multi_body, path_watch_body, request_header)


def rss_bytes(server, field="VmRSS") -> int:
    """The server's resident memory now, or at its peak with "VmHWM"."""
    with open(f"/proc/{server.proc.pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field}")


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


class Bystander(threading.Thread):
    """A client with nothing to do with the big work: sets and reads back its
    own znode in a loop, timing every round trip."""

    def __init__(self, client):
        super().__init__(daemon=True)
        self.client = client
        self.stopping = threading.Event()
        self.round_trips = 0
        self.slowest = 0.0
        self.failure = None

    def run(self):
        try:
            assert self.client.create("/bystander")[0] == 0
            while not self.stopping.is_set():
                value = str(self.round_trips).encode()
                start = time.monotonic()
                assert self.client.set_data("/bystander", value)[0] == 0
                assert self.client.get_data("/bystander")[1] == value
                self.slowest = max(self.slowest, time.monotonic() - start)
                self.round_trips += 1
                self.stopping.wait(0.1)  # a steady trickle, not a flood
        except Exception as e:  # reported by stop()
            self.failure = e

    def stop(self):
        self.stopping.set()
        self.join(60)
        assert self.failure is None, f"the other client failed: {self.failure!r}"


def in_multis(client, ops, size=10_000) -> set:
    """Sends the operations `ops` yields as multis of `size`, two in flight so
    the client encodes the next while the server applies the previous.
    Returns the set of the multis' reply error codes."""
    ops = iter(ops)
    errors, in_flight = set(), collections.deque()
    while batch := list(itertools.islice(ops, size)):
        in_flight.append(client.submit(Op.multi, multi_body(batch)))
        if len(in_flight) == 2:
            errors.add(client.wait_reply(in_flight.popleft()).err)
    return errors | {client.wait_reply(xid).err for xid in in_flight}


MILLION = 1_000_000


@pytest.mark.timeout(240)
def test_a_znode_with_a_million_children(server_factory, raw_factory):
    """A znode gets a million children, created and then deleted in multis of
    10,000, on a server with the default configuration. Every create
    succeeds; getAllChildrenNumber, numChildren and cversion count them;
    getChildren answers with all million names in one reply of about 12 MB,
    as Apache ZooKeeper does (jute.maxbuffer bounds what a server reads, not
    what it writes); a sequential child is numbered by the parent's count of
    creates ever, not by its number of children; another session's
    ephemeral children go with it; a second client is answered throughout;
    and the server needs less than 1.5 KB a child."""
    s = server_factory()
    rss_at_start = rss_bytes(s)
    c = raw_factory(s, timeout_ms=30000, io_timeout=120)
    bystander = Bystander(raw_factory(s, timeout_ms=30000, io_timeout=30))
    bystander.start()
    assert c.create("/wide")[0] == 0
    names = [f"c{i:07d}" for i in range(MILLION)]
    trips = bystander.round_trips
    assert in_multis(c, (m_create(f"/wide/{name}") for name in names)) == {0}
    assert bystander.round_trips > trips, "the other client waited for all the creates"
    assert c.get_all_children_number("/wide") == (0, MILLION)
    stat = c.exists("/wide")[1]
    assert (stat.numChildren, stat.cversion) == (MILLION, MILLION)

    rss_before_listing = rss_bytes(s)
    err, children, stat = c.get_children("/wide")
    assert err == 0 and stat.numChildren == MILLION
    assert len(children) == MILLION and sorted(children) == names
    # Answering it cost at most ten times its size.
    listing_cost = rss_bytes(s, "VmHWM") - rss_before_listing
    assert listing_cost < 128 << 20, f"{listing_cost >> 20} MB to list the children"

    # Sequence numbers count creates, so this is the million-and-first.
    err, path, _ = c.create("/wide/seq-", mode=CreateMode.PERSISTENT_SEQUENTIAL)
    assert path == "/wide/seq-0001000000"
    e = raw_factory(s, timeout_ms=30000, io_timeout=60)
    err, _ = e.multi([m_create(f"/wide/e{i:05d}", mode=CreateMode.EPHEMERAL)
                      for i in range(10_000)])
    assert err == 0
    assert c.get_all_children_number("/wide") == (0, MILLION + 10_001)
    e.close()
    assert c.get_all_children_number("/wide") == (0, MILLION + 1)

    trips = bystander.round_trips
    assert in_multis(c, (m_delete(f"/wide/{name}") for name in names)) == {0}
    assert bystander.round_trips > trips, "the other client waited for all the deletes"
    assert c.delete(path) == 0
    assert c.get_all_children_number("/wide") == (0, 0)
    # cversion as clients see it counts creates and deletes: 1,010,001 each.
    stat = c.exists("/wide")[1]
    assert (stat.numChildren, stat.cversion) == (0, 2 * (MILLION + 10_001))
    err, path, _ = c.create("/wide/seq-", mode=CreateMode.PERSISTENT_SEQUENTIAL)
    assert path == f"/wide/seq-{MILLION + 10_001:010d}"

    # A multi of 10,000 takes well under a second even in a debug build; the
    # other client may wait behind the two in flight, not behind them all.
    bystander.stop()
    assert bystander.slowest < 10, f"the other client waited {bystander.slowest:.1f} s"
    # Paddock's debug build needs about 0.5 KB a child; Apache ZooKeeper's
    # JVM grows to its 1000 MB heap.
    peak = rss_bytes(s, "VmHWM") - rss_at_start
    assert peak < MILLION * 1536, f"the server grew by {peak >> 20} MB"
