"""A replicated ensemble seen from its clients: every server shows every
write, watches and ephemerals work across servers, sessions are global,
sequential numbers are unique, multis go through followers, observers serve
reads and forward writes.  Failures are in test_ensemble_faults.py.

The 3- and 5-server ensembles (and the 3+1 observer one) are shared by the
tests of this module; each test works under its own root path.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
import uuid

import pytest

from ensemble import Ensemble, TICK_TIME, wait_for
from zkharness import ZK_CLI, ZK_JARS, paddock_bin
from zkwire import CreateMode, Err, EventType as Ev, RawClient

from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, NoAuthError
from kazoo.protocol.states import EventType

pytestmark = pytest.mark.paddock_only("ensembles are configured the Paddock way")

needs_zkcli = pytest.mark.skipif(
    not (os.path.exists(ZK_CLI) and os.path.exists(f"{ZK_JARS}/zookeeper.jar")),
    reason="Debian's zookeeper package is not installed (apt-get install zookeeper)")


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module", params=[3, 5], ids=["3servers", "5servers"])
def ens(request, tmp_path_factory):
    e = Ensemble(tmp_path_factory.mktemp(f"ens{request.param}"), voters=request.param)
    try:
        e.start()
    except Exception:
        e.close()
        raise
    yield e
    e.close()


@pytest.fixture(scope="module")
def obs_ens(tmp_path_factory):
    e = Ensemble(tmp_path_factory.mktemp("obs"), voters=3, observers=1)
    try:
        e.start()
    except Exception:
        e.close()
        raise
    yield e
    e.close()


@pytest.fixture(autouse=True)
def _server_logs(request):
    """Closes the test's kazoo clients; fails the test (at teardown) if a
    server died during it; prints what the servers logged during the test
    (pytest shows it only when the test fails)."""
    ensembles = [request.getfixturevalue(n) for n in ("ens", "obs_ens")
                 if n in request.fixturenames]
    marks = [(e, e.log_marks()) for e in ensembles]
    yield
    for e, m in marks:
        e.close_clients()
        print(f"\n===== ensemble in {e.workdir}: {e.states()}\n{e.log_since(m)}")
    for e, _ in marks:
        e.check_alive()


@pytest.fixture
def root(request, ens):
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:50]
    path = f"/t-{name}-{uuid.uuid4().hex[:6]}"
    ens.client(ens.leader()).create(path, b"")
    return path


@pytest.fixture
def raws():
    clients = []
    yield clients
    for c in clients:
        try:
            c.close()
        except Exception:
            pass


def clients_per_member(ens):
    """One kazoo client connected to each server (that server only)."""
    return {m.id: ens.client(m) for m in ens.members}


def synced_get(c, path):
    c.sync(path)
    return c.get(path)


# ---------------------------------------------------------------- basics

def test_every_server_reports_a_mode_and_one_leader(ens):
    modes = {m.id: m.mode() for m in ens.members}
    assert sorted(modes.values()).count("leader") == 1, modes
    assert set(modes.values()) <= {"leader", "follower"}, modes


def test_writes_through_each_server_are_seen_on_all_after_sync(ens, root):
    clients = clients_per_member(ens)
    for sid, c in clients.items():
        c.create(f"{root}/from-{sid}", f"created via {sid}".encode())
        c.set(f"{root}/from-{sid}", f"set via {sid}".encode())
    # Every server, right after a sync, sees every write made anywhere.
    for reader_id, c in clients.items():
        c.sync(root)
        children = sorted(c.get_children(root))
        assert children == sorted(f"from-{sid}" for sid in clients), (reader_id, children)
        for sid in clients:
            data, stat = c.get(f"{root}/from-{sid}")
            assert data == f"set via {sid}".encode(), (reader_id, sid)
            assert stat.version == 1
    ens.assert_trees_identical(root=root)


def test_read_your_write_on_another_server_after_sync(ens, root):
    """Alternate the server for each write and read back on the next one:
    a write acknowledged by one server is visible on any other after sync."""
    clients = list(clients_per_member(ens).values())
    path = f"{root}/counter"
    clients[0].create(path, b"0")
    for i in range(1, 31):
        writer = clients[i % len(clients)]
        reader = clients[(i + 1) % len(clients)]
        writer.set(path, str(i).encode())
        data, stat = synced_get(reader, path)
        assert data == str(i).encode(), f"write {i}: server read {data!r}"
        assert stat.version == i


def test_watch_on_one_server_fires_for_change_through_another(ens, root):
    a, b = ens.members[0], ens.members[-1]
    ca, cb = ens.client(a), ens.client(b)
    path = f"{root}/watched"
    events = []
    got = {k: threading.Event() for k in ("created", "changed", "child", "deleted")}

    def on_exists(ev):
        events.append(("exists", ev))
        got["created"].set()

    def on_data(ev):
        if ev.type == "NONE":      # kazoo passes connection states too
            return
        events.append(("data", ev))
        got["changed" if ev.type == EventType.CHANGED else "deleted"].set()

    def on_child(ev):
        events.append(("child", ev))
        got["child"].set()

    assert ca.exists(path, watch=on_exists) is None
    cb.create(path, b"v0")
    assert got["created"].wait(10), f"exists watch on {a.name} did not fire: {events}"
    assert events[-1][1].type == EventType.CREATED

    ca.get(path, watch=on_data)
    ca.get_children(path, watch=on_child)
    cb.set(path, b"v1")
    assert got["changed"].wait(10), f"data watch did not fire: {events}"
    # ZooKeeper's ordering: once A delivered the event, A serves the new
    # data (no sync needed).
    assert ca.get(path)[0] == b"v1"

    cb.create(f"{path}/kid", b"")
    assert got["child"].wait(10), f"child watch did not fire: {events}"
    assert ca.get_children(path) == ["kid"]

    ca.get(path, watch=on_data)
    cb.delete(f"{path}/kid")
    cb.delete(path)
    assert got["deleted"].wait(10), f"delete did not fire the data watch: {events}"
    assert ca.exists(path) is None


def _watch_for_deletion(watch_clients, path):
    """Sets an exists watch on `path` through each client; returns a dict
    sid -> Event set when that server tells the node was deleted."""
    fired = {}
    for sid, c in watch_clients.items():
        ev = threading.Event()
        fired[sid] = ev

        def watcher(event, ev=ev):
            if event.type == EventType.DELETED:
                ev.set()

        c.sync(path)
        assert c.exists(path, watch=watcher) is not None, \
            f"server.{sid} does not show {path} after sync"
    return fired


def test_ephemeral_disappears_everywhere_when_its_session_closes(ens, root, raws):
    owner_server = ens.members[-1]
    watchers = clients_per_member(ens)
    raw = RawClient(owner_server.host, owner_server.port, timeout_ms=4000)
    raws.append(raw)
    path = f"{root}/eph"
    err, _, stat = raw.create(path, b"mine", mode=CreateMode.EPHEMERAL)
    assert err == 0
    assert stat.ephemeralOwner == raw.session_id
    fired = _watch_for_deletion(watchers, path)
    for sid, c in watchers.items():
        assert c.exists(path).ephemeralOwner == raw.session_id, sid
    raw.close()   # closeSession, waits for the reply
    # closeSession is acknowledged once the ephemerals are gone: any server,
    # after a sync, no longer has the node.
    for sid, c in watchers.items():
        c.sync(root)
        assert c.exists(path) is None, f"ephemeral still on server.{sid} after close+sync"
        assert fired[sid].wait(10), f"server.{sid} did not fire the delete watch"
    ens.assert_trees_identical(root=root)


def test_ephemeral_disappears_everywhere_when_its_session_expires(ens, root, raws):
    """A client that goes silent (no pings) on a follower: the leader
    expires the session and every server drops its ephemeral."""
    owner_server = ens.followers()[0]
    watchers = clients_per_member(ens)
    # 5 ticks: long enough to arm the watches below before it expires
    raw = RawClient(owner_server.host, owner_server.port, timeout_ms=5 * TICK_TIME,
                    pings=False)
    raws.append(raw)
    assert raw.negotiated_timeout == 5 * TICK_TIME
    path = f"{root}/eph"
    err, _, _ = raw.create(path, b"", mode=CreateMode.EPHEMERAL)
    last_heard = time.monotonic()
    assert err == 0
    fired = _watch_for_deletion(watchers, path)
    for sid, ev in fired.items():
        assert ev.wait(15), f"server.{sid}: the silent session's ephemeral is still there"
    elapsed = time.monotonic() - last_heard
    assert elapsed >= raw.negotiated_timeout / 1000.0 * 0.9, \
        f"session expired {elapsed:.3f}s after the client's last request"
    for sid, c in watchers.items():
        c.sync(root)
        assert c.exists(path) is None, sid
    # The expired session cannot be resumed anywhere.
    assert raw.wait_closed(10), "server kept the expired session's connection open"
    for m in ens.members:
        again = RawClient(m.host, m.port, timeout_ms=4000, session_id=raw.session_id,
                          passwd=raw.passwd, io_timeout=5)
        raws.append(again)
        assert again.negotiated_timeout <= 0, f"{m.name} resumed an expired session"
    ens.assert_trees_identical(root=root)


def test_pinging_session_on_a_follower_does_not_expire(ens, root, raws):
    """Only the leader expires sessions; a client that pings a follower
    (or an observer) must stay alive, even with the shortest timeout."""
    follower = ens.followers()[-1]
    raw = RawClient(follower.host, follower.port, timeout_ms=2 * TICK_TIME)
    raws.append(raw)
    path = f"{root}/alive"
    assert raw.create(path, b"", mode=CreateMode.EPHEMERAL)[0] == 0
    time.sleep(3.0)   # 7.5 session timeouts
    assert not raw.closed, "the follower closed a session that kept pinging"
    err, stat = raw.exists(path)
    assert err == 0 and stat.ephemeralOwner == raw.session_id
    c = ens.client(ens.leader())
    c.sync(path)
    assert c.exists(path) is not None, "the leader expired a session pinging a follower"


def resume(raws, member, session_id, passwd, last_zxid, timeout=10.0):
    """Resumes a session on `member`.  Like ZooKeeper, a server that has not
    yet applied the client's last seen zxid closes the connection ("client
    should try another server"); retry until it has caught up."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            c = RawClient(member.host, member.port, timeout_ms=4000,
                          session_id=session_id, passwd=passwd,
                          last_zxid=last_zxid, io_timeout=5)
        except ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
            continue
        raws.append(c)
        return c


def test_session_resumes_on_another_server(ens, root, raws):
    a, b = ens.members[0], ens.members[-1]
    first = RawClient(a.host, a.port, timeout_ms=4000)
    raws.append(first)
    path = f"{root}/eph"
    assert first.create(path, b"x", mode=CreateMode.EPHEMERAL)[0] == 0
    last_zxid = first.last_zxid
    # Move the session while the old connection is still open: the old
    # server must close it (ZooKeeper's session-moved rule).
    second = resume(raws, b, first.session_id, first.passwd, last_zxid)
    assert second.negotiated_timeout > 0, f"{b.name} refused to resume the session"
    assert second.session_id == first.session_id
    assert first.wait_closed(10), f"{a.name} kept the moved session's old connection"
    err, stat = second.exists(path)
    assert err == 0 and stat.ephemeralOwner == first.session_id
    err, _, _ = second.create(f"{path}-2", b"", mode=CreateMode.EPHEMERAL)
    assert err == 0
    # A wrong password is refused everywhere.
    bad = RawClient(a.host, a.port, timeout_ms=4000, session_id=first.session_id,
                    passwd=b"\x01" * 16, io_timeout=5)
    raws.append(bad)
    assert bad.negotiated_timeout <= 0, "resumed a session with a wrong password"
    second.close()
    c = ens.client(a)
    c.sync(root)
    assert c.get_children(root) == []


def test_kazoo_session_survives_moving_between_servers(ens, root):
    """kazoo given all hosts keeps its session when its server goes away
    (SIGSTOP, so the server neither closes nor answers)."""
    target = ens.followers()[0]
    c = ens.client(target, all_hosts=True)
    states = []
    c.add_listener(states.append)
    session = c.client_id
    c.create(f"{root}/eph", b"", ephemeral=True)
    target.stop()
    try:
        # kazoo notices the silence after 2/3 of the session timeout and
        # reconnects to another server with the same session.
        wait_for(lambda: c.exists_async(root).get(timeout=2) is not None,
                 timeout=15, what="kazoo to reconnect to another server")
        c.create(f"{root}/after", b"")
        assert c.client_id == session
        assert KazooState.LOST not in states, states
        assert c.exists(f"{root}/eph").ephemeralOwner == session[0]
    finally:
        target.cont()
    target.wait_serving()


def test_watches_follow_a_session_to_another_server(ens, root, raws):
    """A client loses its server, the watched nodes change while it is
    away, and it resumes its session on another server re-registering its
    watches with setWatches and its last seen zxid (as the Java client does;
    kazoo 2.11 never sends setWatches): the missed changes fire at once, and
    later changes fire through the new server."""
    a, b = ens.members[0], ens.members[-1]
    other = ens.client(ens.leader())
    data_path, child_path, gone_path = (f"{root}/data", f"{root}/kids", f"{root}/gone")
    for p in (data_path, child_path, gone_path):
        other.create(p, b"v0")
    first = RawClient(a.host, a.port, timeout_ms=4000)
    raws.append(first)
    first.sync(root)
    assert first.get_data(data_path, watch=True)[0] == 0
    assert first.get_children(child_path, watch=True)[0] == 0
    assert first.exists(gone_path, watch=True)[0] == 0
    assert first.exists(f"{root}/later", watch=True)[0] == Err.NONODE
    seen = first.last_zxid
    first.close_socket()          # the connection is lost, not the session
    other.set(data_path, b"v1")
    other.create(f"{child_path}/k", b"")
    other.delete(gone_path)
    second = resume(raws, b, first.session_id, first.passwd, seen)
    assert second.set_watches(seen, data=[data_path, gone_path],
                              exist=[f"{root}/later"], child=[child_path]) == 0
    events = {(e.type, e.path) for e in second.drain_events(1.0)}
    assert events == {(Ev.NodeDataChanged, data_path), (Ev.NodeChildrenChanged, child_path),
                      (Ev.NodeDeleted, gone_path)}, events
    # the exist watch on a node that still does not exist stays armed
    other.create(f"{root}/later", b"")
    ev = second.next_event(10)
    assert (ev.type, ev.path) == (Ev.NodeCreated, f"{root}/later")


def test_sequential_nodes_through_different_servers_are_unique_and_increasing(ens, root):
    clients = list(clients_per_member(ens).values())
    seq_parent = f"{root}/seq"
    clients[0].create(seq_parent, b"")
    made = []
    for i in range(5 * len(clients)):
        p = clients[i % len(clients)].create(f"{seq_parent}/n-", b"", sequence=True)
        made.append(int(p.rsplit("-", 1)[1]))
    assert made == sorted(made) and len(set(made)) == len(made), made
    assert made == list(range(len(made))), f"sequence numbers skip or repeat: {made}"

    # Concurrently, one thread per server: still all different.
    results, errors = [], []

    def worker(c):
        try:
            for _ in range(15):
                results.append(c.create(f"{seq_parent}/n-", b"", sequence=True))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    numbers = [int(p.rsplit("-", 1)[1]) for p in results]
    assert len(set(numbers)) == len(numbers), "duplicate sequence numbers"
    total = len(made) + len(numbers)
    assert sorted(made + numbers) == list(range(total))
    for c in clients:
        c.sync(seq_parent)
        _, stat = c.get(seq_parent)
        assert stat.cversion == total and stat.numChildren == total
    ens.assert_trees_identical(root=root)


def test_pipelined_reads_through_each_server_see_the_writes_before_them_and_none_after(
        ens, root, raws):
    """As in test_crud, on the leader and on each follower, whose writes go
    through the leader and come back to be applied."""
    from pipelining import check_reads_between_writes
    for m in ens.members:
        path = f"{root}/n{m.id}"
        ens.client(m).create(path, b"")
        raw = RawClient(m.host, m.port)
        raws.append(raw)
        check_reads_between_writes(raw, path)


def test_multi_through_a_follower(ens, root):
    follower = ens.followers()[0]
    c = ens.client(follower)
    t = c.transaction()
    t.create(f"{root}/a", b"1")
    t.create(f"{root}/b", b"2")
    t.set_data(f"{root}/a", b"1b")
    t.check(f"{root}/b", 0)
    t.create(f"{root}/s-", b"", sequence=True)
    results = t.commit()
    assert results[:2] == [f"{root}/a", f"{root}/b"]
    assert results[4] == f"{root}/s-0000000002"  # parent cversion is 2 by then
    # A multi that fails applies nothing, anywhere.
    t = c.transaction()
    t.create(f"{root}/c", b"3")
    t.delete(f"{root}/b")
    t.check(f"{root}/a", 7)
    results = t.commit()
    assert isinstance(results[2], BadVersionError), results
    for m in ens.members:
        other = ens.client(m)
        other.sync(root)
        assert sorted(other.get_children(root)) == ["a", "b", "s-0000000002"], m
        data, stat = other.get(f"{root}/a")
        assert (data, stat.version) == (b"1b", 1), m
        # all ops of the first multi carry one zxid
        assert stat.mzxid == other.get(f"{root}/b")[1].czxid
    ens.assert_trees_identical(root=root)


# ---------------------------------------------------------------- observers

def test_observer_reports_its_mode(obs_ens):
    observer = obs_ens.observers[0]
    out = observer.srvr()
    assert "Mode: observer" in out, out
    modes = sorted(m.mode() for m in obs_ens.voters)
    assert modes == ["follower", "follower", "leader"], modes


def test_observer_serves_reads_and_forwards_writes(obs_ens):
    observer = obs_ens.observers[0]
    root = f"/obs-{uuid.uuid4().hex[:6]}"
    co = obs_ens.client(observer)
    voters = {m.id: obs_ens.client(m) for m in obs_ens.voters}
    # write through the observer, read on every voter
    co.create(root, b"")
    co.create(f"{root}/via-observer", b"o")
    t = co.transaction()
    t.create(f"{root}/multi", b"m")
    t.set_data(f"{root}/via-observer", b"o2")
    results = t.commit()
    assert results[0] == f"{root}/multi", results
    assert not isinstance(results[1], Exception), results
    for sid, c in voters.items():
        assert synced_get(c, f"{root}/via-observer")[0] == b"o2", sid
        assert c.exists(f"{root}/multi") is not None, sid
    # write through a voter, read (and watch) on the observer
    leader = obs_ens.leader()
    fired = threading.Event()
    co.get(f"{root}/via-observer", watch=lambda ev: fired.set())
    voters[leader.id].create(f"{root}/via-leader", b"l")
    voters[leader.id].set(f"{root}/via-observer", b"o3")
    assert fired.wait(10), "watch on the observer did not fire"
    assert synced_get(co, f"{root}/via-leader")[0] == b"l"
    assert co.get(f"{root}/via-observer")[0] == b"o3"
    obs_ens.assert_trees_identical(root=root)


def test_pinging_session_on_an_observer_does_not_expire_and_silent_one_does(obs_ens):
    observer = obs_ens.observers[0]
    root = f"/obs-{uuid.uuid4().hex[:6]}"
    c = obs_ens.client(obs_ens.leader())
    c.create(root, b"")
    alive = RawClient(observer.host, observer.port, timeout_ms=2 * TICK_TIME)
    silent = RawClient(observer.host, observer.port, timeout_ms=2 * TICK_TIME, pings=False)
    try:
        assert alive.create(f"{root}/alive", b"", mode=CreateMode.EPHEMERAL)[0] == 0
        assert silent.create(f"{root}/silent", b"", mode=CreateMode.EPHEMERAL)[0] == 0
        time.sleep(3.0)
        assert silent.wait_closed(5), "the silent session on the observer was not expired"
        assert not alive.closed, "the observer closed a session that kept pinging"
        c.sync(root)
        assert c.get_children(root) == ["alive"], \
            "the leader expired a session pinging the observer (or kept the silent one)"
    finally:
        alive.close()
        silent.close_socket()
    obs_ens.assert_trees_identical(root=root)


def test_observer_is_not_needed_for_quorum_and_catches_up(obs_ens):
    observer = obs_ens.observers[0]
    root = f"/obs-{uuid.uuid4().hex[:6]}"
    c = obs_ens.client(obs_ens.leader())
    c.create(root, b"")
    observer.stop()
    try:
        for i in range(20):
            c.create(f"{root}/n{i}", b"")
    finally:
        observer.cont()
    co = obs_ens.client(observer)
    co.sync(root)
    assert len(co.get_children(root)) == 20
    assert observer.mode() == "observer"
    obs_ens.assert_trees_identical(root=root)


# ---------------------------------------------------------------- paddock cluster

def test_paddock_cluster_command_starts_a_working_ensemble(tmp_path):
    argv = [str(paddock_bin()), "cluster", "--nodes", "3", "--observers", "1",
            "--data-dir", str(tmp_path / "cluster"), "--tick-time", str(TICK_TIME)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        line = [None]
        reader = threading.Thread(target=lambda: line.__setitem__(0, proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(60)
        connect = (line[0] or "").strip()
        assert re.fullmatch(r"(127\.0\.0\.1:\d+,){3}127\.0\.0\.1:\d+", connect), \
            f"connect string {connect!r}; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
        from kazoo.client import KazooClient
        hosts = connect.split(",")
        writers = []
        try:
            for h in hosts:
                k = KazooClient(hosts=h, timeout=4.0)
                k.start(timeout=15)
                writers.append(k)
            writers[-1].create("/smoke", b"via observer")
            for k in writers:
                k.sync("/smoke")
                assert k.get("/smoke")[0] == b"via observer"
            modes = sorted(re.search(r"Mode: (\w+)", _srvr(h)).group(1) for h in hosts)
            assert modes == ["follower", "follower", "leader", "observer"], modes
        finally:
            for k in writers:
                k.stop()
                k.close()
    finally:
        # Ctrl-C stops the cluster and its servers.
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
                pytest.fail("paddock cluster did not stop on SIGINT")
    assert proc.returncode == 0, proc.stderr.read()
    # and it took its servers with it
    for h in hosts:
        host, port = h.split(":")
        with pytest.raises(OSError):
            _srvr(h)


def _srvr(hostport):
    from zkwire import four_letter
    host, port = hostport.split(":")
    return four_letter(host, int(port), "srvr", 2)


def test_sync_then_read_sees_every_write_acknowledged_before_it(ens, root):
    """A writer on the leader keeps incrementing a counter; readers on every
    other server sync and read: they must see at least the last value that
    was acknowledged before their sync started."""
    leader = ens.leader()
    path = f"{root}/counter"
    w = ens.client(leader)
    w.create(path, b"0")
    acked = [0]
    stop = threading.Event()
    errors = []

    def write():
        i = 0
        try:
            while not stop.is_set():
                i += 1
                w.set(path, str(i).encode())
                acked[0] = i
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    try:
        readers = [(m, ens.client(m)) for m in ens.members if m is not leader]
        stale = []
        for _ in range(25):
            for m, r in readers:
                before = acked[0]
                r.sync(path)
                seen = int(r.get(path)[0])
                if seen < before:
                    stale.append((m.name, before, seen))
    finally:
        stop.set()
        t.join(30)
    assert not errors, errors
    assert acked[0] > 10, "the writer hardly wrote"
    assert not stale, f"sync+read returned values older than acknowledged writes: {stale[:10]}"


# ---------------------------------------------------------------- membership

def expected_config(ensemble):
    """/zookeeper/config as ZooKeeper 3.8 writes it for these zoo.cfg
    lines (`server.N=host:peer:election[:observer];clientPort`): the role
    always named, a bare client port as 0.0.0.0, `version=` in hex (0 for
    zoo.cfg's own), no final newline."""
    lines = [f"server.{m.id}={m.host}:{m.peer_port}:{m.election_port}:"
             f"{'observer' if m.observer else 'participant'};0.0.0.0:{m.port}"
             for m in sorted(ensemble.members, key=lambda m: m.id)]
    return "\n".join(lines + ["version=0"])


def test_every_server_publishes_the_membership_in_zookeeper_config(ens):
    assert_membership_published(ens)


def test_observers_are_published_as_observers(obs_ens):
    assert "observer;" in expected_config(obs_ens)
    assert_membership_published(obs_ens)


def assert_membership_published(ensemble):
    expected = expected_config(ensemble)
    for member in ensemble.members:
        c = ensemble.client(member)
        data, stat = c.get("/zookeeper/config")
        assert data.decode() == expected, member.name
        assert (stat.version, stat.mzxid, stat.dataLength) == (-1, 0, len(expected))
        acl, _ = c.get_acls("/zookeeper/config")
        assert [(a.perms, a.id.scheme, a.id.id) for a in acl] == [(1, "world", "anyone")]
    with pytest.raises(NoAuthError):
        c.set("/zookeeper/config", b"server.1=elsewhere")


@needs_zkcli
def test_config_in_the_shell_and_in_zkcli(ens):
    """`config`, `config -s` and `config -c` print the same from zkCli and
    `paddock shell`: zkCli parses every line with ZooKeeper's own parser."""
    member = ens.members[0]
    env = dict(os.environ, TZ="UTC", JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1")
    expected = expected_config(ens)
    clients = ",".join(f"0.0.0.0:{m.port}" for m in sorted(ens.members, key=lambda m: m.id))
    for words in (["config"], ["config", "-s"], ["config", "-c"]):
        ours = subprocess.run([str(paddock_bin()), "shell", member.hosts, *words],
                              capture_output=True, text=True, timeout=60, env=env)
        theirs = subprocess.run([ZK_CLI, "-server", member.hosts, *words],
                                capture_output=True, text=True, timeout=120, env=env,
                                stdin=subprocess.DEVNULL)
        assert ours.returncode == 0, ours.stderr
        printed = ours.stdout
        if words == ["config", "-c"]:
            # zkCli lists the servers in its Properties' hash order.
            assert printed == f"0 {clients}\n"
            version, listed = theirs.stdout.splitlines()[-1].split(" ")
            assert (version, sorted(listed.split(","))) == ("0", sorted(clients.split(",")))
        else:
            assert printed.startswith(expected + "\n")
            assert printed in theirs.stdout, f"{words}: zkCli printed {theirs.stdout!r}"
