"""SASL DIGEST-MD5 authentication (kazoo + pure-sasl) and `sasl` ACLs."""

import os
import subprocess
import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.retry import KazooRetry
from kazoo.security import make_acl

from zkharness import ZK_CLI, paddock_bin


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


# ------------------------------------------------------------ the shells

CLIENT_JAAS = """Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="alice"
    password="%s";
};
"""


def shell_with_sasl(server, login_args, *words):
    """`paddock shell` logging in with `login_args`: (code, stdout, stderr)."""
    from test_shell import SHELL_ENV, PROCESS_TIMEOUT
    p = subprocess.run([str(paddock_bin()), "shell", *login_args, server.hosts, *words],
                       capture_output=True, text=True, timeout=PROCESS_TIMEOUT,
                       env=SHELL_ENV, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def zkcli_with_jaas(server, jaas, *words):
    """zkCli with `-Djava.security.auth.login.config=jaas`."""
    from test_shell import ZKCLI_ENV, ZKCLI_TIMEOUT, ZK_NOISE_OUT, SESSION_EVENT, zk_err
    env = dict(ZKCLI_ENV)
    env["JAVA_TOOL_OPTIONS"] += f" -Djava.security.auth.login.config={jaas}"
    p = subprocess.run([ZK_CLI, "-server", server.hosts, *words],
                       capture_output=True, text=True, timeout=ZKCLI_TIMEOUT,
                       env=env, stdin=subprocess.DEVNULL)
    out = SESSION_EVENT.sub("", ZK_NOISE_OUT.sub("", p.stdout))
    return p.returncode, out, zk_err(p.stderr)


@pytest.mark.skipif(not paddock_bin().exists(), reason="run `cargo build -p paddock` first")
def test_paddock_shell_logs_in_with_a_jaas_file_or_a_user(sasl_server, tmp_path,
                                                          kazoo_factory):
    jaas = tmp_path / "client.jaas"
    jaas.write_text(CLIENT_JAAS % "secret")
    by_file = ["--jaas", str(jaas)]
    by_user = ["--sasl-user", "alice", "--sasl-password", "secret"]
    path = f"/shell-sasl-{uuid.uuid4().hex[:8]}"
    assert shell_with_sasl(sasl_server, by_file, "create", path, "x", "sasl:alice:cdrwa") == \
        (0, "", f"Created {path}\n")
    assert shell_with_sasl(sasl_server, by_user, "getAcl", path) == \
        (0, "'sasl,'alice\n: cdrwa\n", "")
    code, out, _ = shell_with_sasl(sasl_server, by_file, "whoami")
    assert code == 0 and "sasl: alice\n" in out, out
    # The node is alice's alone.
    with pytest.raises(NoAuthError):
        kazoo_factory(sasl_server).get(path)

    jaas.write_text(CLIENT_JAAS % "wrong")
    code, out, err = shell_with_sasl(sasl_server, by_file, "ls", "/")
    assert (code, out) == (1, ""), err
    assert "SASL authentication" in err and "refused" in err, err
    jaas.write_text("Client { broken")
    code, _, err = shell_with_sasl(sasl_server, by_file, "ls", "/")
    assert code == 1 and f"the JAAS file {jaas}" in err, err


@pytest.mark.skipif(not (os.path.exists(ZK_CLI) and paddock_bin().exists()),
                    reason="needs Debian's zkCli and `cargo build -p paddock`")
@pytest.mark.parametrize("command", ["whoami", "getAcl @", "get @", "ls /nope"])
def test_paddock_shell_with_sasl_matches_zkcli(sasl_server, tmp_path, command):
    jaas = tmp_path / "client.jaas"
    jaas.write_text(CLIENT_JAAS % "secret")
    alice = sasl_client(sasl_server, "alice", "secret")
    alice.start(timeout=20)
    path = f"/zkcli-sasl-{uuid.uuid4().hex[:8]}"
    try:
        alice.create(path, b"hers", acl=[make_acl("sasl", "alice", read=True, admin=True)])
    finally:
        alice.stop()
        alice.close()
    words = command.replace("@", path).split()
    ours = shell_with_sasl(sasl_server, ["--jaas", str(jaas)], *words)
    theirs = zkcli_with_jaas(sasl_server, jaas, *words)
    assert ours == theirs, f"{command}\n paddock shell: {ours!r}\n zkCli:         {theirs!r}"
