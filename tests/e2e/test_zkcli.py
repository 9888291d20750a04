"""The official Java client: Debian's zkCli.sh for a scripted session, and a
small program (tests/java/MultiDemo.java) for multi."""

import os
import re
import shutil
import subprocess
import time

import pytest

from zkharness import REPO, ZK_CLI, ZK_JARS

ZK_JAR = f"{ZK_JARS}/zookeeper.jar"

pytestmark = pytest.mark.skipif(
    not (os.path.exists(ZK_CLI) and os.path.exists(ZK_JAR)),
    reason="Debian's zookeeper package is not installed (apt-get install zookeeper)")


def zkcli(server, script, timeout=120):
    p = subprocess.run([ZK_CLI, "-server", server.hosts], input=script,
                       capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1"))
    return p.returncode, p.stdout, p.stderr


def test_zkcli_session(server, zk):
    root = "/zkcli-session"
    if zk.exists(root):
        zk.delete(root, recursive=True)
    script = f"""create {root} hello
create {root}/child c1
ls {root}
get {root}
set {root} world
get {root}
stat {root}
create -e {root}/eph e
create -s {root}/seq- s
create -s {root}/seq- s
ls {root}
addWatch -m PERSISTENT_RECURSIVE {root}
set {root}/child c2
create {root}/child/grandchild g
delete {root}/nosuch
create {root} again
delete {root}/child/grandchild
ls {root}/child
quit
"""
    rc, out, err = zkcli(server, script)
    both = out + err
    assert rc == 0, both
    assert "[]\n" in out
    assert f"Created {root}\n" in both
    assert f"Created {root}/child\n" in both
    assert f"Created {root}/eph\n" in both
    # sequence numbers count child creates: child, eph, then the two seq-
    assert f"Created {root}/seq-0000000002\n" in both
    assert f"Created {root}/seq-0000000003\n" in both
    assert "[child]\n" in out
    assert "hello\n" in out and "world\n" in out
    assert "[child, eph, seq-0000000002, seq-0000000003]\n" in out
    # stat output
    stat = dict(re.findall(r"^(\w+) = (.*)$", out, re.M))
    assert stat["dataVersion"] == "1"
    assert stat["numChildren"] == "1"
    assert stat["cversion"] == "1"
    assert stat["ephemeralOwner"] == "0x0"
    assert stat["dataLength"] == "5"
    assert re.match(r"^0x[0-9a-f]+$", stat["cZxid"])
    # the persistent recursive watch reports the changes below the root
    assert f"type:NodeDataChanged path:{root}/child" in out
    assert f"type:NodeCreated path:{root}/child/grandchild" in out
    assert f"type:NodeDeleted path:{root}/child/grandchild" in out
    assert f"type:NodeChildrenChanged path:{root}" not in out
    # errors are reported, the session goes on
    assert f"Node does not exist: {root}/nosuch" in both
    assert f"Node already exists: {root}" in both

    # what zkCli left behind, seen by kazoo: the ephemeral went with the session
    assert sorted(zk.get_children(root)) == ["child", "seq-0000000002", "seq-0000000003"]
    assert zk.get(root)[0] == b"world"
    assert zk.get(f"{root}/child")[0] == b"c2"


def test_zkcli_watch_sees_other_clients_change(server, zk):
    root = "/zkcli-watch"
    zk.ensure_path(root)
    zk.create(f"{root}/x", b"before-change")
    proc = subprocess.Popen([ZK_CLI, "-server", server.hosts], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        proc.stdin.write(f"get -w {root}/x\n")
        proc.stdin.flush()
        # wait until zkCli has read the node (and so set the watch)
        deadline = time.monotonic() + 60
        seen = ""
        while "before-change\n" not in seen and time.monotonic() < deadline:
            seen += proc.stdout.readline()
        assert "before-change\n" in seen, seen
        zk.set(f"{root}/x", b"after-change")
        proc.stdin.write(f"get {root}/x\nquit\n")
        proc.stdin.flush()
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert f"type:NodeDataChanged path:{root}/x" in out, out
    assert "after-change\n" in out


def test_java_client_multi(server, tmp_path):
    javac = shutil.which("javac")
    if javac is None:
        pytest.skip("javac not installed (apt-get install default-jdk-headless)")
    src = REPO / "tests" / "java" / "MultiDemo.java"
    classes = tmp_path / "classes"
    classes.mkdir()
    subprocess.run([javac, "-proc:none", "-cp", ZK_JAR, "-d", str(classes), str(src)],
                   check=True, timeout=180, capture_output=True)
    root = f"/java-multi-{tmp_path.name}"
    p = subprocess.run(["java", "-XX:TieredStopAtLevel=1", "-cp", f"{classes}:{ZK_JAR}",
                        "MultiDemo", server.hosts, root],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    out = [line for line in p.stdout.splitlines() if line.split(" ")[0] in
           ("OK", "FAILED", "READ", "EXISTS", "DONE", "UNEXPECTED")]
    assert out == [
        f"OK create {root}/a",
        f"OK create {root}/s-0000000001",
        "OK setData version=1",
        "OK check",
        "OK delete",
        "FAILED BADVERSION",
        "FAILED error 0 OK",
        "FAILED error -103 BADVERSION",
        "FAILED error -2 RUNTIMEINCONSISTENCY",
        "READ getChildren [s-0000000001]",
        "READ getData S",
        "EXISTS b false",
        "EXISTS c false",
        "DONE",
    ], p.stdout + p.stderr
