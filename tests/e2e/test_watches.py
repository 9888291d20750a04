"""Watches: one-shot data/exist/child watches (kazoo and raw), persistent and
persistent-recursive watches, removeWatches/checkWatches, ordering, and
re-registration with setWatches after a reconnect."""

import queue
import time

import pytest
from kazoo.protocol.states import EventType as KEv

from zkwire import (AddWatchMode, Err, EventType, Op, RawClient, WatcherType,
                    Writer, m_create, m_set)

SYNC_CONNECTED = 3


def collector():
    q = queue.Queue()
    return q, q.put


def get(q, timeout=10):
    return q.get(timeout=timeout)


def quiet(q, wait=0.5):
    try:
        ev = q.get(timeout=wait)
    except queue.Empty:
        return True
    raise AssertionError(f"unexpected event {ev}")


# ---------------------------------------------------------------- one-shot, kazoo

def test_data_watch_fires_once(zk, kazoo_factory, server, root):
    path = f"{root}/d"
    zk.create(path, b"0")
    other = kazoo_factory(server)
    q, cb = collector()
    zk.get(path, watch=cb)
    other.set(path, b"1")
    ev = get(q)
    assert (ev.type, ev.path) == (KEv.CHANGED, path)
    other.set(path, b"2")
    quiet(q)


def test_exists_watch_on_missing_node_fires_created(zk, kazoo_factory, server, root):
    path = f"{root}/later"
    other = kazoo_factory(server)
    q, cb = collector()
    assert zk.exists(path, watch=cb) is None
    other.create(path, b"")
    ev = get(q)
    assert (ev.type, ev.path) == (KEv.CREATED, path)
    other.delete(path)
    quiet(q)


def test_exists_watch_on_existing_node(zk, kazoo_factory, server, root):
    path = f"{root}/e"
    zk.create(path, b"")
    other = kazoo_factory(server)
    q, cb = collector()
    zk.exists(path, watch=cb)
    other.delete(path)
    assert get(q).type == KEv.DELETED


def test_child_watch(zk, kazoo_factory, server, root):
    other = kazoo_factory(server)
    q, cb = collector()
    assert zk.get_children(root, watch=cb) == []
    other.create(f"{root}/c1", b"")
    ev = get(q)
    assert (ev.type, ev.path) == (KEv.CHILD, root)
    other.create(f"{root}/c2", b"")
    quiet(q)
    # a child's data change is not a child event
    zk.get_children(root, watch=cb)
    other.set(f"{root}/c1", b"x")
    quiet(q)
    other.delete(f"{root}/c1")
    assert get(q).type == KEv.CHILD


def test_delete_fires_data_and_child_watches_on_node(zk, kazoo_factory, server, root):
    path = f"{root}/n"
    zk.create(path, b"")
    other = kazoo_factory(server)
    qd, cbd = collector()
    qc, cbc = collector()
    qp, cbp = collector()
    zk.get(path, watch=cbd)
    zk.get_children(path, watch=cbc)
    zk.get_children(root, watch=cbp)
    other.delete(path)
    assert get(qd).type == KEv.DELETED
    assert get(qc).type == KEv.DELETED
    ev = get(qp)
    assert (ev.type, ev.path) == (KEv.CHILD, root)


def test_failed_writes_do_not_fire(zk, kazoo_factory, server, root):
    from kazoo.exceptions import BadVersionError
    path = f"{root}/f"
    zk.create(path, b"")
    other = kazoo_factory(server)
    q, cb = collector()
    zk.get(path, watch=cb)
    with pytest.raises(BadVersionError):
        other.set(path, b"x", version=9)
    t = other.transaction()
    t.set_data(path, b"y")
    t.check(f"{root}/missing", 0)
    t.commit()
    quiet(q)
    other.set(path, b"z")
    assert get(q).type == KEv.CHANGED


# ---------------------------------------------------------------- one-shot, raw

def test_raw_event_fields(server, raw_factory, root):
    c = raw_factory(server)
    w = raw_factory(server)
    path = f"{root}/r"
    assert c.exists(path, watch=True)[0] == Err.NONODE
    assert w.create(path, b"x")[0] == 0
    ev = c.next_event()
    assert (ev.type, ev.state, ev.path) == (EventType.NodeCreated, SYNC_CONNECTED, path)


def test_get_data_on_missing_node_sets_no_watch(server, raw_factory, root):
    c = raw_factory(server)
    w = raw_factory(server)
    path = f"{root}/missing"
    assert c.get_data(path, watch=True)[0] == Err.NONODE
    assert c.get_children(path, watch=True)[0] == Err.NONODE
    assert w.create(path)[0] == 0
    assert c.no_event(0.7)


def test_same_path_watched_twice_gets_one_event(server, raw_factory, root):
    c = raw_factory(server)
    w = raw_factory(server)
    path = f"{root}/twice"
    assert c.create(path)[0] == 0
    c.get_data(path, watch=True)
    c.exists(path, watch=True)
    c.get_data(path, watch=True)
    w.set_data(path, b"v")
    assert c.next_event().type == EventType.NodeDataChanged
    assert c.no_event(0.7)


def test_event_for_own_write_arrives_before_the_reply(server, raw_factory, root):
    """A client's watch event precedes the reply to its own triggering write."""
    c = raw_factory(server)
    path = f"{root}/own"
    assert c.create(path)[0] == 0
    c.get_data(path, watch=True)
    n = len(c.frames)
    assert c.set_data(path, b"new")[0] == 0
    kinds = [k for k, _ in c.frames[n:]]
    assert kinds == ["event", "reply"]


def test_watch_event_precedes_new_data(server, raw_factory, root):
    """Watcher sees the event before any read that returns the new data."""
    path = f"{root}/order"
    reader = raw_factory(server)
    writer = raw_factory(server)
    assert writer.create(path, b"old")[0] == 0
    for i in range(20):
        assert reader.get_data(path, watch=True)[0] == 0
        start = len(reader.frames)
        new = f"v{i}".encode()
        xid_write = writer.submit(Op.setData, Writer().string(path)
                                  .buffer(new).int(-1).bytes())
        # read as fast as possible until the new value shows up
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            err, data, _ = reader.get_data(path)
            if data == new:
                break
        else:
            pytest.fail("new data never visible")
        assert writer.wait_reply(xid_write).err == 0
        frames = reader.frames[start:]
        first_new = next(j for j, (k, f) in enumerate(frames)
                         if k == "reply" and f.body[4:4 + len(new)] == new)
        events = [j for j, (k, f) in enumerate(frames) if k == "event"]
        assert events and events[0] < first_new, f"round {i}: {frames}"
        reader.drain_events(0.01)


def test_multi_fires_events_in_op_order(server, raw_factory, root):
    c = raw_factory(server)
    w = raw_factory(server)
    a, b = f"{root}/a", f"{root}/b"
    assert w.create(b)[0] == 0
    c.exists(a, watch=True)
    c.get_data(b, watch=True)
    c.get_children(root, watch=True)
    assert w.multi([m_create(a), m_set(b, b"x")])[0] == 0
    evs = [c.next_event() for _ in range(3)]
    assert [(e.type, e.path) for e in evs] == [
        (EventType.NodeCreated, a),
        (EventType.NodeChildrenChanged, root),
        (EventType.NodeDataChanged, b),
    ]


# ---------------------------------------------------------------- persistent

def test_persistent_watch(server, raw_factory, root):
    c = raw_factory(server)
    w = raw_factory(server)
    path = f"{root}/p"
    assert c.add_watch(path, AddWatchMode.PERSISTENT) == 0
    assert w.create(path, b"1")[0] == 0
    assert w.set_data(path, b"2")[0] == 0
    assert w.set_data(path, b"3")[0] == 0
    assert w.create(f"{path}/kid")[0] == 0
    assert w.set_data(f"{path}/kid", b"x")[0] == 0   # not watched
    assert w.create(f"{path}/kid/grandkid")[0] == 0  # not watched
    assert w.delete(f"{path}/kid/grandkid") == 0
    assert w.delete(f"{path}/kid") == 0
    assert w.delete(path) == 0
    assert w.create(path)[0] == 0                    # still watched
    got = [(e.type, e.path) for e in c.drain_events(1.0)]
    assert got == [
        (EventType.NodeCreated, path),
        (EventType.NodeDataChanged, path),
        (EventType.NodeDataChanged, path),
        (EventType.NodeChildrenChanged, path),
        (EventType.NodeChildrenChanged, path),
        (EventType.NodeDeleted, path),
        (EventType.NodeCreated, path),
    ]


def test_persistent_recursive_watch(server, raw_factory, root):
    c = raw_factory(server)
    w = raw_factory(server)
    top = f"{root}/top"
    assert w.create(top)[0] == 0
    assert c.add_watch(top, AddWatchMode.PERSISTENT_RECURSIVE) == 0
    assert w.create(f"{top}/a")[0] == 0
    assert w.create(f"{top}/a/b", b"")[0] == 0
    assert w.set_data(f"{top}/a/b", b"x")[0] == 0
    assert w.set_data(top, b"y")[0] == 0
    assert w.create(f"{root}/top2")[0] == 0          # a sibling, not below
    assert w.delete(f"{top}/a/b") == 0
    assert w.delete(f"{top}/a") == 0
    got = [(e.type, e.path) for e in c.drain_events(1.0)]
    # no NodeChildrenChanged events in recursive mode
    assert got == [
        (EventType.NodeCreated, f"{top}/a"),
        (EventType.NodeCreated, f"{top}/a/b"),
        (EventType.NodeDataChanged, f"{top}/a/b"),
        (EventType.NodeDataChanged, top),
        (EventType.NodeDeleted, f"{top}/a/b"),
        (EventType.NodeDeleted, f"{top}/a"),
    ]


@pytest.mark.paddock_only(
    "ZooKeeper 3.8 lets a one-shot watch replace a persistent watch on the same "
    "path and connection; 3.9 keeps both (ZOOKEEPER-4466)")
def test_persistent_and_one_shot_on_same_path(server, raw_factory, root):
    c = raw_factory(server)
    w = raw_factory(server)
    path = f"{root}/both"
    assert w.create(path)[0] == 0
    assert c.add_watch(path, AddWatchMode.PERSISTENT) == 0
    assert c.get_data(path, watch=True)[0] == 0
    assert w.set_data(path, b"1")[0] == 0
    assert w.set_data(path, b"2")[0] == 0
    got = [(e.type, e.path) for e in c.drain_events(1.0)]
    # one event per change and connection, whatever the number of watches
    assert got == [(EventType.NodeDataChanged, path)] * 2


def test_add_watch_on_missing_path_and_root(server, raw_factory):
    c = raw_factory(server)
    assert c.add_watch("/definitely/not/there", AddWatchMode.PERSISTENT) == 0
    assert c.add_watch("/", AddWatchMode.PERSISTENT_RECURSIVE) == 0


def test_remove_and_check_watches(server, raw_factory, root):
    c = raw_factory(server)
    w = raw_factory(server)
    path = f"{root}/rm"
    assert w.create(path)[0] == 0
    assert c.check_watches(path, WatcherType.DATA) == Err.NOWATCHER
    assert c.remove_watches(path, WatcherType.ANY) == Err.NOWATCHER

    c.get_data(path, watch=True)
    c.get_children(path, watch=True)
    assert c.check_watches(path, WatcherType.DATA) == 0
    assert c.check_watches(path, WatcherType.CHILDREN) == 0
    assert c.remove_watches(path, WatcherType.DATA) == 0
    assert c.check_watches(path, WatcherType.DATA) == Err.NOWATCHER
    assert c.check_watches(path, WatcherType.CHILDREN) == 0
    assert w.set_data(path, b"x")[0] == 0
    # the removal itself sends nothing, and the data watch is gone
    assert c.no_event(0.5)
    assert w.create(f"{path}/kid")[0] == 0
    assert c.next_event().type == EventType.NodeChildrenChanged


def test_remove_persistent_watch(server, raw_factory, root):
    c = raw_factory(server)
    w = raw_factory(server)
    path = f"{root}/prm"
    assert c.add_watch(path, AddWatchMode.PERSISTENT_RECURSIVE) == 0
    assert c.check_watches(path, WatcherType.ANY) == 0
    assert c.remove_watches(path, WatcherType.ANY) == 0
    assert w.create(path)[0] == 0
    assert w.create(f"{path}/x")[0] == 0
    assert c.no_event(0.7)


def test_watches_are_per_connection(server, raw_factory, root):
    c = raw_factory(server)
    d = raw_factory(server)
    path = f"{root}/pc"
    assert c.create(path)[0] == 0
    c.get_data(path, watch=True)
    assert d.remove_watches(path, WatcherType.DATA) == Err.NOWATCHER
    assert d.set_data(path, b"x")[0] == 0
    assert c.next_event().type == EventType.NodeDataChanged


# ---------------------------------------------------------------- setWatches

def test_set_watches_after_reconnect(server, raw_factory, root):
    """A resumed session re-registers its watches with setWatches; changes
    missed while away fire at once, the rest stay armed."""
    a = f"{root}/a"      # data watch, changed while away   -> NodeDataChanged now
    b = f"{root}/b"      # data watch, unchanged            -> armed
    gone = f"{root}/gone"  # data watch, deleted while away -> NodeDeleted now
    born = f"{root}/born"  # exist watch, created while away -> NodeCreated now
    never = f"{root}/never"  # exist watch, still missing     -> armed
    w = raw_factory(server)
    for p in (a, b, gone):
        assert w.create(p)[0] == 0
    first = raw_factory(server, timeout_ms=20000)
    first.get_data(a)
    relative = first.last_zxid
    first.close_socket()  # connection lost, session alive
    assert w.set_data(a, b"changed")[0] == 0
    assert w.delete(gone) == 0
    assert w.create(born)[0] == 0

    c = raw_factory(server, timeout_ms=20000, session_id=first.session_id,
                    passwd=first.passwd)
    assert c.set_watches(relative, data=[a, b, gone], exist=[born, never],
                         child=[root]) == 0
    got = sorted((e.type, e.path) for e in c.drain_events(1.0))
    assert got == sorted([
        (EventType.NodeDataChanged, a),
        (EventType.NodeDeleted, gone),
        (EventType.NodeCreated, born),
        (EventType.NodeChildrenChanged, root),
    ])
    assert w.set_data(b, b"x")[0] == 0
    assert w.create(never)[0] == 0
    got = sorted((e.type, e.path) for e in c.drain_events(1.0))
    assert got == sorted([(EventType.NodeDataChanged, b),
                          (EventType.NodeCreated, never)])


def test_set_watches2_persistent(server, raw_factory, root):
    c = raw_factory(server)
    w = raw_factory(server)
    assert c.set_watches2(c.last_zxid, persistent=[f"{root}/p"],
                          recursive=[f"{root}/r"]) == 0
    assert w.create(f"{root}/p")[0] == 0
    assert w.create(f"{root}/r")[0] == 0
    assert w.create(f"{root}/r/x")[0] == 0
    assert w.set_data(f"{root}/p", b"1")[0] == 0
    got = [(e.type, e.path) for e in c.drain_events(1.0)]
    assert got == [(EventType.NodeCreated, f"{root}/p"),
                   (EventType.NodeCreated, f"{root}/r"),
                   (EventType.NodeCreated, f"{root}/r/x"),
                   (EventType.NodeDataChanged, f"{root}/p")]


def test_watch_fires_after_server_restart(server_factory, raw_factory):
    """Restart the server while a watch is set: the client resumes its
    session, re-registers with setWatches, and a later change fires it."""
    s = server_factory()
    c = raw_factory(s, timeout_ms=30000)
    assert c.create("/w", b"0")[0] == 0
    assert c.get_data("/w", watch=True)[0] == 0
    assert c.add_watch("/tree", AddWatchMode.PERSISTENT_RECURSIVE) == 0
    sid, pw, zxid = c.session_id, c.passwd, c.last_zxid
    s.restart()
    assert c.wait_closed(10)
    c2 = RawClient(s.host, s.port, timeout_ms=30000, session_id=sid, passwd=pw,
                   last_zxid=zxid)
    try:
        assert c2.session_id == sid
        assert c2.set_watches2(zxid, data=["/w"], recursive=["/tree"]) == 0
        assert c2.no_event(0.3)
        w = RawClient(s.host, s.port)
        try:
            assert w.set_data("/w", b"1")[0] == 0
            assert w.create("/tree")[0] == 0
            assert w.create("/tree/leaf")[0] == 0
        finally:
            w.close()
        got = [(e.type, e.path) for e in c2.drain_events(1.0)]
        assert got == [(EventType.NodeDataChanged, "/w"),
                       (EventType.NodeCreated, "/tree"),
                       (EventType.NodeCreated, "/tree/leaf")]
    finally:
        c2.close()
