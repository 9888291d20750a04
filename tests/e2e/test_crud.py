"""Create / read / update / delete with kazoo, and the Stat after each op."""

import time

import pytest
from kazoo.exceptions import BadVersionError, NoNodeError
from kazoo.security import OPEN_ACL_UNSAFE, make_acl

from zkwire import CreateMode


def now_ms():
    return int(time.time() * 1000)


def test_create_and_get_stat(zk, root):
    before = now_ms()
    path, stat = zk.create(f"{root}/a", b"hello", include_data=True)
    after = now_ms()
    assert path == f"{root}/a"
    data, got = zk.get(path)
    assert data == b"hello"
    assert got == stat
    assert stat.czxid == stat.mzxid == stat.pzxid
    assert stat.czxid > 0
    assert stat.version == 0
    assert stat.cversion == 0
    assert stat.aversion == 0
    assert stat.ephemeralOwner == 0
    assert stat.dataLength == 5
    assert stat.numChildren == 0
    assert stat.ctime == stat.mtime
    # ctime is the server's wall clock in ms
    assert before - 5000 <= stat.ctime <= after + 5000


def test_parent_stat_after_child_create_and_delete(zk, root):
    parent = f"{root}/p"
    _, p0 = zk.create(parent, b"x", include_data=True)
    _, c1 = zk.create(f"{parent}/c1", b"", include_data=True)
    p1 = zk.exists(parent)
    assert p1.cversion == p0.cversion + 1 == 1
    assert p1.numChildren == 1
    assert p1.pzxid == c1.czxid
    # the parent's data is untouched
    assert p1.mzxid == p0.mzxid and p1.version == 0 and p1.mtime == p0.mtime

    _, c2 = zk.create(f"{parent}/c2", b"", include_data=True)
    p2 = zk.exists(parent)
    assert (p2.cversion, p2.numChildren, p2.pzxid) == (2, 2, c2.czxid)

    zk.delete(f"{parent}/c1")
    p3 = zk.exists(parent)
    assert p3.cversion == 3
    assert p3.numChildren == 1
    assert p3.pzxid > c2.czxid
    # the delete's zxid is the parent's new pzxid: the next write is after it
    _, c3 = zk.create(f"{parent}/c3", b"", include_data=True)
    assert p3.pzxid < c3.czxid
    assert p3.mzxid == p0.mzxid

    # a child's data change does not touch the parent
    zk.set(f"{parent}/c3", b"changed")
    assert zk.exists(parent).pzxid == c3.czxid


def test_set_data_stat(zk, root):
    path = f"{root}/s"
    _, s0 = zk.create(path, b"one", include_data=True)
    s1 = zk.set(path, b"second value")
    assert s1.version == 1
    assert s1.czxid == s0.czxid
    assert s1.mzxid > s0.mzxid
    assert s1.pzxid == s0.pzxid
    assert s1.ctime == s0.ctime
    assert s1.mtime >= s0.mtime
    assert s1.dataLength == len(b"second value")
    assert s1.cversion == 0 and s1.aversion == 0
    data, s1b = zk.get(path)
    assert data == b"second value" and s1b == s1

    # setting the same data still bumps the version
    s2 = zk.set(path, b"second value")
    assert s2.version == 2 and s2.mzxid > s1.mzxid

    # conditional set
    s3 = zk.set(path, b"three", version=2)
    assert s3.version == 3
    with pytest.raises(BadVersionError):
        zk.set(path, b"nope", version=2)
    assert zk.get(path)[0] == b"three"

    # empty data
    s4 = zk.set(path, b"")
    assert s4.dataLength == 0
    assert zk.get(path)[0] == b""


def test_set_acl_bumps_aversion(zk, root):
    path = f"{root}/acl"
    _, s0 = zk.create(path, b"", include_data=True)
    s1 = zk.set_acls(path, [make_acl("world", "anyone", read=True, write=True,
                                     create=True, delete=True, admin=True)])
    assert s1.aversion == 1
    assert s1.version == 0
    assert s1.mzxid == s0.mzxid  # an ACL change is not a data change
    acls, s2 = zk.get_acls(path)
    assert s2.aversion == 1
    assert [(a.perms, a.id.scheme, a.id.id) for a in acls] == [(31, "world", "anyone")]
    with pytest.raises(BadVersionError):
        zk.set_acls(path, OPEN_ACL_UNSAFE, version=0)
    assert zk.set_acls(path, OPEN_ACL_UNSAFE, version=1).aversion == 2


def test_delete(zk, root):
    path = f"{root}/d"
    zk.create(path, b"x")
    with pytest.raises(BadVersionError):
        zk.delete(path, version=3)
    zk.delete(path, version=0)
    assert zk.exists(path) is None
    with pytest.raises(NoNodeError):
        zk.get(path)
    # it can be created again, with a fresh stat
    _, s = zk.create(path, b"again", include_data=True)
    assert s.version == 0


def test_get_children_and_stat(zk, root):
    names = ["b", "a", "c", "znode-with-dash", "ünïcødé", "x.y"]
    for n in names:
        zk.create(f"{root}/{n}", n.encode())
    children = zk.get_children(root)
    assert sorted(children) == sorted(names)
    children, stat = zk.get_children(root, include_data=True)
    assert stat.numChildren == len(names)
    assert stat.cversion == len(names)
    assert zk.get_children(f"{root}/a") == []
    for n in names:
        assert zk.get(f"{root}/{n}")[0] == n.encode()


def test_exists(zk, root):
    assert zk.exists(f"{root}/missing") is None
    s = zk.exists(root)
    assert s is not None and s.numChildren == 0


def test_default_acl_is_world_anyone(zk, root):
    acls, _ = zk.get_acls(root)
    assert [(a.perms, a.id.scheme, a.id.id) for a in acls] == [(31, "world", "anyone")]


def test_zxids_increase_with_every_write(zk, root):
    last = 0
    for i in range(5):
        _, s = zk.create(f"{root}/n{i}", b"", include_data=True)
        assert s.czxid > last
        last = s.czxid
        s = zk.set(f"{root}/n{i}", b"v")
        assert s.mzxid > last
        last = s.mzxid


def test_large_value(zk, root):
    big = bytes(range(256)) * 3900  # 998,400 bytes, under the 1 MiB default
    _, s = zk.create(f"{root}/big", big, include_data=True)
    assert s.dataLength == len(big)
    assert zk.get(f"{root}/big")[0] == big


def test_binary_data_roundtrip(zk, root):
    data = bytes(range(256))
    zk.create(f"{root}/bin", data)
    assert zk.get(f"{root}/bin")[0] == data


def test_null_data_reads_back_as_null(server, raw_factory, root):
    """A create with a null buffer (length -1) stores no data."""
    c = raw_factory(server)
    err, _, stat = c.create(f"{root}/null", None)
    assert err == 0
    assert stat.dataLength == 0
    err, data, stat = c.get_data(f"{root}/null")
    assert err == 0
    assert stat.dataLength == 0
    assert data in (None, b"")


def test_sync(zk, root):
    assert zk.sync(root) == root


def test_create2_returns_stat_of_new_node(server, raw_factory, root):
    c = raw_factory(server)
    err, path, stat = c.create(f"{root}/x", b"abc", mode=CreateMode.PERSISTENT)
    assert err == 0 and path == f"{root}/x"
    err, data, stat2 = c.get_data(path)
    assert data == b"abc" and stat2 == stat


def test_makepath(zk, root):
    zk.create(f"{root}/a/b/c", b"leaf", makepath=True)
    assert zk.get(f"{root}/a/b/c")[0] == b"leaf"
    assert zk.get(f"{root}/a")[0] == b""


def test_pipelined_requests_are_answered_in_order(server, raw_factory, root):
    """Per-session FIFO: requests sent back to back are answered in order,
    and a read sees the effect of the same session's earlier writes even
    when it is sent before their replies arrive."""
    from zkwire import Op, Writer, create_body, path_watch_body
    c = raw_factory(server)
    xids = []
    for i in range(50):
        xids.append(("create", c.submit(Op.create2, create_body(f"{root}/n{i}", str(i).encode()))))
        xids.append(("get", c.submit(Op.getData, path_watch_body(f"{root}/n{i}"))))
        xids.append(("set", c.submit(Op.setData, Writer().string(f"{root}/n{i}")
                                      .buffer(b"x%d" % i).int(0).bytes())))
    last_zxid = 0
    for i in range(50):
        (_, xc), (_, xg), (_, xs) = xids[3 * i:3 * i + 3]
        rc, rg, rs = c.wait_reply(xc), c.wait_reply(xg), c.wait_reply(xs)
        assert rc.err == 0 and rg.err == 0 and rs.err == 0
        r = rg.reader()
        assert r.buffer() == str(i).encode()
        rc_reader = rc.reader()
        assert rc_reader.string() == f"{root}/n{i}"
        czxid = rc_reader.stat().czxid
        assert czxid > last_zxid
        last_zxid = rs.reader().stat().mzxid
        assert last_zxid > czxid
    replies = [f.xid for k, f in c.frames if k == "reply"]
    assert replies == sorted(replies)


def test_pipelined_reads_see_the_writes_before_them_and_none_after(server, zk, raw_factory, root):
    """Reads sent between a session's writes, all in one socket write,
    each show exactly the writes sent before them, and watch events fall
    between the read that set them and the reply of the write that fired
    them."""
    from pipelining import check_reads_between_writes
    zk.create(f"{root}/n", b"")
    check_reads_between_writes(raw_factory(server), f"{root}/n")


def test_pipelined_listings_see_the_creates_before_them_and_none_after(
        server, zk, raw_factory, root):
    """getChildren, getChildren2 and getAllChildrenNumber sent between a
    session's creates count exactly the children created before them."""
    from pipelining import check_listings_between_creates
    zk.create(f"{root}/p", b"")
    check_listings_between_creates(raw_factory(server), f"{root}/p")


def test_writes_sent_microseconds_apart_are_applied_in_order(server, zk, raw_factory, root):
    """Two version-checked writes of a session, sent in separate socket
    writes a few microseconds apart, are applied in the order sent: the
    second never overtakes the first while the server is still proposing
    it."""
    from pipelining import check_writes_sent_apart_keep_their_order
    paths = [f"{root}/n{i}" for i in range(3)]
    for path in paths:
        zk.create(path, b"")
    check_writes_sent_apart_keep_their_order([raw_factory(server) for _ in paths], paths)


def test_held_reads_of_a_closed_connection_leave_no_watch(server_factory, kazoo_factory, raw_factory):
    """Reads held behind their session's writes, whose connection is closed
    (the session resumed elsewhere) before the writes are applied, register
    no watch for it."""
    from pipelining import check_watches_of_a_closed_connection_are_dropped
    from test_limits import mntr
    s = server_factory()
    zk = kazoo_factory(s)
    zk.create("/held", b"")
    check_watches_of_a_closed_connection_are_dropped(
        lambda: raw_factory(s),
        lambda c: raw_factory(s, session_id=c.session_id, passwd=c.passwd),
        "/held",
        version=lambda: zk.get("/held")[1].version,
        watch_count=lambda: int(mntr(s)["zk_watch_count"]))


def test_restart_preserves_tree_stats_and_acls(server_factory, kazoo_factory):
    """Snapshots plus log replay give back exactly the same tree."""
    from kazoo.security import make_acl, make_digest_acl
    s = server_factory({"snapCount": "10"})
    zk = kazoo_factory(s)
    zk.add_auth("digest", "u:p")
    zk.create("/keep", b"")
    for i in range(60):
        acl = [make_digest_acl("u", "p", all=True)] if i % 7 == 0 else \
            [make_acl("world", "anyone", read=True, write=True, create=True,
                      delete=True, admin=True)]
        zk.create(f"/keep/n{i}", b"v%d" % i, acl=acl)
        if i % 3 == 0:
            zk.set(f"/keep/n{i}", b"w%d" % i)
        if i % 5 == 0:
            zk.delete(f"/keep/n{i}")
    zk.create("/keep/seq-", b"", sequence=True)

    def snapshot():
        out = {}
        for p in ["/keep"] + [f"/keep/{c}" for c in zk.get_children("/keep")]:
            data, st = zk.get(p)
            acls, _ = zk.get_acls(p)
            out[p] = (data, st, sorted((a.perms, a.id.scheme, a.id.id) for a in acls))
        return out

    before = snapshot()
    for kill in (False, True):
        s.restart(kill=kill)
        deadline = time.time() + 30
        while not zk.connected and time.time() < deadline:
            time.sleep(0.05)
        assert snapshot() == before
    # zxids go on from where they were
    _, st = zk.create("/after", b"", include_data=True)
    assert st.czxid > max(v[1].mzxid for v in before.values())
    assert zk.create("/keep/seq-", b"", sequence=True) == "/keep/seq-0000000061"
