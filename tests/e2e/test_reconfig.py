"""Dynamic reconfiguration (ZooKeeper 3.5+'s reconfig request) through
kazoo: the checks and error codes of ZooKeeper 3.8's PrepRequestProcessor,
a server removed and joined back, and a wiped server replaced, with every
server ending on the same configuration and writes going on.

The ensembles are Paddock's (the harness starts no ZooKeeper ensemble);
what a standalone server answers runs against both."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from kazoo.exceptions import (BadArgumentsError, BadVersionError, ConnectionLoss, MarshallingError,
                              NewConfigNoQuorumError, NoAuthError, ReconfigDisabledError,
                              UnimplementedError)

from conftest import SUPER_PASSWORD, digest, make_kazoo
from ensemble import Ensemble, wait_for
from zkharness import ZK_CLI, ZK_JARS, Server, paddock_bin

needs_zkcli = pytest.mark.skipif(
    not (os.path.exists(ZK_CLI) and os.path.exists(f"{ZK_JARS}/zookeeper.jar")),
    reason="Debian's zookeeper package is not installed (apt-get install zookeeper)")


def test_reconfig_is_off_unless_enabled(zk):
    """reconfigEnabled is false by default: refused before anything else,
    on a standalone server as on an ensemble."""
    with pytest.raises(ReconfigDisabledError):
        zk.reconfig(joining=None, leaving="2", new_members=None)


RECONFIG_CONFIG = {
    "reconfigEnabled": "true",
    "DigestAuthenticationProvider.superDigest": digest("super", SUPER_PASSWORD),
}


@pytest.fixture(scope="module")
def ens(tmp_path_factory):
    e = Ensemble(tmp_path_factory.mktemp("reconfig"), voters=3, config=RECONFIG_CONFIG)
    try:
        e.start()
    except Exception:
        e.close()
        raise
    yield e
    e.close()


def config_of(client):
    data, stat = client.get("/zookeeper/config")
    return data.decode(), stat


def servers_in(text):
    return sorted(int(line.split("=")[0][len("server."):])
                  for line in text.splitlines() if line.startswith("server."))


def version_of(text):
    return int(text.splitlines()[-1].split("=")[1], 16)


def superuser(ens, member):
    c = ens.client(member)
    c.add_auth("digest", f"super:{SUPER_PASSWORD}")
    return c


def line_of(member, role="participant"):
    """The member's server line as a reconfig joins it."""
    return (f"server.{member.id}={member.host}:{member.peer_port}:"
            f"{member.election_port}:{role};{member.port}")


def assert_seen_on(ens, member, *paths):
    """After a sync, `member` holds every one of `paths`."""
    c = ens.client(member)
    c.sync("/")
    for path in paths:
        assert c.exists(path) is not None, f"{member.name} lacks {path}"


def assert_every_server_holds(ens, members, expected):
    for member in members:
        c = ens.client(member)
        assert wait_for(lambda: (c.sync("/zookeeper/config") or True)
                        and config_of(c)[0] == expected, timeout=15,
                        what=f"{member.name} to hold the new configuration"), \
            f"{member.name}: {config_of(c)[0]!r}"


@pytest.mark.paddock_only("ensembles are configured the Paddock way")
def test_checks_come_in_zookeeper_s_order(ens):
    leader = ens.leader()
    follower = next(m for m in ens.members if m is not leader)
    anyone = ens.client(follower)
    # A quorum of the new configuration cannot be reached: three servers
    # that do not exist, checked before the ACL, as in ZooKeeper.
    phantoms = ",".join(f"server.{i}=127.0.0.1:{i}1:{i}2:participant;{i}3" for i in (7, 8, 9))
    with pytest.raises(NewConfigNoQuorumError):
        anyone.reconfig(joining=phantoms, leaving=None, new_members=None)
    with pytest.raises(NoAuthError):
        anyone.reconfig(joining=None, leaving="3", new_members=None)
    root = superuser(ens, follower)
    with pytest.raises(BadVersionError):
        root.reconfig(joining=None, leaving="3", new_members=None, from_config=0x123)
    with pytest.raises(BadArgumentsError):
        root.reconfig(joining=None, leaving="2,3", new_members=None)
    with pytest.raises(BadArgumentsError):
        root.reconfig(joining="server.4=127.0.0.1:1:2", leaving=None, new_members=None)
    with pytest.raises(MarshallingError):
        root.reconfig(joining=None, leaving="abc", new_members=None)
    # Nothing changed.
    text, _ = config_of(anyone)
    assert servers_in(text) == [1, 2, 3] and version_of(text) == 0


@pytest.mark.paddock_only("ensembles are configured the Paddock way")
def test_a_server_leaves_and_joins_again_through_a_follower(ens):
    leader = ens.leader()
    follower = next(m for m in ens.members if m is not leader)
    leaving = next(m for m in ens.members if m not in (leader, follower))
    root = superuser(ens, follower)
    watcher = ens.client(leader)
    changed = []
    watcher.get("/zookeeper/config", watch=changed.append)

    before, _ = config_of(root)
    data, stat = root.reconfig(joining=None, leaving=str(leaving.id), new_members=None,
                               from_config=version_of(before))
    text = data.decode()
    assert servers_in(text) == sorted(m.id for m in ens.members if m is not leaving)
    assert version_of(text) == stat.mzxid > 0 and stat.version == -1
    assert wait_for(lambda: changed, timeout=10, what="the config watch to fire")
    assert changed[0].type == "CHANGED" and changed[0].path == "/zookeeper/config"
    kept = [m for m in ens.members if m is not leaving]
    assert_every_server_holds(ens, kept, text)
    writer = ens.client(leader)
    writer.create("/written-without-it", b"")

    line = line_of(leaving)
    data, stat = root.reconfig(joining=line, leaving=None, new_members=None)
    text = data.decode()
    assert servers_in(text) == [1, 2, 3]
    assert f"{line.replace(f';{leaving.port}', f';0.0.0.0:{leaving.port}')}\n" in text
    assert_every_server_holds(ens, ens.members, text)
    assert_seen_on(ens, leaving, "/written-without-it")
    writer.create("/written-with-it", b"")
    assert_seen_on(ens, leaving, "/written-with-it")


@pytest.mark.paddock_only("ensembles are configured the Paddock way")
def test_a_wiped_server_is_replaced_and_catches_up(ens):
    leader = ens.leader()
    replaced = next(m for m in ens.members if m is not leader)
    root = superuser(ens, leader)
    writer = ens.client(leader)
    for i in range(50):
        writer.create(f"/before-the-replacement-{i}", b"x" * 100)
    replaced.kill()
    replaced.wipe()
    data, _ = root.reconfig(joining=None, leaving=str(replaced.id), new_members=None)
    assert replaced.id not in servers_in(data.decode())
    replaced.spawn()
    data, _ = root.reconfig(joining=line_of(replaced), leaving=None, new_members=None)
    text = data.decode()
    replaced.wait_serving(60)
    assert_every_server_holds(ens, ens.members, text)
    assert_seen_on(ens, replaced, "/before-the-replacement-49")
    ens.assert_trees_identical()


@pytest.mark.paddock_only("ensembles are configured the Paddock way")
def test_a_removed_server_restarted_waits_to_be_joined_again(ens):
    """A server a reconfig removed starts again from its own data (which
    records that it left) and waits outside every quorum, as ZooKeeper's
    non-voting follower does, until a reconfig joins it again."""
    leader = ens.leader()
    removed = next(m for m in ens.members if m is not leader)
    root = superuser(ens, leader)
    data, _ = root.reconfig(joining=None, leaving=str(removed.id), new_members=None)
    assert removed.id not in servers_in(data.decode())
    def removal_in_a_snapshot():
        # The snapshot taken after the change, which a restart starts from.
        log = removed.log_path.read_text(errors="replace").rsplit("start #", 1)[-1]
        _, found, after = log.partition("the group's membership changed")
        return found and "snapshot written" in after
    assert wait_for(removal_in_a_snapshot, timeout=10,
                    what=f"{removed.name} to snapshot its removal")
    marks = ens.log_marks()
    removed.restart(wait=False)
    assert wait_for(lambda: "not in the ensemble's membership" in ens.log_since(marks),
                    timeout=30, what=f"{removed.name} to say it waits outside the membership")
    assert removed.running(), removed.log_tail()
    ens.client(leader).create("/written-while-it-waited", b"")

    data, _ = root.reconfig(joining=line_of(removed), leaving=None, new_members=None)
    removed.wait_serving(60)
    assert_every_server_holds(ens, ens.members, data.decode())
    assert_seen_on(ens, removed, "/written-while-it-waited")


def test_a_standalone_server_serves_no_reconfig(tmp_path):
    """With reconfigEnabled, a standalone server answers Unimplemented, as
    ZooKeeper's does (it has no leader to reconfigure)."""
    server = Server(tmp_path / "standalone", dict(RECONFIG_CONFIG))
    server.start()
    try:
        c = make_kazoo(server)
        c.add_auth("digest", f"super:{SUPER_PASSWORD}")
        with pytest.raises(UnimplementedError):
            c.reconfig(joining=None, leaving="2", new_members=None)
        c.stop()
        c.close()
    finally:
        server.stop()


@pytest.mark.paddock_only("ensembles are configured the Paddock way")
def test_the_leader_removed_hands_over_and_writes_go_on(ens):
    old_leader = ens.leader()
    follower = next(m for m in ens.members if m is not old_leader)
    root = superuser(ens, follower)
    data, _ = root.reconfig(joining=None, leaving=str(old_leader.id), new_members=None)
    assert old_leader.id not in servers_in(data.decode())
    new_leader = ens.leader(exclude=[old_leader])
    assert new_leader is not old_leader
    writer = ens.client(new_leader)
    writer.create("/after-the-leader-left", b"")
    data, _ = root.reconfig(joining=line_of(old_leader), leaving=None, new_members=None)
    assert_every_server_holds(ens, ens.members, data.decode())
    assert_seen_on(ens, old_leader, "/after-the-leader-left")


@pytest.mark.paddock_only("ensembles are configured the Paddock way")
def test_a_participant_becomes_an_observer_and_back_with_new_members(ens):
    leader = ens.leader()
    moved = next(m for m in ens.members if m is not leader)
    root = superuser(ens, leader)
    members = ",".join(line_of(m, "observer" if m is moved else "participant")
                       for m in ens.members)
    data, _ = root.reconfig(joining=None, leaving=None, new_members=members)
    text = data.decode()
    assert f"server.{moved.id}={moved.host}:{moved.peer_port}:{moved.election_port}:observer;" \
        in text
    assert_every_server_holds(ens, ens.members, text)
    writer = ens.client(leader)
    writer.create("/seen-by-the-observer", b"")
    assert_seen_on(ens, moved, "/seen-by-the-observer")
    assert wait_for(lambda: moved.mode() == "observer", timeout=10,
                    what=f"{moved.name}'s srvr to say observer"), moved.mode()
    members = ",".join(line_of(m) for m in ens.members)
    data, _ = root.reconfig(joining=None, leaving=None, new_members=members)
    assert ":observer" not in data.decode()
    assert_every_server_holds(ens, ens.members, data.decode())
    assert wait_for(lambda: moved.mode() in ("follower", "leader"), timeout=10,
                    what=f"{moved.name}'s srvr to say it votes again"), moved.mode()


@pytest.mark.paddock_only("ensembles are configured the Paddock way")
def test_three_servers_grow_to_five_and_shrink_back_in_one_change_each(tmp_path):
    """Two servers join in one reconfig (a joint change), then two of the
    first leave in one, the leader among them: writes go on throughout,
    every server ends on the same configuration and tree."""
    with Ensemble(tmp_path / "grow", voters=3, config=RECONFIG_CONFIG) as ens:
        ens.start()
        root = superuser(ens, ens.leader())
        writer = ens.client(all_hosts=True)
        writer.create("/before", b"")
        new = [ens.add_member(), ens.add_member()]
        for member in new:
            member.spawn()
        data, _ = root.reconfig(joining=",".join(line_of(m) for m in new), leaving=None,
                                new_members=None)
        text = data.decode()
        assert servers_in(text) == [1, 2, 3, 4, 5]
        for member in new:
            member.wait_serving(60)
        assert_every_server_holds(ens, ens.members, text)
        writer.create("/grown", b"")
        for member in new:
            assert_seen_on(ens, member, "/before", "/grown")

        leader = ens.leader()
        leaving = [leader] + [m for m in ens.members[:3] if m is not leader][:1]
        staying = [m for m in ens.members if m not in leaving]
        root = superuser(ens, staying[0])
        data, _ = root.reconfig(joining=None, leaving=",".join(str(m.id) for m in leaving),
                                new_members=None)
        text = data.decode()
        assert servers_in(text) == sorted(m.id for m in staying)
        assert ens.leader(exclude=leaving) in staying
        assert_every_server_holds(ens, staying, text)
        writer = ens.client(staying[-1])
        writer.create("/shrunk", b"")
        for member in leaving:
            member.kill()
        ens.assert_trees_identical(members=staying)


@needs_zkcli
@pytest.mark.paddock_only("ensembles are configured the Paddock way")
@pytest.mark.parametrize("cli", ["zkCli", "paddock shell"])
def test_the_shell_reconfigures_with_remove_and_add(ens, cli):
    """Debian's zkCli (the Java client's ZooKeeperAdmin) and `paddock
    shell` as an operator uses them: addauth as the superuser, `reconfig
    -remove`, `reconfig -add`, `config`, with the same output."""
    leader = ens.leader()
    follower = next(m for m in ens.members if m is not leader)
    removed = next(m for m in ens.members if m not in (leader, follower))
    script = (f"addauth digest super:{SUPER_PASSWORD}\n"
              f"reconfig -remove {removed.id}\n"
              f"reconfig -add {line_of(removed)}\n"
              "config\n")
    env = dict(os.environ, TZ="UTC", JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1")
    argv = ([ZK_CLI, "-server", follower.hosts] if cli == "zkCli"
            else [str(paddock_bin()), "shell", follower.hosts])
    run = subprocess.run(argv, input=script, capture_output=True, text=True, timeout=120,
                         env=env)
    out = run.stdout
    assert out.count("Committed new configuration:") == 2, out + run.stderr
    without = [line for line in out.splitlines() if line.startswith("server.")]
    # The first answer lists two servers, the second and `config` three.
    assert len(without) == 2 + 3 + 3, out
    text, _ = config_of(ens.client(follower))
    assert servers_in(text) == [1, 2, 3]
    assert f"version={text.splitlines()[-1].split('=')[1]}" in out
    assert_every_server_holds(ens, ens.members, text)


# ------------------------------------------------------------ Curator

CURATOR = Path(__file__).resolve().parents[1] / "curator"
CURATOR_CACHE = Path(os.environ.get("PADDOCK_CURATOR_CACHE",
                                    Path.home() / ".cache" / "paddock-curator"))


def curator_classpath():
    """Curator's jars (fetched from Maven Central once) and
    CuratorReconfig.java compiled against them."""
    for tool in ("mvn", "javac", "java"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not found: apt-get install maven default-jdk-headless")
    pom = (CURATOR / "pom.xml").read_bytes()
    src = CURATOR / "CuratorReconfig.java"
    key = hashlib.sha1(pom + src.read_bytes()).hexdigest()[:12]
    jars, classes = CURATOR_CACHE / f"jars-{key}", CURATOR_CACHE / f"classes-{key}"
    if not (classes / "CuratorReconfig.class").exists():
        shutil.rmtree(jars, ignore_errors=True)
        p = subprocess.run(["mvn", "-B", "-q", "-f", str(CURATOR / "pom.xml"),
                            "dependency:copy-dependencies", "-DincludeScope=runtime",
                            f"-DoutputDirectory={jars}"],
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, f"mvn failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        p = subprocess.run(["javac", "-proc:none", "-cp", f"{jars}/*", "-d", str(classes),
                            str(src)], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"javac failed:\n{p.stdout}{p.stderr}"
    return f"{classes}:{jars}/*"


@pytest.mark.paddock_only("ensembles are configured the Paddock way")
def test_curator_reconfigures_and_its_ensemble_tracker_follows(ens):
    """Apache Curator 5.9 as an application uses it: getConfig, reconfig
    leaving then joining with fromConfig, and its EnsembleTracker (which
    parses the configuration with ZooKeeper's own parser) turning the
    single server it was given into the whole ensemble."""
    classpath = curator_classpath()
    leader = ens.leader()
    removed = next(m for m in ens.members if m is not leader)
    p = subprocess.run(["java", "-cp", classpath, "CuratorReconfig", leader.hosts,
                        SUPER_PASSWORD, str(removed.id), line_of(removed)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = dict(line.split(" ", 1) for line in p.stdout.splitlines())
    others = ",".join(str(m.id) for m in ens.members if m is not removed)
    assert lines["left"].startswith(f"{others} version ")
    assert lines["joined"].startswith("1,2,3 version ")
    tracked = sorted(lines["tracked"].split(","))
    assert tracked == sorted(f"127.0.0.1:{m.port}" for m in ens.members), p.stdout
    text, _ = config_of(ens.client(leader))
    assert lines["joined"].endswith(f"version {text.splitlines()[-1].split('=')[1]}")


@pytest.mark.paddock_only("ensembles are configured the Paddock way")
def test_servers_from_a_dynamic_configuration_file(tmp_path):
    """ZooKeeper 3.5+'s layout: zoo.cfg names dynamicConfigFile, whose
    server lines are the membership and whose name gives its version;
    a reconfig goes on from that version."""
    with Ensemble(tmp_path / "dynamic", voters=3, config=RECONFIG_CONFIG,
                  dynamic_version="100000000") as ens:
        ens.start()
        c = ens.client(ens.leader())
        text, stat = config_of(c)
        assert servers_in(text) == [1, 2, 3]
        assert text.endswith("\nversion=100000000") and stat.mzxid == 0x100000000
        root = superuser(ens, ens.leader())
        with pytest.raises(BadVersionError):
            root.reconfig(joining=None, leaving="3", new_members=None, from_config=0)
        data, _ = root.reconfig(joining=None, leaving="3", new_members=None,
                                from_config=0x100000000)
        assert servers_in(data.decode()) == [1, 2]
        # A restart keeps the reconfig's membership over the file's.
        follower = next(m for m in ens.members if m.id != 3 and m is not ens.leader())
        follower.restart()
        assert servers_in(config_of(ens.client(follower))[0]) == [1, 2]


@pytest.mark.paddock_only("ensembles are configured the Paddock way")
def test_a_follower_removing_itself_answers_or_loses_the_connection(ens):
    """The server a reconfig removes may never learn that the change
    committed (the leader stops replicating to it): its client gets the
    answer or ConnectionLoss within seconds, never a hang, and the others
    hold the change."""
    leader = ens.leader()
    follower = next(m for m in ens.members if m is not leader)
    root = superuser(ens, follower)
    try:
        root.reconfig(joining=None, leaving=str(follower.id), new_members=None)
    except ConnectionLoss:
        pass
    others = [m for m in ens.members if m is not follower]
    text, _ = config_of(ens.client(leader))
    assert servers_in(text) == sorted(m.id for m in others)
    assert_every_server_holds(ens, others, text)
    data, _ = superuser(ens, leader).reconfig(joining=line_of(follower), leaving=None,
                                              new_members=None)
    assert_every_server_holds(ens, ens.members, data.decode())
