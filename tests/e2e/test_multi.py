"""multi (transactions) and multiRead."""

import threading

import pytest
from kazoo.exceptions import (BadVersionError, NodeExistsError, NoNodeError,
                              RolledBackError, RuntimeInconsistency)

from zkharness import children_counts_while
from zkwire import (CreateMode, Err, Op, create_body, m_check, m_create,
                    m_delete, m_get_children, m_get_data, m_set, multi_body,
                    parse_multi)


def test_kazoo_transaction_success(zk, root):
    zk.create(f"{root}/existing", b"old")
    t = zk.transaction()
    t.create(f"{root}/a", b"A")
    t.create(f"{root}/seq-", b"S", sequence=True)
    t.set_data(f"{root}/existing", b"new")
    t.check(f"{root}/existing", 1)
    t.delete(f"{root}/a")
    results = t.commit()
    assert results[0] == f"{root}/a"
    assert results[1] == f"{root}/seq-0000000002"
    assert results[2].version == 1 and results[2].dataLength == 3
    assert results[3] is True
    assert results[4] is True
    assert zk.exists(f"{root}/a") is None
    assert zk.get(f"{root}/existing")[0] == b"new"
    assert zk.get(f"{root}/seq-0000000002")[0] == b"S"


def test_kazoo_transaction_failure_results(zk, root):
    zk.create(f"{root}/x", b"x")
    t = zk.transaction()
    t.create(f"{root}/new", b"")
    t.set_data(f"{root}/x", b"changed")
    t.check(f"{root}/x", 5)          # fails: version is 0
    t.create(f"{root}/new2", b"")
    t.delete(f"{root}/x")
    results = t.commit()
    assert [type(r) for r in results] == [
        RolledBackError, RolledBackError, BadVersionError,
        RuntimeInconsistency, RuntimeInconsistency]
    # nothing was applied
    assert zk.exists(f"{root}/new") is None
    assert zk.exists(f"{root}/new2") is None
    data, st = zk.get(f"{root}/x")
    assert data == b"x" and st.version == 0


@pytest.mark.parametrize("ops,failing,exc", [
    (lambda r: [("create", f"{r}/a"), ("create", f"{r}/a")], 1, NodeExistsError),
    (lambda r: [("create", f"{r}/a"), ("delete", f"{r}/missing")], 1, NoNodeError),
    (lambda r: [("delete", f"{r}/missing"), ("create", f"{r}/a")], 0, NoNodeError),
])
def test_kazoo_transaction_failing_op(zk, root, ops, failing, exc):
    t = zk.transaction()
    for kind, path in ops(root):
        getattr(t, kind)(path) if kind == "delete" else t.create(path, b"")
    results = t.commit()
    for i, r in enumerate(results):
        if i < failing:
            assert isinstance(r, RolledBackError)
        elif i == failing:
            assert isinstance(r, exc)
        else:
            assert isinstance(r, RuntimeInconsistency)
    assert zk.exists(f"{root}/a") is None


def test_multi_ops_share_one_zxid(server, raw_factory, root):
    c = raw_factory(server)
    err, res = c.multi([m_create(f"{root}/a", op=Op.create2),
                        m_create(f"{root}/b", op=Op.create2)])
    assert err == 0
    za = c.exists(f"{root}/a")[1].czxid
    zb = c.exists(f"{root}/b")[1].czxid
    assert za == zb
    # the parent saw two creates in one txn
    st = c.exists(root)[1]
    assert st.pzxid == za and st.cversion == 2


def test_raw_multi_result_wire_format(server, raw_factory, root):
    """Per-op result types as ZooKeeper puts them on the wire."""
    c = raw_factory(server)
    err, res = c.multi([
        m_create(f"{root}/c1", b"1", op=Op.create),
        # create2 inside a multi is answered as a plain create (type 1, no
        # stat): the txn is stored as a create
        m_create(f"{root}/c2", b"2", op=Op.create2),
        (Op.createContainer, create_body(f"{root}/c3", b"3", None, CreateMode.CONTAINER)),
        (Op.createTTL, create_body(f"{root}/c4", b"4", None,
                                   CreateMode.PERSISTENT_WITH_TTL, 60000)),
        m_set(f"{root}/c1", b"one"),
        m_check(f"{root}/c1", 1),
        m_delete(f"{root}/c2"),
    ])
    assert err == 0
    assert res[0] == ("create", f"{root}/c1")
    assert res[1] == ("create", f"{root}/c2")
    assert res[2][:2] == ("create2", f"{root}/c3")
    assert res[3][:2] == ("create2", f"{root}/c4")
    assert res[2][2].czxid == res[3][2].czxid
    assert res[4][0] == "setData" and res[4][1].version == 1
    assert res[5] == ("check",)
    assert res[6] == ("delete",)


def test_raw_multi_failure_header_and_results(server, raw_factory, root):
    """A failed multi is answered with header err 0 (!) and one error result
    per op: 0 before the failing op, its code, then -2 after it. It still
    consumes a zxid."""
    c = raw_factory(server)
    assert c.create(f"{root}/x")[0] == 0
    before = c.exists(root)[1]
    rep = c.request(Op.multi, multi_body([
        m_create(f"{root}/y"),
        m_set(f"{root}/x", b"v"),
        m_check(f"{root}/x", 3),
        m_delete(f"{root}/x"),
    ]))
    assert rep.err == 0
    assert rep.zxid > before.pzxid
    res = parse_multi(rep.reader())
    assert res == [("error", 0), ("error", 0), ("error", Err.BADVERSION),
                   ("error", Err.RUNTIMEINCONSISTENCY)]
    assert c.exists(f"{root}/y")[0] == Err.NONODE
    # the next write gets a later zxid than the failed multi
    _, _, st = c.create(f"{root}/z")
    assert st.czxid > rep.zxid


def test_multi_bad_path_fails_the_op(server, raw_factory, root):
    c = raw_factory(server)
    err, res = c.multi([m_create(f"{root}/ok"), m_create("relative")])
    assert err == 0
    assert res == [("error", 0), ("error", Err.BADARGUMENTS)]


def test_empty_multi(server, raw_factory):
    c = raw_factory(server)
    assert c.multi([]) == (0, [])


def test_multi_with_read_op_is_marshalling_error(server, raw_factory, root):
    c = raw_factory(server)
    err, res = c.multi([m_create(f"{root}/a"), m_get_data(f"{root}/a")])
    assert err == Err.MARSHALLINGERROR
    assert res is None
    assert c.exists(f"{root}/a")[0] == Err.NONODE
    # the connection is still usable
    assert c.exists(root)[0] == 0


def test_multi_sequential_and_ephemeral(server, raw_factory, root):
    c = raw_factory(server)
    err, res = c.multi([
        m_create(f"{root}/s-", mode=CreateMode.PERSISTENT_SEQUENTIAL),
        m_create(f"{root}/s-", mode=CreateMode.EPHEMERAL_SEQUENTIAL),
    ])
    assert err == 0
    assert res == [("create", f"{root}/s-0000000000"),
                   ("create", f"{root}/s-0000000001")]
    st = c.exists(f"{root}/s-0000000001")[1]
    assert st.ephemeralOwner == c.session_id


def test_multi_read(server, raw_factory, root):
    c = raw_factory(server)
    assert c.create(f"{root}/a", b"A")[0] == 0
    assert c.create(f"{root}/a/kid")[0] == 0
    err, res = c.multi([
        m_get_data(f"{root}/a"),
        m_get_children(f"{root}/a"),
        m_get_data(f"{root}/missing"),
        m_get_children(f"{root}/missing"),
        m_get_data(f"{root}/a/kid"),
    ], read=True)
    assert err == 0
    assert res[0][0] == "getData" and res[0][1] == b"A"
    assert res[0][2].numChildren == 1
    assert res[1] == ("getChildren", ["kid"])
    assert res[2] == ("error", Err.NONODE)
    assert res[3] == ("error", Err.NONODE)
    assert res[4][:2] == ("getData", b"")


def test_multi_read_with_write_op_is_marshalling_error(server, raw_factory, root):
    c = raw_factory(server)
    err, res = c.multi([m_get_data(root), m_create(f"{root}/w")], read=True)
    assert err == Err.MARSHALLINGERROR
    assert c.exists(f"{root}/w")[0] == Err.NONODE


def test_multi_check_only(server, raw_factory, root):
    c = raw_factory(server)
    assert c.multi([m_check(root, 0)]) == (0, [("check",)])
    assert c.multi([m_check(root, 1)]) == (0, [("error", Err.BADVERSION)])
    assert c.multi([m_check(f"{root}/nope", 0)]) == (0, [("error", Err.NONODE)])


def test_a_large_multi_is_seen_whole_with_its_watch_events(kazoo_factory, server, root):
    """A multi that changes many znodes (a server may apply it apart from
    small ones) is still one step for every reader, and fires every watch
    it should."""
    writer, watcher, reader = (kazoo_factory(server) for _ in range(3))
    paths = [f"{root}/n{i:03}" for i in range(200)]
    created = threading.Semaphore(0)
    for p in paths:
        watcher.exists(p, watch=lambda event: created.release())
    children_changed = threading.Event()
    watcher.get_children(root, watch=lambda event: children_changed.set())

    def commit():
        t = writer.transaction()
        for p in paths:
            t.create(p, b"v")
        assert all(r == p for r, p in zip(t.commit(), paths))

    seen = children_counts_while(reader, root, len(paths), commit)
    assert set(seen) <= {0, len(paths)}, f"a reader saw part of a multi: {sorted(set(seen))}"
    assert seen[-1] == len(paths)
    assert children_changed.wait(5)
    for _ in paths:
        assert created.acquire(timeout=5), "a NodeCreated event is missing"
    czxids = {reader.exists(p).czxid for p in paths}
    assert len(czxids) == 1
