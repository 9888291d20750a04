"""TLS for clients: `secureClientPort` with ZooKeeper's `ssl.*` keys and PEM
stores, a client certificate's subject as the session's `x509` id (and the
superuser's), with kazoo (`use_ssl`), the Java client (zkCli over Netty)
and `paddock shell`; the bad inputs: an expired certificate, one from an
untrusted CA, none at all, plain text to the TLS port and TLS to the plain
one. Every test but the reload runs against ZooKeeper too."""

import os
import socket
import ssl
import subprocess
import time
import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.retry import KazooRetry
from kazoo.security import make_acl

from certs import Authority, java_subject
from zkharness import HOST, ZK_CLI, ZK_JARS, free_port, paddock_bin, wait_until
from zkwire import connect_request, frame

SERVER_CNXN_FACTORY = "org.apache.zookeeper.server.NettyServerCnxnFactory"
X509_PROVIDER = "org.apache.zookeeper.server.auth.X509AuthenticationProvider"


class Pki:
    def __init__(self, directory):
        self.ca = Authority(directory / "ca")
        self.server = self.ca.issue("server", "localhost", server=True)
        self.alice = self.ca.issue("alice", "alice")
        self.admin = self.ca.issue("admin", "admin")
        self.expired = self.ca.issue("expired", "expired", expired=True)
        self.rogue = Authority(directory / "rogue", cn="Rogue CA").issue("mallory", "mallory")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("pki"))


def tls_config(pki, port, **extra):
    config = {
        "secureClientPort": str(port),
        "serverCnxnFactory": SERVER_CNXN_FACTORY,
        "ssl.keyStore.location": str(pki.server.keystore),
        "ssl.keyStore.type": "PEM",
        "ssl.trustStore.location": str(pki.ca.truststore),
        "ssl.trustStore.type": "PEM",
        "authProvider.x509": X509_PROVIDER,
        "X509AuthenticationProvider.superUser": java_subject(pki.admin.cert),
    }
    config.update(extra)
    return config


def accepts_connections(port) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=2).close()
        return True
    except OSError:
        return False


def with_secure_port(server, port):
    """The server, once its TLS port listens too: Apache ZooKeeper binds it
    only after the plain port the harness waits for."""
    assert wait_until(lambda: accepts_connections(port), timeout=30), \
        f"secureClientPort {port} does not listen"
    server.secure_hosts = f"{HOST}:{port}"
    server.secure_port = port
    return server


@pytest.fixture
def tls_server(server_factory, pki):
    port = free_port()
    return with_secure_port(server_factory(tls_config(pki, port)), port)


def tls_kazoo(server, identity, pki, **kw):
    client = KazooClient(
        hosts=server.secure_hosts, timeout=10.0, use_ssl=True, verify_certs=True,
        ca=str(pki.ca.truststore), certfile=str(identity.certfile),
        keyfile=str(identity.keyfile),
        connection_retry=KazooRetry(max_tries=3, delay=0.1, max_delay=0.5), **kw)
    client.start(timeout=20)
    return client


def test_kazoo_over_tls_is_named_by_its_certificate(tls_server, pki, kazoo_factory):
    alice = tls_kazoo(tls_server, pki.alice, pki)
    path = f"/tls-{uuid.uuid4().hex[:8]}"
    try:
        subject = java_subject(pki.alice.cert)
        assert subject == "CN=alice,O=Paddock,C=US"
        alice.create(path, b"hers", acl=[make_acl("x509", subject, all=True)])
        assert alice.get(path)[0] == b"hers"
        # The `auth` scheme expands to the certificate's id.
        alice.create(path + "-auth", b"", acl=[make_acl("auth", "", all=True)])
        acls, _ = alice.get_acls(path + "-auth")
        assert [(a.id.scheme, a.id.id) for a in acls] == [("x509", subject)]
        with pytest.raises(NoAuthError):
            kazoo_factory(tls_server).get(path)
        admin = tls_kazoo(tls_server, pki.admin, pki)
        try:
            assert admin.get(path)[0] == b"hers", "the x509 superuser reads everything"
        finally:
            admin.stop()
            admin.close()
    finally:
        alice.stop()
        alice.close()


def client_properties(tmp_path, pki, identity):
    keys = {
        "zookeeper.client.secure": "true",
        "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "zookeeper.ssl.keyStore.location": str(identity.keystore),
        "zookeeper.ssl.keyStore.type": "PEM",
        "zookeeper.ssl.trustStore.location": str(pki.ca.truststore),
        "zookeeper.ssl.trustStore.type": "PEM",
    }
    path = tmp_path / f"client-{identity.cert.serial_number}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
    return path, keys


def shell_tls(server, properties, *words):
    p = subprocess.run([str(paddock_bin()), "shell", "--client-configuration", str(properties),
                        server.secure_hosts, *words],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, TZ="UTC"))
    return p.returncode, p.stdout, p.stderr


def zkcli_tls(server, keys, *words):
    from test_shell import SESSION_EVENT, ZK_NOISE_OUT, ZKCLI_ENV, zk_err
    env = dict(ZKCLI_ENV)
    env["JAVA_TOOL_OPTIONS"] += "".join(f" -D{k}={v}" for k, v in keys.items())
    # Debian's zookeeper.jar leaves Netty's codec out of its class path;
    # zkCli.sh passes CLIENT_JVMFLAGS after its own -cp, and the last wins.
    env["CLIENT_JVMFLAGS"] = "-cp " + ":".join(
        ["/etc/zookeeper/conf", f"{ZK_JARS}/zookeeper.jar", f"{ZK_JARS}/netty-codec.jar",
         f"{ZK_JARS}/netty-resolver.jar"])
    p = subprocess.run([ZK_CLI, "-server", server.secure_hosts, *words],
                       capture_output=True, text=True, timeout=120, env=env,
                       stdin=subprocess.DEVNULL)
    return p.returncode, SESSION_EVENT.sub("", ZK_NOISE_OUT.sub("", p.stdout)), zk_err(p.stderr)


needs_tools = pytest.mark.skipif(
    not (os.path.exists(ZK_CLI) and paddock_bin().exists()),
    reason="needs Debian's zkCli and `cargo build -p paddock`")


@needs_tools
def test_paddock_shell_and_zkcli_over_tls_agree(tls_server, pki, tmp_path):
    properties, keys = client_properties(tmp_path, pki, pki.alice)
    path = f"/shell-tls-{uuid.uuid4().hex[:8]}"
    subject = java_subject(pki.alice.cert)
    # An ACL naming this subject cannot be typed: zkCli splits ACLs at
    # commas, and so does the shell.
    assert shell_tls(tls_server, properties, "create", path, "x") == (0, "", f"Created {path}\n")
    assert shell_tls(tls_server, properties, "setAcl", path, "auth::cdrwa") == (0, "", "")
    for command in (["whoami"], ["getAcl", path], ["get", path], ["ls", "/nope"]):
        ours = shell_tls(tls_server, properties, *command)
        theirs = zkcli_tls(tls_server, keys, *command)
        assert ours == theirs, f"{command}\n paddock shell: {ours!r}\n zkCli: {theirs!r}"
    code, out, _ = shell_tls(tls_server, properties, "getAcl", path)
    # zkCli prints the commas of an id URL-encoded.
    assert (code, out) == (0, f"'x509,'{subject.replace(',', '%2C')}\n: cdrwa\n")
    code, out, _ = shell_tls(tls_server, properties, "whoami")
    assert code == 0 and f"x509: {subject}\n" in out, out


def refused_handshake(server, pki, identity=None) -> bool:
    context = ssl.create_default_context(cafile=str(pki.ca.truststore))
    if identity is not None:
        context.load_cert_chain(str(identity.certfile), str(identity.keyfile))
    with socket.create_connection((HOST, server.secure_port), timeout=10) as sock:
        try:
            with context.wrap_socket(sock, server_hostname=HOST) as tls:
                # TLS 1.3 reports a refused client certificate on first use.
                tls.sendall(frame(connect_request()))
                return tls.recv(4) == b""
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            return True


@pytest.mark.parametrize("who", ["expired", "rogue", "nobody"])
def test_bad_client_certificates_are_refused(tls_server, pki, who, kazoo_factory):
    identity = {"expired": pki.expired, "rogue": pki.rogue, "nobody": None}[who]
    assert refused_handshake(tls_server, pki, identity)
    assert kazoo_factory(tls_server).exists("/") is not None, "the server serves on"


def test_plain_text_to_the_tls_port_and_tls_to_the_plain_port(tls_server, pki, kazoo_factory):
    with socket.create_connection((HOST, tls_server.secure_port), timeout=10) as sock:
        sock.sendall(frame(connect_request()))
        sock.settimeout(10)
        answer = b""
        try:
            while chunk := sock.recv(4096):
                answer += chunk
        except ConnectionResetError:
            pass
        # At most a TLS alert record (content type 21), never a session.
        assert answer == b"" or answer[0] == 0x15, answer
    context = ssl.create_default_context(cafile=str(pki.ca.truststore))
    with socket.create_connection((HOST, tls_server.port), timeout=10) as sock:
        with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
            with context.wrap_socket(sock, server_hostname=HOST):
                pass
    alice = tls_kazoo(tls_server, pki.alice, pki)
    try:
        assert alice.exists("/") is not None
        assert kazoo_factory(tls_server).exists("/") is not None
    finally:
        alice.stop()
        alice.close()


def test_port_unification_serves_tls_and_plain_text_on_one_port(server_factory, pki,
                                                                kazoo_factory):
    server = server_factory(tls_config(pki, free_port(), **{"client.portUnification": "true"}))
    server.secure_hosts = server.hosts
    alice = tls_kazoo(server, pki.alice, pki)
    try:
        path = f"/unified-{uuid.uuid4().hex[:8]}"
        alice.create(path, b"tls")
        assert kazoo_factory(server).get(path)[0] == b"tls", "plain text on the same port"
    finally:
        alice.stop()
        alice.close()


def server_serial(server, pki) -> int:
    context = ssl.create_default_context(cafile=str(pki.ca.truststore))
    context.load_cert_chain(str(pki.alice.certfile), str(pki.alice.keyfile))
    with socket.create_connection((HOST, server.secure_port), timeout=10) as sock:
        with context.wrap_socket(sock, server_hostname=HOST) as tls:
            der = tls.getpeercert(binary_form=True)
    from cryptography import x509
    return x509.load_der_x509_certificate(der).serial_number


@pytest.mark.paddock_only("ZooKeeper 3.8 reloads client-port certificates only on restart")
def test_a_renewed_server_certificate_is_served_without_a_restart(server_factory, pki,
                                                                  tmp_path):
    keystore = tmp_path / "server-keystore.pem"
    keystore.write_bytes(pki.server.keystore.read_bytes())
    port = free_port()
    server = with_secure_port(
        server_factory(tls_config(pki, port, **{"ssl.keyStore.location": str(keystore)})), port)
    before = server_serial(server, pki)
    assert before == pki.server.cert.serial_number
    renewed = pki.ca.issue("server-renewed", "localhost", server=True)
    keystore.write_bytes(renewed.keystore.read_bytes())
    deadline = time.monotonic() + 15
    while server_serial(server, pki) == before:
        assert time.monotonic() < deadline, "the renewed certificate was not picked up"
        time.sleep(0.5)
    assert server_serial(server, pki) == renewed.cert.serial_number
    # A key store that no longer loads is refused; the renewed one stays.
    keystore.write_text("not a certificate")
    time.sleep(3)
    assert server_serial(server, pki) == renewed.cert.serial_number


def test_x509_acls_are_invalid_without_tls(zk):
    from kazoo.exceptions import InvalidACLError
    with pytest.raises(InvalidACLError):
        zk.create(f"/x509-{uuid.uuid4().hex[:8]}", b"",
                  acl=[make_acl("x509", "CN=alice,O=Paddock,C=US", all=True)])


# ---------------------------------------------------------------- between servers

def quorum_keys(pki, **extra):
    keys = {"ssl.quorum.keyStore.location": str(pki.server.keystore),
            "ssl.quorum.trustStore.location": str(pki.ca.truststore)}
    keys.update(extra)
    return keys


def peer_port_speaks_tls(member, pki) -> str:
    """"" when the member's peer port completes a TLS handshake with a
    certificate its trust store accepts, else why not."""
    context = ssl.create_default_context(cafile=str(pki.ca.truststore))
    context.load_cert_chain(str(pki.server.certfile), str(pki.server.keyfile))
    try:
        with socket.create_connection((HOST, member.peer_port), timeout=5) as sock:
            with context.wrap_socket(sock, server_hostname=HOST):
                return ""
    except (ssl.SSLError, OSError) as e:
        return repr(e)


def plain_hello_refused(member) -> bool:
    """A plain-text hello on the peer port gets no answer."""
    with socket.create_connection((HOST, member.peer_port), timeout=5) as sock:
        sock.sendall(b"PDKp" + bytes(18))
        sock.settimeout(5)
        try:
            return sock.recv(64)[:4] != b"PDKp"
        except (ConnectionResetError, socket.timeout):
            return True


@pytest.mark.paddock_only("ensembles are Paddock's (tests/e2e/ensemble.py)")
def test_an_ensemble_replicates_over_tls(tmp_path, pki):
    from ensemble import Ensemble
    with Ensemble(tmp_path / "ens", voters=3,
                  config=quorum_keys(pki, sslQuorum="true")) as ens:
        ens.start()
        leader = ens.leader()
        writer = ens.client(leader)
        writer.create("/over-tls", b"replicated")
        for member in ens.followers():
            reader = ens.client(member)
            reader.sync("/over-tls")
            assert reader.get("/over-tls")[0] == b"replicated"
            assert peer_port_speaks_tls(member, pki) == ""
            assert plain_hello_refused(member)


@pytest.mark.paddock_only("ensembles are Paddock's (tests/e2e/ensemble.py)")
def test_a_rolling_switch_to_tls_loses_no_write(tmp_path, pki):
    """ZooKeeper's procedure: every server takes both (portUnification),
    then each in turn dials with TLS (sslQuorum), then each in turn stops
    taking plain text; one server restarts at a time, under writes."""
    import threading
    from ensemble import Ensemble
    with Ensemble(tmp_path / "ens", voters=3,
                  config=quorum_keys(pki, portUnification="true")) as ens:
        ens.start()
        writer = ens.client(all_hosts=True)
        writer.create("/rolling", b"")
        stop = threading.Event()
        acknowledged = []

        def write():
            while not stop.is_set():
                try:
                    path = writer.create("/rolling/w-", b"", sequence=True)
                    acknowledged.append(path)
                except Exception:
                    time.sleep(0.05)  # a ConnectionLoss the client retries

        thread = threading.Thread(target=write)
        thread.start()
        try:
            for step in ({"sslQuorum": "true"}, {"portUnification": "false"}):
                for member in ens.members:
                    member.extra_config.update(step)
                    member.restart()
                    ens.wait_all_serving()
                    time.sleep(0.5)
        finally:
            stop.set()
            thread.join()
        assert len(acknowledged) > 10
        for member in ens.members:
            assert peer_port_speaks_tls(member, pki) == ""
            assert plain_hello_refused(member)
            reader = ens.client(member)
            reader.sync("/rolling")
            children = set(reader.get_children("/rolling"))
            missing = [p for p in acknowledged if p.rsplit("/", 1)[1] not in children]
            assert missing == [], f"{member.name} lost acknowledged writes"


@pytest.mark.paddock_only("ensembles are Paddock's (tests/e2e/ensemble.py)")
def test_a_server_with_an_untrusted_certificate_cannot_join(tmp_path, pki):
    from ensemble import Ensemble
    rogue = {"ssl.quorum.keyStore.location": str(pki.rogue.keystore)}
    with Ensemble(tmp_path / "ens", voters=3,
                  config=quorum_keys(pki, sslQuorum="true")) as ens:
        trusted, outsider = ens.members[:2], ens.members[2]
        outsider.extra_config.update(rogue)
        for member in ens.members:
            member.spawn()
        ens.wait_all_serving(members=trusted)
        time.sleep(3)
        assert outsider.mode() is None, "a server its peers do not trust must not serve"
        writer = ens.client(trusted[0])
        writer.create("/without-the-outsider", b"")


def pkcs12_stores(pki, directory, password=b"changeit"):
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12
    keystore = directory / "server.p12"
    keystore.write_bytes(pkcs12.serialize_key_and_certificates(
        b"server", pki.server.key, pki.server.cert, None, BestAvailableEncryption(password)))
    truststore = directory / "trust.p12"
    truststore.write_bytes(pkcs12.serialize_java_truststore(
        [pkcs12.PKCS12Certificate(pki.ca.cert, b"ca")], BestAvailableEncryption(password)))
    return keystore, truststore


def test_pkcs12_stores_as_java_writes_them(server_factory, pki, tmp_path):
    keystore, truststore = pkcs12_stores(pki, tmp_path)
    port = free_port()
    server = server_factory(tls_config(pki, port, **{
        "ssl.keyStore.location": str(keystore), "ssl.keyStore.type": "PKCS12",
        "ssl.keyStore.password": "changeit",
        "ssl.trustStore.location": str(truststore), "ssl.trustStore.type": "PKCS12",
        "ssl.trustStore.password": "changeit"}))
    server.secure_hosts = f"{HOST}:{port}"
    alice = tls_kazoo(server, pki.alice, pki)
    try:
        assert alice.exists("/") is not None
    finally:
        alice.stop()
        alice.close()


@pytest.mark.paddock_only("ZooKeeper reads JKS; Paddock names it and how to convert it")
@pytest.mark.parametrize("store", ["jks", "wrong-password"])
def test_stores_it_cannot_open_stop_the_start_with_a_clear_error(server_factory, pki,
                                                                 tmp_path, store):
    from zkharness import ServerError
    keystore, _ = pkcs12_stores(pki, tmp_path)
    keys = {"ssl.keyStore.location": str(keystore), "ssl.keyStore.type": "PKCS12",
            "ssl.keyStore.password": "wrong"}
    expected = "is the password right?"
    if store == "jks":
        jks = tmp_path / "server.jks"
        subprocess.run(["keytool", "-importkeystore", "-noprompt",
                        "-srckeystore", str(keystore), "-srcstoretype", "PKCS12",
                        "-srcstorepass", "changeit", "-destkeystore", str(jks),
                        "-deststoretype", "JKS", "-deststorepass", "changeit"],
                       check=True, capture_output=True, timeout=120)
        keys = {"ssl.keyStore.location": str(jks), "ssl.keyStore.type": "JKS",
                "ssl.keyStore.password": "changeit"}
        expected = "keytool -importkeystore"
    server = server_factory(tls_config(pki, free_port(), **keys), start=False)
    with pytest.raises(ServerError):
        server.start(timeout=20)
    assert expected in server.stderr_tail(), server.stderr_tail()
