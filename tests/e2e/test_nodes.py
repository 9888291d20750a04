"""Node kinds: ephemeral, sequential, container, TTL; the /zookeeper node;
getEphemerals, getAllChildrenNumber, whoAmI."""

import time

import pytest

from zkharness import wait_until
from zkwire import CreateMode, Err, Op


# ---------------------------------------------------------------- sequential

def test_sequential_names_come_from_parent_cversion(zk, root):
    """The suffix is the parent's count of child *creations*.

    ZooKeeper stores a cversion that only child creates increment; the Stat
    a client sees reports 2 * stored - numChildren (DataNode.copyStat), which
    moves by one on every create and every delete. The sequential suffix
    uses the stored value, so deleting a child does not advance it.
    """
    p = f"{root}/seq"
    zk.create(p, b"")
    assert zk.create(f"{p}/n-", b"", sequence=True) == f"{p}/n-0000000000"
    assert zk.create(f"{p}/n-", b"", sequence=True) == f"{p}/n-0000000001"
    zk.create(f"{p}/plain", b"")
    zk.delete(f"{p}/plain")
    # three creates, one delete: the visible cversion is 4 ...
    st = zk.exists(p)
    assert (st.cversion, st.numChildren) == (4, 2)
    # ... but the counter is 3
    assert zk.create(f"{p}/other-", b"", sequence=True) == f"{p}/other-0000000003"
    # a data change does not count either
    zk.set(p, b"data")
    assert zk.create(f"{p}/", b"", sequence=True) == f"{p}/0000000004"
    assert sorted(zk.get_children(p)) == sorted(
        ["n-0000000000", "n-0000000001", "other-0000000003", "0000000004"])
    # delete everything: visible cversion = 2 * 5 - 0
    for c in zk.get_children(p):
        zk.delete(f"{p}/{c}")
    st = zk.exists(p)
    assert (st.cversion, st.numChildren) == (10, 0)
    assert zk.create(f"{p}/n-", b"", sequence=True) == f"{p}/n-0000000005"


def test_visible_cversion_of_builtin_nodes(zk):
    """/ and /zookeeper get their children without create txns, so their
    visible cversion (2 * creates - numChildren) starts negative."""
    zstat = zk.exists("/zookeeper")
    assert zstat.numChildren == 2
    assert zstat.cversion == -2


def test_sequential_counter_is_per_parent(zk, root):
    zk.create(f"{root}/a", b"")
    zk.create(f"{root}/b", b"")
    zk.create(f"{root}/a/x", b"")
    assert zk.create(f"{root}/a/s", b"", sequence=True) == f"{root}/a/s0000000001"
    assert zk.create(f"{root}/b/s", b"", sequence=True) == f"{root}/b/s0000000000"


def test_sequential_name_collides_with_existing_node(zk, root):
    zk.create(f"{root}/s0000000001", b"")  # cversion 1 after this
    from kazoo.exceptions import NodeExistsError
    with pytest.raises(NodeExistsError):
        zk.create(f"{root}/s", b"", sequence=True)
    # the failed create did not bump cversion
    assert zk.exists(root).cversion == 1


# ---------------------------------------------------------------- ephemeral

def test_ephemeral_owner_is_session_id(zk, root):
    _, stat = zk.create(f"{root}/e", b"", ephemeral=True, include_data=True)
    assert stat.ephemeralOwner == zk.client_id[0]
    assert stat.ephemeralOwner != 0


def test_ephemeral_sequential(zk, kazoo_factory, server, root):
    path = zk.create(f"{root}/lock-", b"me", ephemeral=True, sequence=True)
    assert path == f"{root}/lock-0000000000"
    other = kazoo_factory(server)
    p2 = other.create(f"{root}/lock-", b"other", ephemeral=True, sequence=True)
    assert p2 == f"{root}/lock-0000000001"
    assert other.exists(path).ephemeralOwner == zk.client_id[0]
    assert other.exists(p2).ephemeralOwner == other.client_id[0]
    zk.stop()
    zk.close()
    assert other.exists(path) is None
    assert other.exists(p2) is not None


def test_ephemeral_removed_on_close_and_parent_stat(zk, kazoo_factory, server, root):
    other = kazoo_factory(server)
    other.create(f"{root}/e1", b"", ephemeral=True)
    other.create(f"{root}/e2", b"", ephemeral=True)
    before = zk.exists(root)
    assert before.numChildren == 2
    other.stop()
    after = zk.exists(root)
    assert after.numChildren == 0
    assert after.cversion == before.cversion + 2
    assert after.pzxid > before.pzxid


# ---------------------------------------------------------------- containers

def test_container_is_deleted_after_last_child_goes(server, raw_factory, zk, root):
    c = raw_factory(server)
    cont = f"{root}/container"
    err, _, stat = c.create(cont, b"c", mode=CreateMode.CONTAINER)
    assert err == 0
    # a container looks like a persistent node to clients
    assert stat.ephemeralOwner == 0
    zk.create(f"{cont}/child", b"")
    time.sleep(1.5)  # three reaper intervals: still there with a child
    assert zk.exists(cont) is not None
    zk.delete(f"{cont}/child")
    assert wait_until(lambda: zk.exists(cont) is None, timeout=15), \
        "container not reaped after its last child was deleted"


def test_container_that_never_had_children_stays(server, raw_factory, zk, root):
    c = raw_factory(server)
    cont = f"{root}/never-used"
    assert c.create(cont, mode=CreateMode.CONTAINER)[0] == 0
    time.sleep(2.0)  # four reaper intervals
    assert zk.exists(cont) is not None


def test_container_can_be_deleted_explicitly(server, raw_factory, zk, root):
    c = raw_factory(server)
    cont = f"{root}/c"
    assert c.create(cont, mode=CreateMode.CONTAINER)[0] == 0
    zk.delete(cont)
    assert zk.exists(cont) is None


def test_container_with_sequential_children(server, raw_factory, zk, root):
    c = raw_factory(server)
    cont = f"{root}/locks"
    assert c.create(cont, mode=CreateMode.CONTAINER)[0] == 0
    p = zk.create(f"{cont}/lock-", b"", ephemeral=True, sequence=True)
    assert p == f"{cont}/lock-0000000000"
    zk.delete(p)
    assert wait_until(lambda: zk.exists(cont) is None, timeout=15)


# ---------------------------------------------------------------- TTL

def test_ttl_node_expires_when_unmodified_and_childless(server, raw_factory, zk, root):
    c = raw_factory(server)
    path = f"{root}/ttl"
    err, p, stat = c.create(path, b"t", mode=CreateMode.PERSISTENT_WITH_TTL, ttl=1000)
    assert (err, p) == (0, path)
    # the TTL is not visible in the Stat: ephemeralOwner reads 0
    assert stat.ephemeralOwner == 0
    assert zk.exists(path) is not None
    assert wait_until(lambda: zk.exists(path) is None, timeout=15), \
        "TTL node not removed"


def test_ttl_node_with_child_is_kept(server, raw_factory, zk, root):
    c = raw_factory(server)
    path = f"{root}/ttl-parent"
    assert c.create(path, mode=CreateMode.PERSISTENT_WITH_TTL, ttl=500)[0] == 0
    zk.create(f"{path}/child", b"")
    time.sleep(2.0)
    assert zk.exists(path) is not None
    zk.delete(f"{path}/child")
    assert wait_until(lambda: zk.exists(path) is None, timeout=15)


def test_ttl_sequential(server, raw_factory, zk, root):
    c = raw_factory(server)
    err, p, _ = c.create(f"{root}/t-", mode=CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL,
                         ttl=60000)
    assert (err, p) == (0, f"{root}/t-0000000000")
    time.sleep(1.0)
    assert zk.exists(p) is not None


@pytest.mark.parametrize("ttl", [0, -1, 1 << 40])
def test_ttl_out_of_range_is_bad_arguments(server, raw_factory, root, ttl):
    c = raw_factory(server)
    err, _, _ = c.create(f"{root}/bad", mode=CreateMode.PERSISTENT_WITH_TTL, ttl=ttl)
    assert err == Err.BADARGUMENTS


def test_ttl_max_value_accepted(server, raw_factory, root):
    c = raw_factory(server)
    err, _, _ = c.create(f"{root}/max", mode=CreateMode.PERSISTENT_WITH_TTL,
                         ttl=(1 << 40) - 1)
    assert err == 0


def test_create_ttl_with_non_ttl_mode_is_bad_arguments(server, raw_factory, root):
    c = raw_factory(server)
    for mode in (CreateMode.PERSISTENT, CreateMode.EPHEMERAL, CreateMode.CONTAINER):
        err, _, _ = c.create(f"{root}/x", mode=mode, op=Op.createTTL, ttl=1000)
        assert err == Err.BADARGUMENTS, mode


def test_ttl_needs_extended_types(server_factory, raw_factory):
    s = server_factory({"extendedTypesEnabled": "false"})
    c = raw_factory(s)
    err, _, _ = c.create("/ttl", mode=CreateMode.PERSISTENT_WITH_TTL, ttl=1000)
    assert err == Err.UNIMPLEMENTED
    assert c.exists("/ttl")[0] == Err.NONODE


# ---------------------------------------------------------------- /zookeeper

def test_zookeeper_node_exists(zk):
    assert zk.exists("/zookeeper") is not None
    assert sorted(zk.get_children("/zookeeper")) == ["config", "quota"]
    assert "zookeeper" in zk.get_children("/")


# ---------------------------------------------------------------- newer ops

def test_get_ephemerals(server, raw_factory, zk, root):
    c = raw_factory(server)
    assert c.create(f"{root}/e1", mode=CreateMode.EPHEMERAL)[0] == 0
    assert c.create(f"{root}/dir")[0] == 0
    assert c.create(f"{root}/dir/e2", mode=CreateMode.EPHEMERAL)[0] == 0
    _, p3, _ = c.create(f"{root}/dir/s-", mode=CreateMode.EPHEMERAL_SEQUENTIAL)
    zk.create(f"{root}/not-mine", b"", ephemeral=True)
    err, eph = c.get_ephemerals(root)
    assert err == 0
    assert sorted(eph) == sorted([f"{root}/e1", f"{root}/dir/e2", p3])
    err, eph = c.get_ephemerals(f"{root}/dir")
    assert sorted(eph) == sorted([f"{root}/dir/e2", p3])
    # the prefix is a string prefix, not a path
    err, eph = c.get_ephemerals(f"{root}/e")
    assert eph == [f"{root}/e1"]
    err, eph = c.get_ephemerals(f"{root}/nothing-here")
    assert (err, eph) == (0, [])


def test_get_all_children_number(server, raw_factory, zk, root):
    c = raw_factory(server)
    zk.create(f"{root}/a/b/c", b"", makepath=True)
    zk.create(f"{root}/a/d", b"")
    zk.create(f"{root}/e", b"")
    assert c.get_all_children_number(root) == (0, 5)
    assert c.get_all_children_number(f"{root}/a") == (0, 3)
    assert c.get_all_children_number(f"{root}/e") == (0, 0)
    assert c.get_all_children_number(f"{root}/missing")[0] == Err.NONODE
    assert c.get_all_children_number("/zookeeper") == (0, 2)


def test_who_am_i(server, raw_factory):
    c = raw_factory(server)
    err, ids = c.who_am_i()
    assert err == 0
    assert ids == [("ip", "127.0.0.1")]
    assert c.add_auth("digest", b"bob:pw") == 0
    err, ids = c.who_am_i()
    assert sorted(ids) == [("digest", "bob"), ("ip", "127.0.0.1")]
