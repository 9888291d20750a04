"""Sessions: timeout negotiation, expiry, close, resume, move, restarts."""

import threading
import time

import pytest
from kazoo.protocol.states import EventType, KazooState

from zkharness import children_counts_while, wait_until
from zkwire import CreateMode, RawClient

# A server with short ticks so that expiry tests are quick.
FAST = {"tickTime": "200", "minSessionTimeout": "1000", "maxSessionTimeout": "20000"}


def test_default_timeout_bounds_are_2_and_20_ticks(server_factory, raw_factory):
    s = server_factory({"tickTime": "2000"})
    for asked, got in [(1, 4000), (3999, 4000), (4000, 4000), (12345, 12345),
                       (40000, 40000), (40001, 40000), (600000, 40000),
                       (0, 4000), (-5, 4000)]:
        c = raw_factory(s, timeout_ms=asked)
        assert c.negotiated_timeout == got, asked
        c.close()


def test_configured_timeout_bounds(server_factory, raw_factory):
    s = server_factory({"tickTime": "1000", "minSessionTimeout": "5000",
                        "maxSessionTimeout": "8000"})
    for asked, got in [(1000, 5000), (6000, 6000), (60000, 8000)]:
        c = raw_factory(s, timeout_ms=asked)
        assert c.negotiated_timeout == got, asked
        c.close()


def test_connect_response_fields(server, raw_factory):
    c = raw_factory(server, timeout_ms=10000)
    assert c.protocol_version == 0
    assert c.session_id != 0
    assert len(c.passwd) == 16
    assert c.read_only is False
    c2 = raw_factory(server, timeout_ms=10000)
    assert c2.session_id != c.session_id


def test_expiry_removes_ephemerals_and_fires_watches(server_factory, raw_factory,
                                                     kazoo_factory):
    s = server_factory(FAST)
    watcher = kazoo_factory(s)
    watcher.create("/dir", b"")
    doomed = raw_factory(s, timeout_ms=1000)
    assert doomed.negotiated_timeout == 1000
    assert doomed.create("/dir/eph", b"x", mode=CreateMode.EPHEMERAL)[0] == 0
    assert doomed.create("/dir/seq-", mode=CreateMode.EPHEMERAL_SEQUENTIAL)[0] == 0

    data_events, child_events = [], []
    got_data, got_child = threading.Event(), threading.Event()

    def on_data(ev):
        data_events.append(ev)
        got_data.set()

    def on_child(ev):
        child_events.append(ev)
        got_child.set()

    assert watcher.exists("/dir/eph", watch=on_data) is not None
    assert len(watcher.get_children("/dir", watch=on_child)) == 2

    t0 = time.monotonic()
    doomed.stop_pings()  # the socket stays open but goes silent
    assert got_data.wait(15), "no watch event after the session expired"
    assert got_child.wait(15)
    elapsed = time.monotonic() - t0
    assert 0.5 <= elapsed <= 10, elapsed
    assert data_events[0].type == EventType.DELETED
    assert data_events[0].path == "/dir/eph"
    assert child_events[0].type == EventType.CHILD
    assert child_events[0].path == "/dir"
    assert watcher.get_children("/dir") == []
    # the server closes the expired session's connection
    assert doomed.wait_closed(10)
    # and the session can not be resumed
    again = RawClient(s.host, s.port, session_id=doomed.session_id,
                      passwd=doomed.passwd)
    assert again.negotiated_timeout == 0
    assert again.session_id == 0
    assert again.wait_closed(5)


def test_pings_keep_a_session_alive(server_factory, raw_factory, kazoo_factory):
    s = server_factory(FAST)
    c = raw_factory(s, timeout_ms=2000)
    assert c.create("/alive", mode=CreateMode.EPHEMERAL)[0] == 0
    time.sleep(5.0)  # 2.5 session timeouts, with pings every ~670 ms
    assert not c.closed
    assert c.exists("/alive")[0] == 0
    other = kazoo_factory(s)
    assert other.exists("/alive").ephemeralOwner == c.session_id


def test_close_removes_ephemerals_at_once(server, raw_factory, kazoo_factory, root):
    watcher = kazoo_factory(server)
    c = raw_factory(server)
    assert c.create(f"{root}/e", mode=CreateMode.EPHEMERAL)[0] == 0
    fired = threading.Event()
    watcher.exists(f"{root}/e", watch=lambda ev: fired.set())
    rep = c.request(-11)  # closeSession
    assert rep.err == 0
    assert c.wait_closed(5), "the server closes the connection after closeSession"
    assert fired.wait(5)
    assert watcher.exists(f"{root}/e") is None
    again = RawClient(server.host, server.port, session_id=c.session_id,
                      passwd=c.passwd)
    assert again.negotiated_timeout == 0
    again.close_socket()


def test_kazoo_stop_removes_ephemerals(server, kazoo_factory, root):
    a = kazoo_factory(server)
    b = kazoo_factory(server)
    a.create(f"{root}/a", b"", ephemeral=True)
    a.stop()
    assert b.exists(f"{root}/a") is None


def test_resume_session_on_new_connection(server, raw_factory, kazoo_factory, root):
    first = raw_factory(server, timeout_ms=20000)
    assert first.create(f"{root}/e", mode=CreateMode.EPHEMERAL)[0] == 0
    second = raw_factory(server, timeout_ms=20000, session_id=first.session_id,
                         passwd=first.passwd)
    assert second.session_id == first.session_id
    assert second.passwd == first.passwd
    assert second.negotiated_timeout == 20000
    # the server drops the session's previous connection
    assert first.wait_closed(5)
    assert second.exists(f"{root}/e")[1].ephemeralOwner == first.session_id
    # still the owner: can create more ephemerals, and closing removes all
    assert second.create(f"{root}/e2", mode=CreateMode.EPHEMERAL)[0] == 0
    second.close()
    other = kazoo_factory(server)
    assert other.get_children(root) == []


def test_resume_with_wrong_password_is_refused(server, raw_factory):
    first = raw_factory(server)
    bad = RawClient(server.host, server.port, session_id=first.session_id,
                    passwd=bytes(16))
    assert bad.negotiated_timeout == 0
    assert bad.session_id == 0
    assert bad.wait_closed(5)


def test_unknown_session_is_refused(server):
    bad = RawClient(server.host, server.port, session_id=0x7777000011112222,
                    passwd=b"\x01" * 16)
    assert bad.negotiated_timeout == 0
    assert bad.wait_closed(5)


def test_client_ahead_of_server_is_refused(server):
    """A client that has seen a later zxid than the server must not get a
    session there (it would go back in time): the server closes."""
    import socket
    from zkwire import connect_request, frame, read_until_close
    with socket.create_connection((server.host, server.port), timeout=5) as s:
        s.sendall(frame(connect_request(10000, last_zxid=1 << 60)))
        data, closed = read_until_close(s, 5)
    assert closed
    assert data == b""


@pytest.mark.paddock_only("ZooKeeper refuses at once; Paddock waits a moment for the zxid")
def test_client_just_ahead_of_server_is_served_once_it_catches_up(server_factory):
    """Right after a leader change the server a client moves to may be a
    few milliseconds behind the one it left.  Paddock holds the handshake
    of a client that has seen a newer zxid for up to 250 ms; once the
    server has applied that zxid, the session is created. A server of its
    own: on the shared one an earlier test's session can expire between
    the two creates, a txn that moves the zxid past the one counted on."""
    import socket
    from zkwire import connect_request, frame, read_until_close
    server = server_factory()
    writer = RawClient(server.host, server.port)
    try:
        assert writer.create("/ahead-1", b"")[0] == 0
        next_zxid = writer.last_zxid + 1
        with socket.create_connection((server.host, server.port), timeout=5) as s:
            s.sendall(frame(connect_request(10000, last_zxid=next_zxid)))
            time.sleep(0.05)
            assert writer.create("/ahead-2", b"")[0] == 0
            assert writer.last_zxid == next_zxid
            data, closed = read_until_close(s, 1)
    finally:
        writer.close()
    assert not closed, "the server refused a client it had caught up with"
    assert len(data) > 4, "no connect response"


def _wait_state(client, state, timeout=30):
    return wait_until(lambda: client.state == state, timeout)


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_session_survives_server_restart(server_factory, kazoo_factory, kill):
    # ZooKeeper 3.8 leaves a connection that arrives while it starts open
    # and unanswered (its close throws half way), and kazoo gives each
    # attempt the session timeout over the number of hosts: with one host
    # that attempt waits out the session, which ZooKeeper, having restored
    # it with a fresh timeout at its start, then expires. Listing the server
    # twice halves an attempt, so the next one comes while the session
    # lives.
    s = server_factory({"maxSessionTimeout": "120000"})
    zk = kazoo_factory(s, timeout=90.0, hosts=f"{s.hosts},{s.hosts}")
    zk.create("/eph", b"e", ephemeral=True)
    zk.create("/persist", b"p")
    sid = zk.client_id
    states = []
    zk.add_listener(states.append)
    s.restart(kill=kill)
    assert _wait_state(zk, KazooState.CONNECTED, timeout=90), \
        f"kazoo did not reconnect\n{s.stderr_tail()}"
    assert zk.client_id == sid
    assert KazooState.SUSPENDED in states
    assert KazooState.LOST not in states
    assert zk.get("/persist")[0] == b"p"
    st = zk.exists("/eph")
    assert st is not None and st.ephemeralOwner == sid[0]
    zk.set("/persist", b"after")
    # closing the resumed session still removes its ephemerals
    other = kazoo_factory(s)
    zk.stop()
    assert other.exists("/eph") is None


def test_session_expires_while_server_is_down(server_factory, raw_factory,
                                              kazoo_factory):
    """After a restart every session gets a fresh full timeout; a client
    that never comes back is expired and its ephemerals go."""
    s = server_factory(FAST)
    c = raw_factory(s, timeout_ms=1500)
    assert c.create("/gone", mode=CreateMode.EPHEMERAL)[0] == 0
    c.close_socket()  # disappear without closing the session
    s.restart()
    other = kazoo_factory(s)
    assert wait_until(lambda: other.exists("/gone") is None, timeout=15)


def test_max_client_connections(server_factory, raw_factory):
    s = server_factory({"maxClientCnxns": "2"})
    a = raw_factory(s)
    b = raw_factory(s)
    with pytest.raises((ConnectionError, OSError)):
        # the third connection from this address is closed at once
        c = RawClient(s.host, s.port, io_timeout=5)
        c.close_socket()
    b.close()
    time.sleep(0.5)
    c = raw_factory(s)
    assert c.exists("/")[0] == 0
    assert a.exists("/")[0] == 0


def test_closing_a_session_with_many_ephemerals_is_one_step(server, raw_factory,
                                                            kazoo_factory, root):
    """A session's ephemerals all go at once when it closes, however many
    (a server may apply such a close apart from small txns), and every
    watch on them fires."""
    owner = raw_factory(server)
    watcher, reader = kazoo_factory(server), kazoo_factory(server)
    paths = [f"{root}/e{i:03}" for i in range(200)]
    for p in paths:
        assert owner.create(p, mode=CreateMode.EPHEMERAL)[0] == 0
    deleted = threading.Semaphore(0)
    for p in paths:
        watcher.exists(p, watch=lambda event: deleted.release())

    def close():
        assert owner.request(-11).err == 0  # closeSession

    seen = children_counts_while(reader, root, 0, close)
    assert seen[-1] == 0, "the ephemerals never went"
    assert set(seen) <= {0, len(paths)}, f"a reader saw part of a close: {sorted(set(seen))}"
    for _ in paths:
        assert deleted.acquire(timeout=5), "a NodeDeleted event is missing"
