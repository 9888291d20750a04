"""The move from Apache ZooKeeper to Paddock and back, offline.

A real ZooKeeper 3.8 (Debian's package) is given every kind of znode, ACL
and quota, 100k znodes and a log that runs past its last snapshot, with a
client session holding ephemerals. It is stopped, `paddock import` reads
its data directory, and Paddock starts on the same port: the session
resumes there, and every znode, stat and ACL reads the same through both
servers. Paddock then takes more writes, stops, `paddock export` writes a
snapshot, and a fresh ZooKeeper starts from it on the same port: the tree
and the session are there again.
"""

import difflib
import subprocess

import pytest
from kazoo.client import KazooState
from kazoo.security import make_acl, make_digest_acl

from conftest import make_kazoo
from ensemble import Ensemble
from zkharness import ZK_CLI, Server, paddock_bin, wait_until, zookeeper_39_classpath
from zkwire import CreateMode, Err, Op, RawClient, create_body

pytestmark = pytest.mark.paddock_only("moves data between Apache ZooKeeper and Paddock")

BULK = 100_000
BULK_PER_MULTI = 1_000
BIG_BYTES = 1_000_000
SESSION_TIMEOUT_S = 30.0


def zookeeper_config(**extra):
    config = {
        "extendedTypesEnabled": "true",
        # A snapshot every 20-40 txns (a multi is one), so the import reads
        # several logs and a log that runs past the newest snapshot.
        "zookeeper.snapCount": "40",
    }
    config.update(extra)
    return config


def start_on(tmp_path, name, kind, port, config=None):
    """A server on a given port, as an operator keeps the address while
    the server behind it changes."""
    s = Server(tmp_path / name, config, name=name, kind=kind)
    s.port = port
    s.config["clientPort"] = str(port)
    return s


def paddock(*args, timeout=300):
    p = subprocess.run([str(paddock_bin()), *map(str, args)], capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, f"paddock {' '.join(map(str, args))}: {p.stdout}{p.stderr}"
    return p.stdout


def zkcli(server, script):
    p = subprocess.run([ZK_CLI, "-server", server.hosts], input=script, capture_output=True,
                       text=True, timeout=120,
                       env={"JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1", "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def fill(server, zk, bulk):
    """Every kind of znode ZooKeeper 3.8 has, and `bulk` more."""
    zk.create("/app", b"config")
    for _ in range(3):
        zk.create("/app/seq-", b"s", sequence=True)
    zk.delete("/app/seq-0000000001")
    zk.create("/app/empty", b"")
    zk.create("/app/big", b"x" * BIG_BYTES)
    zk.set("/app", b"config-2")
    zk.set("/app", b"config-3")
    raw = RawClient(server.host, server.port)
    try:
        for path, flags, ttl in [("/app/null", CreateMode.PERSISTENT, None),
                                 ("/app/container", CreateMode.CONTAINER, None),
                                 ("/app/ttl", CreateMode.PERSISTENT_WITH_TTL, 3_600_000)]:
            op = Op.createTTL if ttl else (Op.createContainer if flags == CreateMode.CONTAINER
                                          else Op.create)
            data = None if path == "/app/null" else b"d"
            assert raw.request(op, create_body(path, data, flags=flags, ttl=ttl)).err == Err.OK
    finally:
        raw.close()
    zk.create("/app/container/child", b"c")
    zk.create("/locked", b"secret", acl=[make_digest_acl("alice", "pw", all=True),
                                         make_acl("world", "anyone", read=True)])
    zk.create("/public", b"p")
    zk.set_acls("/public", [make_acl("world", "anyone", read=True, write=True)])
    zkcli(server, "setquota -n 200000 /bulk\nsetquota -b 1000000 /app\nquit\n")
    zk.create("/bulk", b"")
    for start in range(0, bulk, BULK_PER_MULTI):
        t = zk.transaction()
        for i in range(start, min(start + BULK_PER_MULTI, bulk)):
            t.create(f"/bulk/n{i:06d}", b"v%d" % i)
        assert all(r is True or isinstance(r, str) for r in t.commit())
    # After the bulk (and several snapshots), more log.
    for i in range(50):
        zk.set("/bulk/n000007", b"after-%d" % i)
    zk.delete("/bulk/n000008")


def dump(zk, root="/"):
    """Every znode under root as kazoo reads it: path -> (data, stat, acl)."""
    out = {}
    level = [root]
    while level:
        gets = [(p, zk.get_async(p), zk.get_acls_async(p), zk.get_children_async(p))
                for p in level]
        level = []
        for path, get, acls, children in gets:
            data, stat = get.get(timeout=60)
            acl, _ = acls.get(timeout=60)
            out[path] = (data, tuple(stat), sorted((a.perms, a.id.scheme, a.id.id) for a in acl))
            level += [("" if path == "/" else path) + "/" + c for c in children.get(timeout=60)]
    return out


def small_part(zk):
    """What kazoo compares itself: everything but the 100k bulk znodes."""
    return {root: dump(zk, root) for root in ("/app", "/locked", "/public", "/zookeeper")}


def whole_tree(server, bulk):
    """Every znode, a line each (path, data, stat, ACL), and the digest,
    read by `paddock digest` (pipelined: kazoo takes a minute for 100k)."""
    out = paddock("digest", server.hosts, "--list")
    count = int(out.split("\nznodes ")[1].split()[0])
    assert count > bulk, out[-300:]
    return out


def assert_same_tree(got, expected):
    """The whole trees are equal; if not, the lines that differ."""
    if got != expected:
        diff = difflib.unified_diff(expected.splitlines(), got.splitlines(), "expected", "got",
                                    lineterm="", n=0)
        pytest.fail("the trees differ:\n" + "\n".join(list(diff)[:40]))


def session_holder(server):
    """A client whose session holds ephemerals and keeps reconnecting to
    the same address, as an application's client does.

    The address is listed twice. kazoo waits the session timeout over the
    number of addresses for the answer to a connect, and ZooKeeper, reached
    while it is still starting, fails half way through closing the
    connection (a NullPointerException in `NIOServerCnxn.close`) and
    leaves it open: with one address, a client that came that early sat
    out the whole 30 s the test waits for it, and its session's too."""
    holder = make_kazoo(server, timeout=SESSION_TIMEOUT_S, hosts=f"{server.hosts},{server.hosts}")
    holder.create("/app/owned", b"mine", ephemeral=True)
    holder.create("/app/lock-", b"", ephemeral=True, sequence=True)
    return holder


def assert_resumed(holder, session_id, stop_by):
    assert wait_until(lambda: holder.state == KazooState.CONNECTED, timeout=stop_by), \
        "the client did not reconnect"
    assert holder.client_id[0] == session_id
    # A request through the resumed session: its ephemerals are its own.
    _, stat = holder.get("/app/owned")
    assert stat.ephemeralOwner == session_id


@pytest.mark.timeout(400)
@pytest.mark.parametrize("compression,bulk,release", [
    (None, BULK, "3.8"), ("gz", 2_000, "3.8"), ("snappy", 2_000, "3.8"), (None, 2_000, "3.9")])
def test_zookeeper_to_paddock_and_back(tmp_path, compression, bulk, release):
    """Uncompressed with 100k znodes; the compressed snapshots with fewer,
    as only how the snapshot is read differs; and ZooKeeper 3.9, whose
    snapshots end with the last zxid, both ways."""
    config = zookeeper_config()
    if compression:
        config["zookeeper.snapshot.compression.method"] = compression
    classpath = zookeeper_39_classpath() if release == "3.9" else None
    first = Server(tmp_path / "zookeeper", config, name="zookeeper", kind="zookeeper")
    first.java_classpath = classpath
    first.start()
    assert f"Zookeeper version: {release}." in first.four_letter("srvr")
    port = first.port
    holder = None
    servers = [first]
    try:
        zk = make_kazoo(first)
        fill(first, zk, bulk)
        holder = session_holder(first)
        session_id = holder.client_id[0]
        before, before_small = whole_tree(first, bulk), small_part(zk)
        zk.stop()
        zk.close()
        first.stop()
        suffix = {"gz": ".gz", "snappy": ".snappy", None: ""}[compression]
        snapshots = list((first.data_dir / "version-2").glob("snapshot.*"))
        # The empty one ZooKeeper starts with and at least one of the fill's:
        # it skips a snapshot due while the last is still being written, so
        # a slow machine may see only one of the two or three it is due.
        assert len(snapshots) >= 2 and all(s.name.endswith(suffix) for s in snapshots)

        moved = start_on(tmp_path, "paddock", "paddock", port)
        out = paddock("import", "--from-zookeeper", first.data_dir, "--data-dir", moved.data_dir)
        assert "txns replayed" in out, out
        moved.start()
        servers.append(moved)
        assert_resumed(holder, session_id, SESSION_TIMEOUT_S)
        reader = make_kazoo(moved)
        assert small_part(reader) == before_small
        assert_same_tree(whole_tree(moved, bulk), before)

        # Paddock goes on from ZooKeeper's zxids, then goes back.
        reader.create("/on-paddock", b"new")
        reader.set("/app", b"config-4")
        reader.delete("/bulk/n000009")
        holder.create("/app/owned-later", b"", ephemeral=True)
        last_on_zookeeper = max(mzxid for _, (_, mzxid, *_), _ in before_small["/app"].values())
        assert reader.exists("/on-paddock").czxid > last_on_zookeeper
        on_paddock, on_paddock_small = whole_tree(moved, bulk), small_part(reader)
        reader.stop()
        reader.close()
        moved.stop()

        back = start_on(tmp_path, "zookeeper-again", "zookeeper", port, zookeeper_config())
        back.java_classpath = classpath
        out = paddock("export", "--data-dir", moved.data_dir, "--to-zookeeper", back.data_dir)
        assert "wrote" in out, out
        back.start()
        servers.append(back)
        assert_resumed(holder, session_id, SESSION_TIMEOUT_S)
        again = make_kazoo(back)
        assert small_part(again) == on_paddock_small
        assert_same_tree(whole_tree(back, bulk), on_paddock)
        assert again.exists("/app/owned-later").ephemeralOwner == session_id
        again.stop()
        again.close()
    except AssertionError as failure:
        # A client that cannot resume says little on its own: what each
        # server logged does.
        tails = "\n".join(f"--- {s.name} log tail ---\n{s.stderr_tail(40)}" for s in servers)
        raise AssertionError(f"{failure}\n{tails}") from failure
    finally:
        if holder is not None:
            holder.stop()
            holder.close()
        for s in servers:
            s.stop()


def zookeeper_with_znodes(tmp_path, count, config, stop="stop"):
    """A ZooKeeper with `config` given /n0../n<count-1>, then stopped or
    killed."""
    zookeeper = Server(tmp_path / "zookeeper", config, name="zookeeper", kind="zookeeper")
    zookeeper.start()
    try:
        zk = make_kazoo(zookeeper)
        for i in range(count):
            zk.create(f"/n{i}", b"value-%d" % i)
        zk.stop()
        zk.close()
    finally:
        getattr(zookeeper, stop)()
    return zookeeper


def zookeeper_with_twenty_znodes(tmp_path, stop):
    """No snapshot but the first: the 20 creates stay in its log."""
    return zookeeper_with_znodes(tmp_path, 20, zookeeper_config(**{"zookeeper.snapCount": "100000"}),
                                 stop)


def test_a_damaged_zookeeper_log_is_refused_by_name_and_offset(tmp_path):
    zookeeper = zookeeper_with_twenty_znodes(tmp_path, "stop")
    logs = sorted((zookeeper.data_dir / "version-2").glob("log.*"))
    log = logs[-1]
    data = bytearray(log.read_bytes())
    at = data.index(b"value-10")
    data[at] ^= 0x01
    log.write_bytes(bytes(data))
    target = tmp_path / "paddock-data"
    p = subprocess.run([str(paddock_bin()), "import", "--from-zookeeper", str(zookeeper.data_dir),
                        "--data-dir", str(target)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert log.name in p.stderr and "offset" in p.stderr and "checksum" in p.stderr, p.stderr
    snapshots = target / "version-paddock" / "snapshots"
    assert not snapshots.exists() or not any(snapshots.iterdir()), "an import that failed wrote"


def test_a_log_cut_short_by_a_crash_is_read_up_to_the_cut(tmp_path):
    """ZooKeeper killed mid-write leaves half an entry at the end of its
    last log: the import takes what is whole before it, as ZooKeeper's
    own restart does, and says where the log was cut."""
    zookeeper = zookeeper_with_twenty_znodes(tmp_path, "kill")
    log = sorted((zookeeper.data_dir / "version-2").glob("log.*"))[-1]
    data = log.read_bytes()
    last = data.index(b"value-19")
    log.write_bytes(data[:last + 3])
    target = Server(tmp_path / "paddock", name="paddock", kind="paddock")
    out = paddock("import", "--from-zookeeper", zookeeper.data_dir, "--data-dir", target.data_dir)
    assert log.name in out and "cut short" in out, out
    target.start()
    try:
        zk = make_kazoo(target)
        assert zk.get("/n18")[0] == b"value-18"
        assert zk.exists("/n19") is None
        zk.stop()
        zk.close()
    finally:
        target.stop()


@pytest.mark.parametrize("compression", [None, "gz"])
def test_a_snapshot_zookeeper_never_finished_is_passed_over_as_zookeeper_does(tmp_path,
                                                                             compression):
    """A server stopped while writing a snapshot leaves it cut short.
    ZooKeeper starts from the snapshot before it and replays its logs; the
    import does the same and names the file it passed over, and the two
    servers then hold the same tree."""
    config = zookeeper_config()
    if compression:
        config["zookeeper.snapshot.compression.method"] = compression
    zookeeper = zookeeper_with_znodes(tmp_path, 120, config)
    snapshots = sorted((zookeeper.data_dir / "version-2").glob("snapshot.*"),
                       key=lambda p: int(p.name.split(".")[1], 16))
    assert len(snapshots) > 2, snapshots
    newest = snapshots[-1]
    newest.write_bytes(newest.read_bytes()[:newest.stat().st_size // 2])
    # ZooKeeper writes a snapshot of its own when it starts: import from a
    # copy of the directory as it was.
    copy = tmp_path / "zookeeper-copy"
    subprocess.run(["cp", "-r", str(zookeeper.data_dir), str(copy)], check=True)

    moved = Server(tmp_path / "paddock", name="paddock", kind="paddock")
    out = paddock("import", "--from-zookeeper", copy, "--data-dir", moved.data_dir)
    assert f"passed over {copy / 'version-2' / newest.name}" in out, out
    assert snapshots[-2].name in out, out
    zookeeper.start()
    try:
        expected = whole_tree(zookeeper, 120)
    finally:
        zookeeper.stop()
    moved.start()
    try:
        assert_same_tree(whole_tree(moved, 120), expected)
    finally:
        moved.stop()


def test_an_ensemble_starts_from_one_zookeeper_directory_imported_into_each_server(tmp_path):
    """docs/MIGRATION.md's ensemble steps: the same ZooKeeper data imported
    into each server's data directory with its zoo.cfg, which records the
    voters; the three servers then elect a leader, hold ZooKeeper's tree on
    every one of them, and take writes with zxids past ZooKeeper's."""
    zookeeper = Server(tmp_path / "zookeeper", zookeeper_config(), name="zookeeper",
                       kind="zookeeper")
    zookeeper.start()
    try:
        zk = make_kazoo(zookeeper)
        zk.create("/locked", b"secret", acl=[make_digest_acl("alice", "pw", all=True),
                                             make_acl("world", "anyone", read=True)])
        for i in range(300):
            zk.create(f"/n{i:03d}", b"value-%d" % i)
        last_on_zookeeper = zk.exists("/n299").czxid
        zk.stop()
        zk.close()
        expected = whole_tree(zookeeper, 300)
    finally:
        zookeeper.stop()

    with Ensemble(tmp_path / "ensemble", voters=3) as ensemble:
        for member in ensemble.members:
            member.write_config()
            out = paddock("import", "--from-zookeeper", zookeeper.data_dir,
                          "--config", member.config_path)
            assert "wrote" in out, out
        ensemble.start()
        ensemble.wait_all_serving()
        for member in ensemble.members:
            assert_same_tree(whole_tree(member, 300), expected)
        client = ensemble.client(ensemble.leader())
        client.create("/on-paddock", b"")
        assert client.exists("/on-paddock").czxid > last_on_zookeeper
        for member in ensemble.members:
            reader = ensemble.client(member)
            assert wait_until(lambda: reader.exists("/on-paddock") is not None, timeout=10)
