"""SASL DIGEST-MD5 authentication (kazoo + pure-sasl) and `sasl` ACLs."""

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.retry import KazooRetry
from kazoo.security import make_acl


JAAS = """Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_alice="secret"
    user_bob="hunter2";
};
"""


@pytest.fixture
def sasl_server(server_factory, tmp_path):
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    return server_factory({"jaasLoginConfig": str(jaas)})


def sasl_client(server, user, password, **kw):
    return KazooClient(
        hosts=server.hosts, timeout=10.0,
        connection_retry=KazooRetry(max_tries=3, delay=0.1, max_delay=0.5),
        sasl_options={"mechanism": "DIGEST-MD5", "username": user,
                      "password": password}, **kw)


def test_sasl_digest_md5_and_sasl_acl(sasl_server, kazoo_factory):
    alice = sasl_client(sasl_server, "alice", "secret")
    alice.start(timeout=20)
    try:
        alice.create("/alice-only", b"hi", acl=[make_acl("sasl", "alice", all=True)])
        assert alice.get("/alice-only")[0] == b"hi"
        acls, _ = alice.get_acls("/alice-only")
        assert [(a.perms, a.id.scheme, a.id.id) for a in acls] == [(31, "sasl", "alice")]

        anon = kazoo_factory(sasl_server)
        with pytest.raises(NoAuthError):
            anon.get("/alice-only")
        with pytest.raises(NoAuthError):
            anon.set("/alice-only", b"x")

        bob = sasl_client(sasl_server, "bob", "hunter2")
        bob.start(timeout=20)
        try:
            with pytest.raises(NoAuthError):
                bob.get("/alice-only")
        finally:
            bob.stop()
            bob.close()
    finally:
        alice.stop()
        alice.close()


def test_sasl_auth_scheme_acl(sasl_server):
    """The `auth` ACL scheme expands to the SASL identity."""
    alice = sasl_client(sasl_server, "alice", "secret")
    alice.start(timeout=20)
    try:
        alice.create("/auth-node", b"", acl=[make_acl("auth", "", all=True)])
        acls, _ = alice.get_acls("/auth-node")
        assert [(a.perms, a.id.scheme, a.id.id) for a in acls] == [(31, "sasl", "alice")]
    finally:
        alice.stop()
        alice.close()


def test_sasl_wrong_password_is_rejected(sasl_server):
    mallory = sasl_client(sasl_server, "alice", "wrong")
    failed = False
    try:
        mallory.start(timeout=10)
        # if start returned, no operation may succeed as alice
        try:
            mallory.get("/")
        except Exception:
            failed = True
    except Exception:
        failed = True
    finally:
        try:
            mallory.stop()
            mallory.close()
        except Exception:
            pass
    assert failed, "a wrong SASL password must not give a working session"


def test_raw_sasl_who_am_i(sasl_server, raw_factory):
    c = raw_factory(sasl_server)
    assert c.sasl_digest_md5("alice", "secret") == 0
    err, ids = c.who_am_i()
    assert err == 0
    assert sorted(ids) == [("ip", "127.0.0.1"), ("sasl", "alice")]
    # SASL and digest identities add up on one connection
    assert c.add_auth("digest", b"carl:pw") == 0
    assert sorted(c.who_am_i()[1]) == [("digest", "carl"), ("ip", "127.0.0.1"),
                                       ("sasl", "alice")]


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("nobody", "x")])
def test_raw_sasl_failure_is_auth_failed_and_closes(sasl_server, raw_factory,
                                                    user, password):
    c = raw_factory(sasl_server)
    assert c.sasl_digest_md5(user, password) == -115  # AUTHFAILED
    assert c.wait_closed(5)
