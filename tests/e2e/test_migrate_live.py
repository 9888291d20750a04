"""The move from a running Apache ZooKeeper ensemble: `paddock mirror`,
Paddock servers that observe it and serve its clients
(`observeZooKeeper`), and `paddock takeover`.

A real three-server ZooKeeper ensemble (Debian's 3.8, and 3.9 from Maven
Central: the learner protocol is the same in both) holds a tree
and a client session with ephemerals, and takes writes throughout. The
mirror registers with its leader as an observer (ZooKeeper's learner
protocol), is synced by SNAP, and follows every committed txn. The leader
is killed midway: the mirror finds the next one and is synced by DIFF from
where it was. Once every acknowledged write is in, the ensemble is
stopped; the mirror writes a Paddock data directory, and Paddock starts
from it: the whole tree reads the same as it did on ZooKeeper, and the
session resumes there with its ephemerals.

An observer serves clients: reads from its copy, writes, sessions and syncs
through ZooKeeper's leader, sessions moving between ZooKeeper and Paddock.
Two observers take over: they go on as a Paddock ensemble from one zxid,
with every acknowledged write, session, ephemeral and watch.
"""

import os
import re
import signal
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest
from kazoo.client import KazooState

from kazoo.security import make_acl

from conftest import SUPER_PASSWORD, digest, make_kazoo
from ensemble import Writer
from test_migrate import assert_same_tree, fill, start_on, whole_tree, zkcli
from zkharness import HOST, Server, free_port, paddock_bin, wait_until, zookeeper_39_classpath
from zkwire import CreateMode, Err, Op, RawClient, Writer as RequestWriter, create_body

pytestmark = pytest.mark.paddock_only("Paddock following an Apache ZooKeeper ensemble")

TICK_MS = 200
# Peers of ZooKeeper's ensemble give up on a silent leader, and their
# clients' connections with it, after syncLimit ticks: 5 s, not ZooKeeper's
# usual 5 ticks (1 s here), because two test files run at once on two cores
# can stall a starting JVM for a second. The tests' leader changes are
# kills, seen at once on the closed sockets.
INIT_LIMIT_TICKS = 50
SYNC_LIMIT_TICKS = 25
SESSION_TIMEOUT_S = 30.0
# ZooKeeper caps a session's timeout at 20 ticks (4 s here) unless told
# otherwise; a client's pings then go unanswered after 2.7 s, which a starting
# JVM on a loaded machine can exceed (CI saw kazoo's ConnectionLoss on the
# first create). The tests' timeouts are what the clients ask for.
MAX_SESSION_TIMEOUT_MS = int(SESSION_TIMEOUT_S * 1000)
MIRROR_ID = 100
GONE_AFTER_S = 3
BULK = 300


class ZooKeeperEnsemble:
    """Three Apache ZooKeeper quorum peers on loopback ports, of Debian's
    release or (`classpath`) another."""

    def __init__(self, workdir, classpath=None, size=3):
        self.ports = {sid: (free_port(), free_port()) for sid in range(1, size + 1)}
        self.servers = {sid: self._server(workdir, sid) for sid in self.ports}
        for server in self.servers.values():
            server.java_classpath = classpath
        lines = {f"server.{sid}": f"{HOST}:{q}:{e}:participant;{HOST}:{self.servers[sid].port}"
                 for sid, (q, e) in self.ports.items()}
        for server in self.servers.values():
            server.config.update(lines)

    @staticmethod
    def _server(workdir, sid):
        server = Server(workdir / f"zk{sid}", {
            "tickTime": TICK_MS, "initLimit": INIT_LIMIT_TICKS, "syncLimit": SYNC_LIMIT_TICKS,
            "standaloneEnabled": "false", "extendedTypesEnabled": "true",
            "maxSessionTimeout": MAX_SESSION_TIMEOUT_MS,
            "reconfigEnabled": "true",
            "DigestAuthenticationProvider.superDigest": digest("super", SUPER_PASSWORD),
        }, name=f"zk{sid}", kind="zookeeper")
        server.java_main = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
        (server.data_dir / "myid").write_text(f"{sid}\n")
        return server

    @property
    def hosts(self):
        return ",".join(s.hosts for s in self.servers.values())

    @property
    def quorum_addresses(self):
        return ",".join(f"{HOST}:{q}" for q, _ in self.ports.values())

    def start(self):
        for server in self.servers.values():
            server.start(wait=False)
        for server in self.servers.values():
            server.wait_ready()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, kind, error, traceback):
        if error is not None:
            # pytest shows what a failed test printed: ZooKeeper's side.
            for sid, server in self.servers.items():
                print(f"--- zk{sid}'s log tail ---\n{server.stderr_tail()}")
        self.stop()

    def leader(self):
        for sid, server in self.servers.items():
            if server.running() and "Mode: leader" in server.four_letter("srvr"):
                return sid
        return None

    def zxid(self, sid):
        out = self.servers[sid].four_letter("srvr")
        return int(re.search(r"Zxid: (0x[0-9a-f]+)", out).group(1), 16)

    def stop(self):
        for server in self.servers.values():
            server.stop()


def close_all(clients):
    """Ends each kazoo client's session and connection."""
    for client in clients:
        client.stop()
        client.close()


class MirrorProcess:
    """`paddock mirror`, its output read line by line as it comes."""

    def __init__(self, ensemble, data_dir):
        self.proc = subprocess.Popen(
            [str(paddock_bin()), "mirror", "--from-zookeeper", ensemble.quorum_addresses,
             "--server-id", str(MIRROR_ID), "--tick-time", str(TICK_MS),
             "--gone-after", str(GONE_AFTER_S), "--data-dir", str(data_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self):
        return "\n".join(self.lines)

    def wait_for(self, pattern, timeout=30.0, after=0):
        found = wait_until(lambda: any(re.search(pattern, line)
                                       for line in self.lines[after:]), timeout=timeout)
        assert found, f"the mirror never said {pattern!r}:\n{self.output}"

    def zxid(self):
        zxids = [int(m.group(1), 16) for line in self.lines
                 if (m := re.search(r"at zxid (0x[0-9a-f]+)", line))]
        return max(zxids, default=0)

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def writes_of_every_kind(zk, server):
    """Each kind of txn a client causes, once the mirror is synced: a
    session that comes and goes with its ephemerals, sequential nodes, a
    container and a TTL node, an ACL change, a multi that succeeds and one
    that fails, and creates that move a quota's count."""
    other = make_kazoo(server)
    other.create("/app/other-eph", b"", ephemeral=True)
    other.create("/app/other-seq-", b"", ephemeral=True, sequence=True)
    other.stop()
    other.close()
    zk.create("/app/pseq-", b"", sequence=True)
    raw = RawClient(server.host, server.port)
    try:
        for path, op, flags, ttl in [
                ("/app/container-2", Op.createContainer, CreateMode.CONTAINER, None),
                ("/app/ttl-2", Op.createTTL, CreateMode.PERSISTENT_WITH_TTL, 60_000)]:
            assert raw.request(op, create_body(path, b"", flags=flags, ttl=ttl)).err == Err.OK
    finally:
        raw.close()
    zk.set_acls("/app/empty", [make_acl("world", "anyone", read=True, write=True, admin=True)])
    t = zk.transaction()
    t.create("/app/m1", b"1")
    t.set_data("/app", b"m")
    t.check("/app/empty", 0)
    t.delete("/app/m1")
    assert not any(isinstance(r, Exception) for r in t.commit())
    t = zk.transaction()
    t.create("/app/m2", b"2")
    t.check("/app/empty", 99)
    assert any(isinstance(r, Exception) for r in t.commit())
    for i in range(5):
        zk.create(f"/bulk/after-{i}", b"q")
    zk.delete("/bulk/after-0")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("release", ["3.8", "3.9"])
def test_a_mirror_follows_an_ensemble_across_a_leader_change_and_paddock_starts_from_it(
        tmp_path, release):
    classpath = zookeeper_39_classpath() if release == "3.9" else None
    with ZooKeeperEnsemble(tmp_path, classpath) as ensemble:
        assert f"Zookeeper version: {release}." in ensemble.servers[1].four_letter("srvr")
        mirror = None
        clients = []
        try:
            zk = make_kazoo(SimpleNamespace(hosts=ensemble.hosts))
            clients.append(zk)
            fill(ensemble.servers[1], zk, BULK)
            # A session that outlives the ensemble, reconnecting to whichever
            # address answers: in the end Paddock's, on a ZooKeeper server's port.
            holder = make_kazoo(SimpleNamespace(hosts=ensemble.hosts), timeout=SESSION_TIMEOUT_S)
            clients.append(holder)
            holder.create("/app/owned", b"mine", ephemeral=True)
            holder.create("/app/lock-", b"", ephemeral=True, sequence=True)
            session_id = holder.client_id[0]

            mirror = MirrorProcess(ensemble, tmp_path / "paddock-data")
            mirror.wait_for(r"synced by SNAP")
            writes_of_every_kind(zk, ensemble.servers[1])
            writer = Writer(zk, "/app", "w", sets=True)
            writer.start()
            assert wait_until(lambda: len(writer.acked) >= 50, timeout=30)

            old_leader = ensemble.leader()
            lines_before = len(mirror.lines)
            ensemble.servers[old_leader].kill()
            mirror.wait_for(r"lost the leader", after=lines_before)
            mirror.wait_for(r"synced by DIFF", after=lines_before)
            acked_before = len(writer.acked)
            assert wait_until(lambda: len(writer.acked) >= acked_before + 50, timeout=30), \
                writer.unknown[-5:]
            writer.stop()
            zk.delete("/app/seq-0000000002")
            zk.stop()
            zk.close()
            clients.remove(zk)

            leader = ensemble.leader()
            last = ensemble.zxid(leader)
            assert wait_until(lambda: mirror.zxid() >= last, timeout=20), \
                f"the mirror did not reach zxid {last:#x}:\n{mirror.output}"
            live = [s for s in ensemble.servers.values() if s.running()]
            expected = whole_tree(live[0], BULK)
            paths = {line.split(" ", 1)[0] for line in expected.splitlines()}
            assert set(writer.acked_paths()) <= paths

            port = ensemble.servers[old_leader].port
            ensemble.stop()
            assert mirror.proc.wait(timeout=GONE_AFTER_S + 30) == 0, mirror.output
            assert "wrote" in mirror.output, mirror.output
            # Every txn came out here as it did on ZooKeeper.
            assert "starting again" not in mirror.output, mirror.output

            moved = start_on(tmp_path, "paddock", "paddock", port)
            moved.config["dataDir"] = str(tmp_path / "paddock-data")
            moved.start()
            try:
                assert_same_tree(whole_tree(moved, BULK), expected)
                assert wait_until(lambda: holder.state == KazooState.CONNECTED,
                                  timeout=SESSION_TIMEOUT_S), "the session did not resume"
                assert holder.client_id[0] == session_id
                assert holder.get("/app/owned")[1].ephemeralOwner == session_id
            finally:
                moved.stop()
        finally:
            close_all(clients)
            if mirror:
                mirror.kill()


def observer(tmp_path, ensemble, name="observer", sid=MIRROR_ID):
    """A Paddock server that follows `ensemble` as its observer."""
    server = Server(tmp_path / name, {
        "tickTime": TICK_MS, "initLimit": 10, "syncLimit": 5,
        "observeZooKeeper": ensemble.quorum_addresses,
    }, name=name, kind="paddock")
    (server.data_dir / "myid").write_text(f"{sid}\n")
    return server


def set_body(path, data=b"x", version=-1):
    return RequestWriter().string(path).buffer(data).int(version).bytes()


def move_session(raw, server):
    """`raw`'s session, resumed on `server` with its last zxid (a new
    session when `raw` is None); the old connection is dropped, not
    closed. A server that has not yet applied the session's last zxid
    closes the connection unanswered, ZooKeeper's and Paddock's alike, and
    a client tries again, as this does for a few seconds."""
    if raw is None:
        return RawClient(server.host, server.port)
    raw.close_socket()
    deadline = time.monotonic() + 5
    while True:
        try:
            moved = RawClient(server.host, server.port, session_id=raw.session_id,
                              passwd=raw.passwd, last_zxid=raw.last_zxid)
            break
        except ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    assert moved.negotiated_timeout > 0, f"the session was refused by {server.name}"
    return moved


@pytest.mark.timeout(300)
@pytest.mark.parametrize("release", ["3.8", "3.9"])
def test_a_paddock_observer_serves_clients_of_a_zookeeper_ensemble(tmp_path, release):
    """Clients of the Paddock observer read locally and write through the
    ZooKeeper leader: writes, sequential names, sessions and their
    ephemerals, watches and sync are ZooKeeper's, on both sides, across a
    leader change."""
    classpath = zookeeper_39_classpath() if release == "3.9" else None
    with ZooKeeperEnsemble(tmp_path, classpath) as ensemble:
        paddock = None
        clients = []
        try:
            zk = make_kazoo(SimpleNamespace(hosts=ensemble.hosts))
            clients.append(zk)
            zk.create("/before", b"on zookeeper")
            paddock = observer(tmp_path, ensemble).start()
            client = make_kazoo(paddock)
            clients.append(client)
            assert client.get("/before")[0] == b"on zookeeper"

            # Writes through Paddock are ZooKeeper's: names, zxids, sessions.
            client.create("/app", b"v1")
            seq = client.create("/app/seq-", b"", sequence=True)
            client.create("/app/eph", b"", ephemeral=True)
            client.set("/app", b"v2")
            zk.sync("/app")
            assert zk.get("/app")[0] == b"v2"
            assert zk.exists(seq) is not None
            assert zk.exists("/app/eph").ephemeralOwner == client.client_id[0]

            # A write on ZooKeeper fires a watch set through Paddock.
            fired = threading.Event()
            client.get("/before", watch=lambda event: fired.set())
            zk.set("/before", b"changed")
            assert fired.wait(10), "the watch set through Paddock did not fire"
            client.sync("/before")
            assert client.get("/before")[0] == b"changed"

            # The leader alone expires sessions: Paddock's pings keep those of
            # its clients alive, past their timeout.
            holder = make_kazoo(paddock, timeout=2.0)
            clients.append(holder)
            holder.create("/app/held", b"", ephemeral=True)
            time.sleep(3 * 2.0)
            zk.sync("/app")
            assert zk.exists("/app/held").ephemeralOwner == holder.client_id[0]

            # A session moves from ZooKeeper to Paddock and back, writing on
            # each: the leader takes its writes from whichever server holds it.
            moving = move_session(None, ensemble.servers[1])
            assert moving.request(Op.create, create_body(
                "/app/moving", b"", flags=CreateMode.EPHEMERAL)).err == Err.OK
            for server in [paddock, ensemble.servers[2]]:
                moving = move_session(moving, server)
                assert moving.request(Op.setData, set_body("/app/moving")).err == Err.OK
            zk.sync("/app")
            assert zk.exists("/app/moving").version == 2
            moving.close()

            # Writes go on through Paddock while the ZooKeeper leader changes.
            writer = Writer(client, "/app", "w", sets=True)
            writer.start()
            assert wait_until(lambda: len(writer.acked) >= 30, timeout=30)
            ensemble.servers[ensemble.leader()].kill()
            acked = len(writer.acked)
            assert wait_until(lambda: len(writer.acked) >= acked + 30, timeout=60), \
                writer.unknown[-5:]
            writer.stop()
            assert client.client_id[0] == writer.session_at_start[0], "the session was lost"

            # The ephemeral goes with its session, on both sides.
            session_id = client.client_id[0]
            client.stop()
            client.close()
            clients.remove(client)
            zk.sync("/app")
            assert zk.exists("/app/eph") is None
            assert session_id not in {zk.exists(p).ephemeralOwner
                                      for p in ["/app/" + c for c in zk.get_children("/app")]}

            live = next(s for s in ensemble.servers.values() if s.running())
            reader = make_kazoo(paddock)
            clients.append(reader)
            reader.sync("/")
            assert_same_tree(whole_tree(paddock, 30), whole_tree(live, 30))
            paths = set(reader.get_children("/app"))
            assert {p.rsplit("/", 1)[1] for p in writer.acked_paths()} <= paths
        finally:
            close_all(clients)
            if paddock:
                paddock.stop()


@pytest.mark.timeout(300)
def test_paddock_observers_take_over_from_zookeeper_with_every_session(tmp_path):
    """Two Paddock observers, joined to ZooKeeper's configuration by
    reconfig, serve the clients (kazoo under a writing load, zkCli, a raw
    session moved from ZooKeeper); `paddock takeover` ends their following
    at one zxid, the ZooKeeper servers stop, and the two go on as a Paddock
    ensemble: every acknowledged write is there, sessions and their
    ephemerals live on, watches fire, zxids go on past ZooKeeper's. The
    fault harness's `takeover` scenario checks the same move's history
    for linearizability."""
    with ZooKeeperEnsemble(tmp_path) as ensemble:
        observers, clients = [], []
        try:
            zk = make_kazoo(SimpleNamespace(hosts=ensemble.hosts),
                            auth_data=[("digest", f"super:{SUPER_PASSWORD}")])
            clients.append(zk)
            zk.create("/before", b"on zookeeper")
            peer_ports = {sid: (free_port(), free_port()) for sid in (MIRROR_ID, MIRROR_ID + 1)}
            for sid in peer_ports:
                observers.append(observer(tmp_path, ensemble, name=f"paddock{sid}", sid=sid).start())
            # The observers join ZooKeeper's configuration, which its clients
            # (and those on Paddock) read from /zookeeper/config.
            lines = {sid: f"{HOST}:{peer}:{election}:observer;{HOST}:{s.port}"
                     for (sid, (peer, election)), s in zip(peer_ports.items(), observers)}
            zk.reconfig(joining=",".join(f"server.{sid}={line}" for sid, line in lines.items()),
                        leaving=None, new_members=None)
            on_paddock = make_kazoo(observers[1])
            clients.append(on_paddock)
            on_paddock.sync("/zookeeper/config")
            config = on_paddock.get("/zookeeper/config")[0].decode()
            assert f"server.{MIRROR_ID + 1}={lines[MIRROR_ID + 1]}" in config, config
            assert config == zk.get("/zookeeper/config")[0].decode()
            members = tmp_path / "members.cfg"
            members.write_text("".join(
                f"server.{sid}={line.replace(':observer', '')}\n" for sid, line in lines.items()))

            holder = make_kazoo(observers[0])
            clients.append(holder)
            holder.create("/held", b"", ephemeral=True)
            fired = threading.Event()
            holder.get("/before", watch=lambda event: fired.set())
            moving = move_session(None, ensemble.servers[1])
            assert moving.request(Op.create, create_body(
                "/moved", b"", flags=CreateMode.EPHEMERAL)).err == Err.OK
            moving = move_session(moving, observers[1])
            writer_client = make_kazoo(observers[1])
            clients.append(writer_client)
            writer_client.ensure_path("/app")
            writer = Writer(writer_client, "/app", "w", sets=True)
            writer.start()
            assert wait_until(lambda: len(writer.acked) >= 30, timeout=30)
            # The Java client writes through an observer as well.
            zkcli(observers[0], "create /java\n" + "".join(
                f"create /java/n{i} v{i}\n" for i in range(20)) + "set /java/n0 again\nquit\n")
            zk.sync("/java")
            assert len(zk.get_children("/java")) == 20
            assert zk.get("/java/n0")[0] == b"again"

            out = subprocess.run(
                [str(paddock_bin()), "takeover", "--server", observers[0].hosts,
                 "--members", str(members), "--wait", "60"],
                capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stdout + out.stderr
            cut = int(re.search(r"zxid (0x[0-9a-f]+)", out.stdout).group(1), 16)
            ensemble.stop()

            acked = len(writer.acked)
            assert wait_until(lambda: len(writer.acked) >= acked + 30, timeout=60), \
                writer.unknown[-5:]
            writer.stop()
            assert writer_client.client_id == writer.session_at_start, "the writer's session was lost"
            reader = make_kazoo(SimpleNamespace(hosts=",".join(s.hosts for s in observers)))
            clients.append(reader)
            reader.sync("/")
            assert reader.exists("/held").ephemeralOwner == holder.client_id[0]
            assert reader.exists("/moved").ephemeralOwner == moving.session_id
            # The raw session's connection closed with the takeover; it resumes
            # on the ensemble, as a client library reconnects.
            moving = move_session(moving, observers[0])
            assert moving.request(Op.setData, set_body("/moved")).err == Err.OK
            reader.set("/before", b"on paddock")
            assert fired.wait(10), "the watch set before the takeover did not fire"
            assert reader.exists("/before").mzxid > cut, "zxids do not go on past ZooKeeper's"
            paths = set(reader.get_children("/app"))
            assert {p.rsplit("/", 1)[1] for p in writer.acked_paths()} <= paths
            out = zkcli(observers[1], "set /java/n1 after\nget /java/n1\nls /java\nquit\n")
            assert "after" in out and "n19" in out, out
            assert_same_tree(whole_tree(observers[0], 30), whole_tree(observers[1], 30))
            config = reader.get("/zookeeper/config")[0].decode()
            assert f"server.{MIRROR_ID}={HOST}:{peer_ports[MIRROR_ID][0]}" in config, config
            assert ":observer" not in config and "server.1=" not in config, config

            # A restart with zoo.cfg unchanged stays in the ensemble.
            observers[1].stop()
            observers[1].start()
            restart_log = observers[1].log_path.read_text().split("===== start #2")[-1]
            assert "this server took over from ZooKeeper" in restart_log
            assert reader.exists("/moved") is not None
            moving.close()
            reader.sync("/")
            assert wait_until(lambda: reader.exists("/moved") is None, timeout=10)
        finally:
            close_all(clients)
            for server in observers:
                server.stop()
