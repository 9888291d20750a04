"""Quotas enforced (`zookeeper.enforceQuota`), as ZooKeeper 3.7+ does it:
hard limits refuse a create or setData with QuotaExceeded, soft limits are
logged, a refusal inside a multi applies nothing; without the key, quotas
are bookkeeping only. Quotas are set by the Java client (Debian's zkCli)
and by `paddock shell`, and read back by both; writes come from kazoo."""

import os
import subprocess
import time

import pytest
from kazoo.exceptions import QuotaExceededError, RolledBackError

from zkharness import ZK_CLI, paddock_bin

ENFORCE = {"zookeeper.enforceQuota": "true"}

needs_zkcli = pytest.mark.skipif(
    not os.path.exists(ZK_CLI),
    reason="Debian's zookeeper package is not installed (apt-get install zookeeper)")


def zkcli(server, *words):
    """One zkCli command: (exit code, stdout, stderr)."""
    p = subprocess.run([ZK_CLI, "-server", server.hosts, *words],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1"))
    return p.returncode, p.stdout, p.stderr


def shell(server, *words):
    """One `paddock shell` command: (exit code, stdout, stderr)."""
    p = subprocess.run([str(paddock_bin()), "shell", server.hosts, *words],
                       capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def set_quota(tool, server, option, value, path):
    rc, out, err = tool(server, "setquota", option, str(value), path)
    assert rc == 0 and "does not exist" not in err + out, (rc, out, err)


def app_under_quota(server_factory, kazoo_factory, tool, option, value, data=b""):
    """A quota-enforcing server with /app (holding `data`) under the quota
    `tool` sets: (server, kazoo client)."""
    server = server_factory(ENFORCE)
    zk = kazoo_factory(server)
    zk.create("/app", data)
    set_quota(tool, server, option, value, "/app")
    return server, zk


def usage_line(tool, server, path):
    """The `Output stat for ...` line of listquota."""
    _, out, _ = tool(server, "listquota", path)
    return next(line for line in out.splitlines() if line.startswith("Output stat"))


@needs_zkcli
def test_a_hard_count_limit_refuses_the_create_that_passes_it(server_factory,
                                                              kazoo_factory):
    server, zk = app_under_quota(server_factory, kazoo_factory, zkcli, "-N", 3)
    zk.create("/app/a")
    zk.create("/app/b")
    with pytest.raises(QuotaExceededError):
        zk.create("/app/c")
    with pytest.raises(QuotaExceededError):
        zk.create("/app/b/deeper", b"x")
    assert sorted(zk.get_children("/app")) == ["a", "b"]
    # The quota counts /app itself: three znodes, all of them allowed.
    assert usage_line(zkcli, server, "/app") == "Output stat for /app count=3,bytes=0"
    # Room again after a delete; a setData changes no count.
    zk.delete("/app/a")
    zk.create("/app/c", b"data")
    zk.set("/app/c", b"more data")
    assert usage_line(shell, server, "/app") == "Output stat for /app count=3,bytes=9"


def test_a_hard_byte_limit_weighs_what_a_set_data_replaces(server_factory,
                                                          kazoo_factory):
    _, zk = app_under_quota(server_factory, kazoo_factory, shell, "-B", 10,
                            data=b"12345")
    zk.create("/app/a", b"abc")
    zk.set("/app/a", b"abcde")  # 5 + 5: at the limit
    with pytest.raises(QuotaExceededError):
        zk.set("/app/a", b"abcdef")
    with pytest.raises(QuotaExceededError):
        zk.create("/app/b", b"x")
    zk.create("/app/b")  # no bytes: fits
    zk.set("/app", b"")  # shrinking always fits
    zk.set("/app/a", b"0123456789")
    assert zk.get("/app/a")[0] == b"0123456789"
    with pytest.raises(QuotaExceededError):
        zk.set("/app/a", b"0123456789!", version=99)  # the quota before the version


def test_a_refusal_inside_a_multi_applies_nothing(server_factory, kazoo_factory):
    _, zk = app_under_quota(server_factory, kazoo_factory, shell, "-B", 10)
    tx = zk.transaction()
    tx.create("/app/x", b"")
    tx.set_data("/app", b"0123456789AB")
    tx.create("/app/y", b"")
    results = tx.commit()
    assert isinstance(results[0], RolledBackError)
    assert isinstance(results[1], QuotaExceededError)
    assert zk.exists("/app/x") is None and zk.exists("/app/y") is None
    assert zk.get("/app")[0] == b""


def test_a_soft_limit_is_logged_and_the_write_goes_on(server_factory, kazoo_factory):
    server, zk = app_under_quota(server_factory, kazoo_factory, shell, "-n", 2)
    zk.create("/app/a")
    zk.create("/app/b")
    assert sorted(zk.get_children("/app")) == ["a", "b"]
    said = "Quota exceeded: /app [current count=3, softCountLimit=2]"
    deadline = time.monotonic() + 10
    while said not in server.log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, server.stderr_tail()
        time.sleep(0.1)


def test_without_enforcement_limits_are_bookkeeping(server, zk, root):
    set_quota(shell, server, "-N", 1, root)
    zk.create(f"{root}/a", b"12")
    zk.create(f"{root}/b", b"345")
    assert usage_line(shell, server, root) == f"Output stat for {root} count=3,bytes=5"


@needs_zkcli
@pytest.mark.parametrize("tool", [zkcli, shell], ids=["zkCli", "paddock-shell"])
def test_setquota_listquota_delquota(server, zk, root, tool):
    app = f"{root}/app"
    zk.create(app, b"")
    set_quota(tool, server, "-n", 5, app)
    set_quota(tool, server, "-N", 7, app)  # a second limit joins the first
    rc, out, err = tool(server, "listquota", app)
    assert rc == 0
    assert f"absolute path is /zookeeper/quota{app}/zookeeper_limits" in err
    assert (f"Output quota for {app} count=5,bytes=-1=;byteHardLimit=-1;countHardLimit=7\n"
            f"Output stat for {app} count=1,bytes=0\n") in out
    # No quota above or below another.
    zk.create(f"{app}/sub")
    rc, out, err = tool(server, "setquota", "-n", "1", f"{app}/sub")
    assert f"{app}/sub has a parent {app} which has a quota" in err
    rc, out, err = tool(server, "setquota", "-n", "1", root)
    assert f"{root} has a child {app} which has a quota" in err
    # delquota -n unsets one limit; delquota alone the whole quota.
    assert tool(server, "delquota", "-n", app)[0] == 0
    _, out, _ = tool(server, "listquota", app)
    assert f"Output quota for {app} count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=7" in out
    assert tool(server, "delquota", app)[0] == 0
    _, out, err = tool(server, "listquota", app)
    assert f"quota for {app} does not exist." in err
    assert zk.exists(f"/zookeeper/quota{root}") is None, "empty quota nodes are trimmed"
    _, out, _ = tool(server, "delquota", app)
    assert f"Quota does not exist for {app}" in out
