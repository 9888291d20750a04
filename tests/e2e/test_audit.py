"""ZooKeeper's audit log (`audit.enable`): one tab-separated line per write
a client asks for (session, user, ip, operation, znode, znode type, ACL,
result), one per ephemeral a closing session takes with it, and one at
server start and stop, the same from Paddock and from Apache ZooKeeper."""

import pwd
import os
import time

from kazoo.exceptions import NodeExistsError
from kazoo.security import make_acl

AUDIT = {"zookeeper.audit.enable": "true"}


def wait_for_lines(server, lines, timeout=10):
    """Waits until every one of `lines` is in the server's log."""
    deadline = time.monotonic() + timeout
    while True:
        text = server.log_path.read_text(errors="replace")
        missing = [line for line in lines if line not in text]
        if not missing:
            return
        assert time.monotonic() < deadline, (missing, server.stderr_tail(30))
        time.sleep(0.1)


def test_every_write_and_the_session_s_ephemerals_are_audited(server_factory,
                                                              kazoo_factory):
    server = server_factory(AUDIT)
    user = pwd.getpwuid(os.getuid()).pw_name
    wait_for_lines(server, [f"user={user}\toperation=serverStart\tresult=success"])
    zk = kazoo_factory(server)
    zk.add_auth("digest", "alice:secret")
    zk.create("/audit", b"x")
    seq = zk.create("/audit/s-", b"", sequence=True)
    zk.create("/audit/e", b"", ephemeral=True)
    zk.set("/audit", b"y")
    zk.set_acls("/audit", [make_acl("world", "anyone", all=True),
                           make_acl("ip", "10.0.0.1", read=True, admin=True)])
    try:
        zk.create("/audit")
    except NodeExistsError:
        pass
    tx = zk.transaction()
    tx.create("/audit/m", b"")
    tx.set_data("/audit/m", b"z")
    tx.check("/audit", 1)
    tx.delete("/audit/m")
    tx.commit()
    failed = zk.transaction()
    failed.create("/audit/n", b"")
    failed.delete("/audit/nope")
    failed.commit()
    zk.delete(seq)
    session = f"session=0x{zk.client_id[0]:x}"
    # ZooKeeper keeps a connection's ids in a hash set: the digest user
    # comes before the address here, in ZooKeeper's order.
    users = "alice,127.0.0.1"
    who = f"{session}\tuser={users}\tip=127.0.0.1"
    zk.stop()
    wait_for_lines(server, [
        f"{who}\toperation=create\tznode=/audit\tznode_type=persistent\tresult=success",
        f"{who}\toperation=create\tznode={seq}\tznode_type=persistent_sequential"
        "\tresult=success",
        f"{who}\toperation=create\tznode=/audit/e\tznode_type=ephemeral\tresult=success",
        f"{who}\toperation=setData\tznode=/audit\tresult=success",
        f"{who}\toperation=setAcl\tznode=/audit\tacl=world:anyone:cdrwaip:10.0.0.1:ra"
        "\tresult=success",
        f"{who}\toperation=create\tznode=/audit\tznode_type=persistent\tresult=failure",
        f"{who}\toperation=create\tznode=/audit/m\tznode_type=persistent\tresult=success",
        f"{who}\toperation=setData\tznode=/audit/m\tresult=success",
        f"{who}\toperation=delete\tznode=/audit/m\tresult=success",
        f"{who}\toperation=multiOperation\tresult=failure",
        f"{who}\toperation=delete\tznode={seq}\tresult=success",
        f"{session}\tuser={user}\toperation=ephemeralZNodeDeletionOnSessionCloseOrExpire"
        "\tznode=/audit/e\tresult=success",
    ])
    log = server.log_path.read_text(errors="replace")
    assert "znode=/audit/n" not in log, "a failed multi is one line"
    server.stop()
    wait_for_lines(server, [f"user={user}\toperation=serverStop\tresult=invoked"])


def test_nothing_is_audited_unless_enabled(server, zk, root):
    zk.create(f"{root}/quiet", b"")
    time.sleep(0.2)
    assert f"znode={root}/quiet" not in server.log_path.read_text(errors="replace")
