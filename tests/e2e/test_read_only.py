"""ZooKeeper's read-only mode (`readonlymode.enabled`): a server cut off
from its quorum serves the clients that ask for a read-only server (kazoo's
`read_only=True`, the Java client's `canBeReadOnly`), reads only, and
refuses the others; once the quorum is back, those clients get read-write
sessions again."""

import shutil
import subprocess

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NotReadOnlyCallError
from kazoo.protocol.states import KeeperState
from kazoo.retry import KazooRetry

from ensemble import Ensemble, wait_for
from zkharness import REPO, ZK_JARS

# ZooKeeper has the feature, but the e2e harness's ensembles are Paddock's;
# a 3-server ZooKeeper 3.8 run by hand with -Dreadonlymode.enabled=true
# answered neither kazoo nor the Java client while read-only (kazoo got a
# 16-byte connect response it cannot parse).
pytestmark = pytest.mark.paddock_only("ensembles are Paddock's (tests/e2e/ensemble.py)")


def kazoo(member, read_only):
    client = KazooClient(hosts=member.hosts, timeout=4.0, read_only=read_only,
                         connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=0.3),
                         command_retry=None)
    return client


def java_read_only_client(tmp_path, hosts, path):
    """tests/java/ReadOnlyDemo.java, compiled and started; it prints a
    line per step."""
    javac = shutil.which("javac")
    if javac is None:
        pytest.fail("javac not installed (apt-get install default-jdk-headless)")
    classes = tmp_path / "classes"
    classes.mkdir()
    jar = f"{ZK_JARS}/zookeeper.jar"
    subprocess.run([javac, "-proc:none", "-cp", jar, "-d", str(classes),
                    str(REPO / "tests" / "java" / "ReadOnlyDemo.java")],
                   check=True, timeout=180, capture_output=True)
    return subprocess.Popen(["java", "-XX:TieredStopAtLevel=1", "-cp", f"{classes}:{jar}",
                             "ReadOnlyDemo", hosts, path],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def read_line(proc):
    line = proc.stdout.readline().strip()
    assert line, "the Java client ended early"
    return line


def test_a_server_without_its_quorum_serves_read_only_clients(tmp_path):
    with Ensemble(tmp_path, voters=3, config={"readonlymode.enabled": "true"}) as ensemble:
        ensemble.start()
        ensemble.wait_all_serving()
        writer = ensemble.client(ensemble.leader())
        writer.create("/config", b"v1")
        alone = ensemble.followers()[0]
        assert wait_for(lambda: alone.four_letter("isro") == "rw", timeout=10)
        writer.stop()
        others = [m for m in ensemble.members if m is not alone]
        for member in others:
            member.kill()

        assert wait_for(lambda: alone.four_letter("isro") == "ro", timeout=20,
                        what="the server alone to go read-only")
        assert "Mode: read-only" in alone.srvr()
        java = java_read_only_client(tmp_path, alone.hosts, "/config")
        reader = kazoo(alone, read_only=True)
        reader.start(timeout=15)
        try:
            assert [read_line(java) for _ in range(3)] == [
                "CONNECTED READ-ONLY", "READ v1", "REFUSED NOTREADONLY"]
            assert reader.client_state == KeeperState.CONNECTED_RO
            assert reader.get("/config")[0] == b"v1"
            assert reader.get_children("/", watch=lambda event: None)
            with pytest.raises(NotReadOnlyCallError):
                reader.create("/refused", b"")
            with pytest.raises(NotReadOnlyCallError):
                reader.sync("/config")
            assert reader.exists("/refused") is None

            # A client that cannot take a read-only server is not served.
            refused = kazoo(alone, read_only=False)
            with pytest.raises(Exception):
                refused.start(timeout=4)
            refused.stop()
            refused.close()

            for member in others:
                member.restart()
            assert wait_for(lambda: alone.four_letter("isro") == "rw", timeout=30,
                            what="the server to leave read-only mode")
            assert wait_for(lambda: reader.client_state == KeeperState.CONNECTED, timeout=30,
                            what="the read-only client to get a read-write session")
            reader.create("/after", b"")
            assert ensemble.client(others[0]).exists("/after") is not None
            assert [read_line(java) for _ in range(2)] == [
                "CONNECTED READ-WRITE", "CREATED /config-after"]
            assert java.wait(timeout=30) == 0
        finally:
            reader.stop()
            reader.close()
            if java.poll() is None:
                java.kill()
                java.wait()
