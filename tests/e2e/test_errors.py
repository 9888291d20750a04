"""Error codes for failing operations (kazoo exceptions and raw codes)."""

import pytest
from kazoo.exceptions import (BadVersionError, NoChildrenForEphemeralsError,
                              NodeExistsError, NoNodeError, NotEmptyError)

from zkwire import CreateMode, Err, Op, Writer


def test_no_node(zk, root):
    missing = f"{root}/missing"
    with pytest.raises(NoNodeError):
        zk.get(missing)
    with pytest.raises(NoNodeError):
        zk.set(missing, b"x")
    with pytest.raises(NoNodeError):
        zk.delete(missing)
    with pytest.raises(NoNodeError):
        zk.get_children(missing)
    with pytest.raises(NoNodeError):
        zk.get_acls(missing)
    with pytest.raises(NoNodeError):
        zk.create(f"{missing}/child", b"")
    assert zk.exists(missing) is None


def test_node_exists(zk, root):
    zk.create(f"{root}/a", b"first")
    with pytest.raises(NodeExistsError):
        zk.create(f"{root}/a", b"second")
    assert zk.get(f"{root}/a")[0] == b"first"


def test_not_empty(zk, root):
    zk.create(f"{root}/a/b", b"", makepath=True)
    with pytest.raises(NotEmptyError):
        zk.delete(f"{root}/a")
    assert zk.exists(f"{root}/a/b") is not None


def test_bad_version(zk, root):
    zk.create(f"{root}/v", b"")
    with pytest.raises(BadVersionError):
        zk.set(f"{root}/v", b"x", version=1)
    with pytest.raises(BadVersionError):
        zk.delete(f"{root}/v", version=1)
    assert zk.exists(f"{root}/v").version == 0
    # -1 matches any version
    zk.set(f"{root}/v", b"x", version=-1)


def test_no_children_for_ephemerals(zk, root):
    zk.create(f"{root}/eph", b"", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        zk.create(f"{root}/eph/child", b"")
    with pytest.raises(NoChildrenForEphemeralsError):
        zk.create(f"{root}/eph/child", b"", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        zk.create(f"{root}/eph/seq-", b"", sequence=True)


def test_ordering_of_checks(zk, root):
    """NoNode for a missing parent wins over NodeExists/BadVersion checks."""
    with pytest.raises(NoNodeError):
        zk.set(f"{root}/missing", b"", version=7)
    with pytest.raises(NoNodeError):
        zk.delete(f"{root}/missing", version=7)


# ---------------------------------------------------------------- bad paths
# Raw protocol: kazoo validates some paths on the client side.

INVALID_FOR_CREATE = [
    "nope",          # relative
    "//a",           # empty component
    "{root}/",       # trailing slash (only allowed with the sequential flag)
    "{root}/.",      # relative components
    "{root}/..",
    "{root}/a\x00b",  # null character
    "{root}/\x01",    # control character
    "{root}/\ufffe",  # non-characters / private use
    "{root}/\uf8ff",
]


@pytest.mark.parametrize("path", INVALID_FOR_CREATE)
def test_create_bad_path_is_bad_arguments(server, raw_factory, root, path):
    c = raw_factory(server)
    p = path.format(root=root)
    err, _, _ = c.create(p)
    assert err == Err.BADARGUMENTS, p
    # setData validates the path too
    err, _ = c.set_data(p, b"")
    assert err == Err.BADARGUMENTS, p
    # and the connection is still usable
    assert c.exists(root)[0] == 0


def test_create_in_missing_directory_is_no_node(server, raw_factory, root):
    """The parent lookup happens before the path check: `/r//b` has parent
    `/r/`, which does not exist."""
    c = raw_factory(server)
    for p in (f"{root}//b", f"{root}/./b", f"{root}/../b", f"{root}/x/"):
        assert c.create(p)[0] == Err.NONODE, p


def test_sequential_create_with_trailing_slash(server, raw_factory, root):
    """A trailing slash is valid with the sequential flag: the name is the
    bare counter."""
    c = raw_factory(server)
    err, path, _ = c.create(f"{root}/", mode=CreateMode.PERSISTENT_SEQUENTIAL)
    assert err == 0
    assert path == f"{root}/0000000000"
    err, path, _ = c.create(f"{root}/.", mode=CreateMode.PERSISTENT_SEQUENTIAL)
    assert (err, path) == (0, f"{root}/.0000000001")


def test_reads_of_odd_paths_are_no_node(server, raw_factory, root):
    c = raw_factory(server)
    for p in ("nope", f"{root}/", f"{root}//x", f"{root}/\x01"):
        assert c.exists(p)[0] == Err.NONODE, p
        assert c.get_data(p)[0] == Err.NONODE, p
        assert c.get_children(p)[0] == Err.NONODE, p
    # delete looks the node up first, except a path without any slash
    assert c.delete("nope") == Err.BADARGUMENTS
    for p in (f"{root}/", f"{root}//x", f"{root}/\x01"):
        assert c.delete(p) == Err.NONODE, p


def test_null_character_in_path(server, raw_factory, root):
    c = raw_factory(server)
    p = f"{root}/a\x00b"
    assert c.exists(p)[0] == Err.BADARGUMENTS
    assert c.delete(p) == Err.BADARGUMENTS
    assert c.create(p)[0] == Err.BADARGUMENTS


def test_root_and_zookeeper_nodes_are_protected(server, raw_factory):
    c = raw_factory(server)
    assert c.create("/")[0] == Err.NODEEXISTS
    assert c.delete("/") == Err.BADARGUMENTS
    assert c.delete("/zookeeper") == Err.BADARGUMENTS


def test_invalid_create_mode(server, raw_factory, root):
    c = raw_factory(server)
    assert c.create(f"{root}/m", mode=7, op=Op.create2)[0] == Err.BADARGUMENTS
    assert c.create(f"{root}/m", mode=-1, op=Op.create2)[0] == Err.BADARGUMENTS
    # TTL modes need the createTTL opcode
    assert c.create(f"{root}/m", mode=CreateMode.PERSISTENT_WITH_TTL,
                    op=Op.create2)[0] == Err.BADARGUMENTS
    assert c.create(f"{root}/m", mode=CreateMode.PERSISTENT_WITH_TTL,
                    op=Op.create)[0] == Err.BADARGUMENTS
    assert c.exists(f"{root}/m")[0] == Err.NONODE


def test_failed_write_consumes_a_zxid(server_factory, raw_factory):
    """ZooKeeper logs a failed write as an error txn with its own zxid; the
    reply header carries it. Reads carry the last zxid and use none."""
    s = server_factory()
    c = raw_factory(s)
    rep = c.request(Op.create2, Writer().string("/a").buffer(b"").int(1)
                    .int(31).string("world").string("anyone").int(0).bytes())
    assert rep.err == 0
    z1 = rep.zxid
    assert rep.reader().string() == "/a"
    rep = c.request(Op.create2, Writer().string("/a").buffer(b"").int(1)
                    .int(31).string("world").string("anyone").int(0).bytes())
    assert rep.err == Err.NODEEXISTS
    assert rep.zxid == z1 + 1
    rep = c.request(Op.exists, Writer().string("/a").bool(False).bytes())
    assert rep.err == 0 and rep.zxid == z1 + 1
    rep = c.request(Op.getData, Writer().string("/nope").bool(False).bytes())
    assert rep.err == Err.NONODE and rep.zxid == z1 + 1
    err, _, stat = c.create("/b")
    assert stat.czxid == z1 + 2
