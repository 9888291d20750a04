"""ZooKeeper 3.9's AdminServer additions: HTTPS on the admin port
(`admin.forceHttps`, `admin.portUnification`, `admin.needClientAuth`, the
`ssl.quorum.*` stores), the `Authorization` header that `snapshot` and
`restore` need, and `snapshot` itself, whose stream a real Apache ZooKeeper
then starts from.

Debian's ZooKeeper is 3.8, which has none of these commands nor
`admin.needClientAuth`: those tests run against Paddock only."""

import http.client
import json
import socket
import ssl

import pytest

from certs import Authority, java_subject
from conftest import make_kazoo
from kazoo.security import make_acl, make_digest_acl
from zkharness import HOST, Server, free_port

ZOOKEEPER_3_9 = pytest.mark.paddock_only("ZooKeeper 3.9's AdminServer (Debian has 3.8)")

SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="  # super:test


def request(port, path, method="GET", headers=None, context=None, body=None):
    """status, headers and body of one request, over HTTPS with context."""
    if context is None:
        conn = http.client.HTTPConnection(HOST, port, timeout=10)
    else:
        conn = http.client.HTTPSConnection(HOST, port, timeout=10, context=context)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        reply = conn.getresponse()
        return reply.status, reply.headers, reply.read()
    finally:
        conn.close()


def answer(port, path, **kw):
    status, _, body = request(port, path, **kw)
    return status, json.loads(body)


def admin_server(server_factory, **keys):
    """A server with its AdminServer on a port of its own (admin_port), no
    limit on snapshots unless keys say otherwise."""
    port = free_port()
    config = {"admin.enableServer": "true", "admin.serverAddress": HOST,
              "admin.serverPort": str(port), "admin.rateLimiterIntervalInMS": "0",
              "DigestAuthenticationProvider.superDigest": SUPER_DIGEST}
    config.update(keys)
    server = server_factory(config)
    server.admin_port = port
    return server


@pytest.fixture
def admin(server_factory):
    return admin_server(server_factory)


@ZOOKEEPER_3_9
def test_snapshot_needs_an_authorization_header_that_authenticates(admin):
    port = admin.admin_port
    assert answer(port, "/commands/snap") == (
        401, {"command": "snap", "error": "Auth info is missing for the command"})
    for header in ["Basic dXNlcjpwdw==", "digestroot:pw", "digest a b", "x509", "sasl"]:
        status, body = answer(port, "/commands/snapshot?streaming=false",
                              headers={"Authorization": header})
        assert (status, body["error"]) == (401, "Not authenticated"), header
    # The root is open to all by default: any identity that authenticates may.
    for header in ["digest anyone:pw", "ip"]:
        status, body = answer(port, "/commands/snapshot?streaming=false",
                              headers={"Authorization": header})
        assert (status, body) == (200, {"command": "snapshot", "error": None}), header


@ZOOKEEPER_3_9
def test_snapshot_needs_every_permission_on_the_root(admin):
    zk = make_kazoo(admin)
    zk.add_auth("digest", "super:test")
    zk.set_acls("/", [make_digest_acl("alice", "pw", all=True),
                      make_digest_acl("carol", "pw", read=True, write=True, create=True,
                                      delete=True)])
    zk.stop()
    port = admin.admin_port
    for who, expected in [("alice:pw", 200), ("alice:wrong", 403), ("carol:pw", 403),
                          ("super:test", 200)]:
        status, body = answer(port, "/commands/snapshot?streaming=false",
                              headers={"Authorization": f"digest {who}"})
        assert status == expected, (who, body)
        if expected == 403:
            assert body == {"command": "snapshot", "error": "Not authorized"}


@ZOOKEEPER_3_9
def test_a_streamed_snapshot_starts_apache_zookeeper_with_the_same_tree(admin, tmp_path):
    zk = make_kazoo(admin)
    zk.create("/app", b"config")
    zk.create("/app/locked", b"secret", acl=[make_digest_acl("alice", "pw", all=True)])
    zk.create("/app/public", b"p", acl=[make_acl("world", "anyone", read=True)])
    expected = {path: zk.get(path)[1] for path in ("/app", "/app/public")}
    zk.stop()
    status, headers, body = request(admin.admin_port, "/commands/snapshot",
                                    headers={"Authorization": "digest root:pw"})
    assert status == 200 and headers["Content-Type"] == "application/octet-stream"
    assert int(headers["snapshot_size"]) == len(body) > 0
    zxid = int(headers["last_zxid"], 16)
    assert zxid >= max(stat.mzxid for stat in expected.values())

    zookeeper = Server(tmp_path / "zookeeper", name="zookeeper", kind="zookeeper")
    version_2 = zookeeper.data_dir / "version-2"
    version_2.mkdir(parents=True)
    (version_2 / f"snapshot.{zxid:x}").write_bytes(body)
    zookeeper.start()
    try:
        reader = make_kazoo(zookeeper)
        reader.add_auth("digest", "alice:pw")
        for path, stat in expected.items():
            assert reader.get(path)[1] == stat, path
        assert reader.get_acls("/app/locked")[0] == [make_digest_acl("alice", "pw", all=True)]
        reader.stop()
    finally:
        zookeeper.stop()


@ZOOKEEPER_3_9
def test_snapshots_are_rate_limited_and_can_be_turned_off(server_factory):
    # ZooKeeper's snapshot limiter reads this as microseconds: 600 s.
    port = admin_server(server_factory, **{"admin.rateLimiterIntervalInMS": "600000000"}).admin_port
    auth = {"Authorization": "ip"}
    assert request(port, "/commands/snapshot?streaming=false", headers=auth)[0] == 200
    assert answer(port, "/commands/snapshot?streaming=false", headers=auth) == (
        429, {"command": "snapshot", "error": None})

    port = admin_server(server_factory, **{"admin.snapshot.enabled": "false"}).admin_port
    assert answer(port, "/commands/snapshot", headers=auth) == (
        503, {"command": "snapshot", "error": None})


@ZOOKEEPER_3_9
def test_restore_is_refused_with_the_way_to_do_it(admin):
    port = admin.admin_port
    assert answer(port, "/commands/restore", method="POST", body=b"ZKSN")[0] == 401
    status, body = answer(port, "/commands/rest", method="POST", body=b"ZKSN",
                          headers={"Authorization": "ip"})
    assert status == 503 and "paddock import" in body["error"], body
    status, body = answer(port, "/commands/restore", headers={"Authorization": "ip"})
    assert (status, body["error"]) == (405, "restore takes POST")
    status, body = answer(port, "/commands/ruok", method="POST")
    assert (status, body["error"]) == (405, "ruok takes GET")


@pytest.fixture
def pki(tmp_path):
    ca = Authority(tmp_path / "pki")
    return {"ca": ca, "server": ca.issue("server", "localhost", server=True),
            "admin": ca.issue("admin", "admin"),
            "stranger": Authority(tmp_path / "other", "Other CA").issue("stranger", "stranger")}


def https_server(server_factory, pki, **keys):
    return admin_server(server_factory, **{
        "ssl.quorum.keyStore.location": str(pki["server"].keystore),
        "ssl.quorum.trustStore.location": str(pki["ca"].truststore), **keys})


def client_context(pki, issued=None):
    context = ssl.create_default_context(cafile=str(pki["ca"].truststore))
    if issued is not None:
        context.load_cert_chain(str(issued.certfile), str(issued.keyfile))
    return context


def test_force_https_serves_only_https(server_factory, pki):
    server = https_server(server_factory, pki, **{"admin.forceHttps": "true"})
    port = server.admin_port
    status, body = answer(port, "/commands/ruok", context=client_context(pki))
    assert (status, body) == (200, {"command": "ruok", "error": None})
    # Plain HTTP gets no HTTP answer: the connection is closed.
    with pytest.raises((http.client.HTTPException, ConnectionError, socket.timeout)):
        request(port, "/commands/ruok")


def test_port_unification_serves_both(server_factory, pki):
    server = https_server(server_factory, pki, **{"admin.portUnification": "true"})
    port = server.admin_port
    assert answer(port, "/commands/ruok", context=client_context(pki))[0] == 200
    assert answer(port, "/commands/ruok")[0] == 200


@ZOOKEEPER_3_9
def test_need_client_auth_and_x509_authorization(server_factory, pki):
    """With the root closed to all but alice, a certificate is enough only
    when its subject is the x509 superuser."""
    admin_subject = java_subject(pki["admin"].cert)
    server = https_server(server_factory, pki, **{
        "admin.forceHttps": "true", "admin.needClientAuth": "true",
        "X509AuthenticationProvider.superUser": admin_subject})
    port = server.admin_port
    # No certificate, or one no trusted authority issued: no handshake.
    for issued in (None, pki["stranger"]):
        with pytest.raises((ssl.SSLError, ConnectionError)):
            request(port, "/commands/ruok", context=client_context(pki, issued))
    zk = make_kazoo(server)
    zk.add_auth("digest", "super:test")
    zk.set_acls("/", [make_digest_acl("alice", "pw", all=True)])
    zk.stop()
    operator = pki["ca"].issue("operator", "operator")
    for issued, expected in [(pki["admin"], 200), (operator, 403)]:
        status, body = answer(port, "/commands/snapshot?streaming=false",
                              context=client_context(pki, issued),
                              headers={"Authorization": "x509"})
        assert status == expected, (issued.cert.subject, body)
