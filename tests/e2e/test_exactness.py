"""Where real clients trip when a server is not exactly ZooKeeper.

- Null data: ZooKeeper keeps a znode created or set with null data (Java
  `null`, kazoo `None`, a jute buffer of length -1) as null, answers it as
  null and counts it as length 0. Kafka's controller creates
  `/latest_producer_id_block` with null data and reads null as "no block
  yet"; an empty buffer instead broke every idempotent producer.
- Checks no stricter than ZooKeeper's (PrepRequestProcessor and the auth
  providers): the container flag on a plain create (go-zookeeper sends it),
  digest credentials without a colon, `addauth ip`, a multi op refused
  before proposing.

Every test here runs against Apache ZooKeeper too.
"""

import base64
import hashlib
import subprocess

import pytest
from kazoo.exceptions import NoAuthError
from kazoo.security import make_acl

from zkharness import ZK_CLI, wait_until
from zkwire import (SET_WATCHES_XID, CreateMode, Err, Op, Writer, create_body, four_letter,
                    multi_body, parse_multi)

ZKCLI_TIMEOUT = 120


def digest_of(credentials: str) -> str:
    """DigestAuthenticationProvider.generateDigest: the user is what comes
    before the first colon (all of it when there is none)."""
    user = credentials.split(":", 1)[0]
    h = hashlib.sha1(credentials.encode()).digest()
    return f"{user}:{base64.b64encode(h).decode()}"


# ---------------------------------------------------------------- null data

def test_kazoo_null_data_reads_back_as_none(zk, root):
    zk.create(f"{root}/n", None)
    zk.create(f"{root}/e", b"")
    data, stat = zk.get(f"{root}/n")
    assert data is None
    assert stat.dataLength == 0
    assert zk.get(f"{root}/e")[0] == b""

    zk.set(f"{root}/e", None)
    zk.set(f"{root}/n", b"")
    assert zk.get(f"{root}/e")[0] is None
    assert zk.get(f"{root}/n")[0] == b""
    assert zk.get(f"{root}/e")[1].version == 1


def test_null_data_in_a_multi(server, raw_factory, zk, root):
    """A multi's create and setData keep null too (kazoo's transaction
    insists on bytes, the Java client's Op.create does not)."""
    zk.create(f"{root}/s", b"x")
    c = raw_factory(server)
    ops = [(Op.create, create_body(f"{root}/t", None)),
           (Op.setData, Writer().string(f"{root}/s").buffer(None).int(-1).bytes())]
    rep = c.request(Op.multi, multi_body(ops))
    assert rep.err == 0
    results = parse_multi(rep.reader())
    assert results[0] == ("create", f"{root}/t")
    assert results[1][1].dataLength == 0
    assert zk.get(f"{root}/t")[0] is None
    assert zk.get(f"{root}/s")[0] is None


def test_null_data_on_the_wire(server, raw_factory, root):
    """getData answers length -1 for null and 0 for empty; multiRead too."""
    c = raw_factory(server)
    assert c.create(f"{root}/n", None)[0] == 0
    assert c.create(f"{root}/e", b"")[0] == 0
    err, data, stat = c.get_data(f"{root}/n")
    assert (err, data, stat.dataLength) == (0, None, 0)
    err, data, _ = c.get_data(f"{root}/e")
    assert (err, data) == (0, b"")

    reads = [(Op.getData, Writer().string(p).bool(False).bytes())
             for p in (f"{root}/n", f"{root}/e")]
    rep = c.request(Op.multiRead, multi_body(reads))
    assert rep.err == 0
    results = parse_multi(rep.reader())
    assert [(r[0], r[1]) for r in results] == [("getData", None), ("getData", b"")]


def test_kafka_producer_id_block_reads_null_until_written(zk, root):
    """Kafka's ZkProducerIdManager: create with null data, read null as "no
    block yet", then write the first block with a version check."""
    path = f"{root}/latest_producer_id_block"
    zk.create(path, None)
    data, stat = zk.get(path)
    assert data is None, "Kafka would try to parse an empty block and fail"
    zk.set(path, b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}',
           version=stat.version)
    assert zk.get(path)[0].startswith(b'{"version":1')


def zkcli(server, script):
    p = subprocess.run([ZK_CLI, "-server", server.hosts], input=script,
                       capture_output=True, text=True, timeout=ZKCLI_TIMEOUT)
    return p.stdout


@pytest.mark.skipif(not __import__("os").path.exists(ZK_CLI),
                    reason="zkCli.sh not installed (apt-get install zookeeper)")
def test_zkcli_create_without_data_is_null(server, zk, root):
    """zkCli's `create PATH` sends null data, and its `get` prints null."""
    out = zkcli(server, f"create {root}/cli\nget {root}/cli\nquit\n")
    assert zk.get(f"{root}/cli")[0] is None
    lines = [line.strip() for line in out.splitlines()]
    assert "null" in lines, out


# ---------------------------------------------------------------- create flags

def test_plain_create_with_the_container_flag_makes_a_persistent_node(
        server, raw_factory, zk, root):
    """pRequest2TxnCreate logs a CreateTxn for opcodes create and create2,
    which carries only "ephemeral": the node is persistent, so it is not
    reaped when its last child goes, as a container would be."""
    c = raw_factory(server)
    for op in (Op.create, Op.create2):
        path = f"{root}/flag4-{op}"
        rep = c.request(op, create_body(path, b"", flags=CreateMode.CONTAINER))
        assert rep.err == 0
        assert rep.reader().string() == path
        zk.create(f"{path}/child", b"")
        zk.delete(f"{path}/child")
    # The container made the proper way is reaped; the others stay.
    cont = f"{root}/real-container"
    assert c.create(cont, mode=CreateMode.CONTAINER)[0] == 0
    zk.create(f"{cont}/child", b"")
    zk.delete(f"{cont}/child")
    assert wait_until(lambda: zk.exists(cont) is None, timeout=15)
    for op in (Op.create, Op.create2):
        stat = zk.exists(f"{root}/flag4-{op}")
        assert stat is not None and stat.ephemeralOwner == 0


def test_create_container_opcode_with_persistent_flags_makes_a_container(
        server, raw_factory, zk, root):
    c = raw_factory(server)
    cont = f"{root}/c0"
    rep = c.request(Op.createContainer, create_body(cont, b"", flags=CreateMode.PERSISTENT))
    assert rep.err == 0
    zk.create(f"{cont}/child", b"")
    zk.delete(f"{cont}/child")
    assert wait_until(lambda: zk.exists(cont) is None, timeout=15), \
        "createContainer made something other than a container"


def test_ttl_flags_on_a_plain_create_are_bad_arguments(server, raw_factory, root):
    c = raw_factory(server)
    rep = c.request(Op.create2, create_body(f"{root}/t", b"",
                                            flags=CreateMode.PERSISTENT_WITH_TTL))
    assert rep.err == Err.BADARGUMENTS


# ---------------------------------------------------------------- auth

def test_digest_credentials_without_a_colon_are_accepted(server, kazoo_factory, root):
    """DigestAuthenticationProvider hashes whatever it is given; the user is
    the whole string when there is no colon."""
    zk = kazoo_factory(server, auth_data=[("digest", "blah")])
    assert zk.connected
    path = f"{root}/blah-only"
    zk.create(path, b"mine", acl=[make_acl("digest", digest_of("blah"), all=True)])
    assert zk.get(path)[0] == b"mine"
    other = kazoo_factory(server)
    with pytest.raises(NoAuthError):
        other.get(path)


def test_empty_digest_credentials_and_addauth_ip(server, raw_factory, root):
    c = raw_factory(server)
    assert c.add_auth("digest", b"") == 0
    assert c.add_auth("ip", b"anything at all") == 0
    assert not c.wait_closed(0.5)
    assert c.create(f"{root}/still-open")[0] == 0
    err, ids = c.who_am_i()
    assert err == 0
    assert ("digest", "") in ids, ids
    assert ("ip", "127.0.0.1") in ids


def test_null_digest_credentials_fail(server, raw_factory):
    c = raw_factory(server)
    body = Writer().int(0).string("digest").buffer(None).bytes()
    assert c.request(Op.auth, body, xid=-4).err == Err.AUTHFAILED


# ---------------------------------------------------------------- multi

@pytest.fixture
def no_ttl_server(server_factory):
    return server_factory({"extendedTypesEnabled": "false"})


def test_a_refused_multi_op_fails_the_multi_not_the_request(no_ttl_server, kazoo_factory):
    """An op refused before proposing is an ErrorTxn in its place: the
    multi answers per-op results (OK before, the error, then
    RuntimeInconsistency) with header err 0."""
    zk = kazoo_factory(no_ttl_server)
    c_ops = [
        (Op.create, create_body("/before", b"")),
        (Op.createTTL, create_body("/ttl", b"", flags=CreateMode.PERSISTENT_WITH_TTL,
                                   ttl=1000)),
        (Op.create, create_body("/after", b"")),
    ]
    from zkwire import RawClient
    c = RawClient(no_ttl_server.host, no_ttl_server.port)
    try:
        rep = c.request(Op.multi, multi_body(c_ops))
        assert rep.err == 0
        results = parse_multi(rep.reader())
        assert results == [("error", 0), ("error", Err.UNIMPLEMENTED),
                           ("error", Err.RUNTIMEINCONSISTENCY)]
    finally:
        c.close()
    assert zk.exists("/before") is None


# ---------------------------------------------------------------- strings

def test_a_path_that_is_not_utf8_is_a_bad_path_not_a_bad_packet(server, raw_factory, root):
    """ZooKeeper decodes strings as Java does, replacing invalid UTF-8
    with U+FFFD, which path validation then refuses (BadArguments) and no
    node is named by (NoNode); the connection stays up."""
    c = raw_factory(server)
    path = f"{root}/bad-".encode() + b"\xff"
    body = (Writer().buffer(path).buffer(b"").int(1).int(31).string("world")
            .string("anyone").int(0).bytes())
    assert c.request(Op.create2, body).err == Err.BADARGUMENTS
    assert c.request(Op.getData, Writer().buffer(path).bool(False).bytes()).err == Err.NONODE
    assert c.create(f"{root}/fine")[0] == 0


# ---------------------------------------------------------------- SASL
#
# ZooKeeperServer.processSasl: the token is dereferenced before anything
# else (a null one ends the connection unanswered); without a JAAS Server
# section there is no SaslServer and the NullPointerException it meets is
# caught, so the answer is OK with a null token; a failure of the
# DIGEST-MD5 server is AuthFailed with a null token, then the close.

NULL_TOKEN = b"\xff\xff\xff\xff"


@pytest.fixture
def jaas_server(server_factory, tmp_path):
    from test_sasl import JAAS
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    return server_factory({"jaasLoginConfig": str(jaas)})


def sasl_body(token):
    return Writer().buffer(token).bytes()


def assert_sasl_refused(c, token):
    rep = c.request(Op.sasl, sasl_body(token))
    assert (rep.err, rep.body) == (Err.AUTHFAILED, NULL_TOKEN)
    assert c.wait_closed(5)


def test_sasl_without_jaas_answers_ok_with_a_null_token(server, raw_factory, root):
    c = raw_factory(server)
    for token in (b"", b"anything"):
        rep = c.request(Op.sasl, sasl_body(token))
        assert (rep.err, rep.body) == (0, NULL_TOKEN)
    assert not c.wait_closed(0.5)
    assert c.create(f"{root}/after-sasl")[0] == 0
    assert c.who_am_i() == (0, [("ip", "127.0.0.1")])


@pytest.mark.parametrize("target", ["server", "jaas_server"])
def test_a_null_sasl_token_closes_the_connection_unanswered(target, request, raw_factory):
    c = raw_factory(request.getfixturevalue(target))
    xid = c.submit(Op.sasl, sasl_body(None))
    assert c.wait_closed(5)
    assert not [f for f in c.frames if f[0] == "reply" and f[1].xid == xid]


def digest_md5_response(user, password, challenge):
    import puresasl.client
    cli = puresasl.client.SASLClient(host="zk-sasl-md5", service="zookeeper",
                                     mechanism="DIGEST-MD5", username=user,
                                     password=password)
    return cli.process(challenge=challenge)


def test_a_wrong_sasl_password_is_auth_failed_with_a_null_token(jaas_server, raw_factory):
    c = raw_factory(jaas_server)
    challenge = c.request(Op.sasl, sasl_body(b"")).reader().buffer()
    assert_sasl_refused(c, digest_md5_response("alice", "wrong", challenge))


def test_a_first_sasl_token_is_ignored(jaas_server, raw_factory):
    """Java's DIGEST-MD5 server ignores an initial response (RFC 2831
    subsequent authentication, which it does not support) and challenges."""
    c = raw_factory(jaas_server)
    rep = c.request(Op.sasl, sasl_body(b'username="alice"'))
    assert rep.err == 0
    challenge = rep.reader().buffer()
    assert b"nonce=" in challenge
    rep = c.request(Op.sasl, sasl_body(digest_md5_response("alice", "secret", challenge)))
    assert rep.err == 0 and rep.reader().buffer().startswith(b"rspauth=")
    assert ("sasl", "alice") in c.who_am_i()[1]


def test_a_sasl_token_over_4096_bytes_fails(jaas_server, raw_factory):
    """DigestMD5Server.evaluateResponse refuses longer responses."""
    c = raw_factory(jaas_server)
    assert c.request(Op.sasl, sasl_body(b"x" * 4096)).err == 0
    assert_sasl_refused(c, b"x" * 4097)


def test_sasl_after_a_completed_exchange_fails(jaas_server, raw_factory):
    """A completed DIGEST-MD5 server is "at illegal state"."""
    c = raw_factory(jaas_server)
    assert c.sasl_digest_md5("alice", "secret") == 0
    assert_sasl_refused(c, b"")


# ---------------------------------------------------------------- null paths
#
# A path of length -1 is Java's null, and each handler meets it its own
# way: PathUtils.validatePath(null) is BadArguments (setData, setACL); sync
# echoes it; addWatch stores a watch no event ever names; removeWatches
# finds none. Every other handler dereferences it: MarshallingError.

NULL_PATH = None


def null_path_body(*rest):
    w = Writer().string(NULL_PATH)
    for kind, value in rest:
        getattr(w, kind)(value)
    return w.bytes()


@pytest.mark.parametrize("op,body,err", [
    pytest.param(Op.setData, null_path_body(("buffer", b"x"), ("int", -1)),
                 Err.BADARGUMENTS, id="setData"),
    pytest.param(Op.setACL, null_path_body(("acls", [(31, "world", "anyone")]), ("int", -1)),
                 Err.BADARGUMENTS, id="setACL"),
    pytest.param(Op.removeWatches, null_path_body(("int", 3)), Err.NOWATCHER,
                 id="removeWatches"),
    pytest.param(Op.checkWatches, null_path_body(("int", 3)), Err.MARSHALLINGERROR,
                 id="checkWatches"),
    pytest.param(Op.getData, null_path_body(("bool", False)), Err.MARSHALLINGERROR,
                 id="getData"),
    pytest.param(Op.exists, null_path_body(("bool", True)), Err.MARSHALLINGERROR,
                 id="exists"),
    pytest.param(Op.getACL, null_path_body(), Err.MARSHALLINGERROR, id="getACL"),
    pytest.param(Op.delete, null_path_body(("int", -1)), Err.MARSHALLINGERROR, id="delete"),
    pytest.param(Op.create2, null_path_body(("buffer", b""), ("acls", [(31, "world", "anyone")]),
                                            ("int", 0)),
                 Err.MARSHALLINGERROR, id="create2"),
    pytest.param(Op.multi, multi_body([(Op.setData, null_path_body(("buffer", b"x"),
                                                                   ("int", -1)))]),
                 Err.MARSHALLINGERROR, id="multi-setData"),
])
def test_a_null_path_is_answered_per_op(server, raw_factory, op, body, err):
    c = raw_factory(server)
    assert c.request(op, body).err == err
    assert c.exists("/")[0] == 0


def test_a_null_path_set_data_is_bad_arguments_through_the_log(server_factory, raw_factory):
    """validatePath fails in the prep stage, which logs an error txn."""
    c = raw_factory(server_factory())
    _, _, st = c.create("/a")
    rep = c.request(Op.setData, null_path_body(("buffer", b"x"), ("int", -1)))
    assert (rep.err, rep.zxid) == (Err.BADARGUMENTS, st.czxid + 1)


def test_sync_echoes_a_null_path(server, raw_factory):
    rep = raw_factory(server).request(Op.sync, null_path_body())
    assert (rep.err, rep.body) == (0, NULL_TOKEN)


def test_add_watch_on_a_null_path_is_ok_and_never_fires(server, raw_factory, zk, root):
    """One per connection: ZooKeeper 3.8 meets the null in its watch-mode
    table on the second (see ARCHITECTURE.md, departures)."""
    clients = [raw_factory(server) for _ in range(2)]
    for mode, c in enumerate(clients):
        # an unknown mode is refused first
        assert c.request(Op.addWatch, null_path_body(("int", 7))).err == Err.MARSHALLINGERROR
        assert c.request(Op.addWatch, null_path_body(("int", mode))).err == 0
    zk.create(f"{root}/x", b"")
    zk.set(f"{root}/x", b"y")
    zk.delete(f"{root}/x")
    assert all(c.no_event(1.0) for c in clients)


# ---------------------------------------------------------------- setWatches
#
# DataTree.setWatches iterates each list and looks every one-shot watch's
# node up: a null list, or a null path in the data, exist or child list, is
# a NullPointerException, so MarshallingError. A null path in a persistent
# list is filed under a null key, which no event names.

def set_watches_body(lists):
    w = Writer().long(0)
    for paths in lists:
        if paths is None:
            w.int(-1)
            continue
        w.int(len(paths))
        for p in paths:
            w.string(p)
    return w.bytes()


@pytest.mark.parametrize("op,lists", [
    pytest.param(Op.setWatches, [None, [], []], id="v1-null-data-list"),
    pytest.param(Op.setWatches, [[], [None], []], id="v1-null-exist-path"),
    pytest.param(Op.setWatches2, [[], [], [None], [], []], id="v2-null-child-path"),
    pytest.param(Op.setWatches2, [[], [], [], None, []], id="v2-null-persistent-list"),
    pytest.param(Op.setWatches2, [[], [], [], [], None], id="v2-null-recursive-list"),
])
def test_set_watches_with_a_null_list_or_path_is_marshalling(server, raw_factory, op, lists):
    c = raw_factory(server)
    rep = c.request(op, set_watches_body(lists), xid=SET_WATCHES_XID)
    assert rep.err == Err.MARSHALLINGERROR
    assert c.exists("/")[0] == 0


@pytest.mark.parametrize("lists", [
    pytest.param([[], [], [], [None, "{root}"], []], id="persistent"),
    pytest.param([[], [], [], ["{root}"], [None]], id="recursive"),
])
def test_set_watches2_takes_a_null_persistent_path(server, raw_factory, zk, root, lists):
    """One per connection: ZooKeeper 3.8 meets the null in its watch-mode
    table on the second (see ARCHITECTURE.md, departures)."""
    c = raw_factory(server)
    lists = [[p if p is None else p.format(root=root) for p in ps] for ps in lists]
    assert c.request(Op.setWatches2, set_watches_body(lists), xid=SET_WATCHES_XID).err == 0
    zk.set(root, b"changed")
    assert c.next_event().path == root
    assert c.no_event(0.5)


# ---------------------------------------------------------------- exists watches

@pytest.mark.parametrize("path", ["rel", "{root}/a/", "{root}//b"])
def test_an_exists_watch_on_a_missing_invalid_path_is_kept(server, raw_factory, root, path):
    """DataTree.statNode adds the watch for any path without a NUL, valid
    or not, before it finds no node."""
    path = path.format(root=root)
    c = raw_factory(server)
    assert c.exists(path, watch=True)[0] == Err.NONODE
    assert c.remove_watches(path, 2) == 0
    assert c.remove_watches(path, 2) == Err.NOWATCHER


# ---------------------------------------------------------------- sasl ACLs
#
# Without a SASL provider ZooKeeper has no `sasl` scheme, so fixupACL finds
# such an id invalid: InvalidAcl, but only where fixupACL runs (after the
# flags, TTL, session and path checks of a create; after validatePath for
# setACL; before the parent or node is looked up).

SASL_ACL = [(31, "sasl", "alice")]


@pytest.mark.parametrize("op,path,flags,ttl,err", [
    pytest.param(Op.create2, "rel", 0, None, Err.BADARGUMENTS, id="relative-path"),
    pytest.param(Op.create2, "{root}/x", 9, None, Err.BADARGUMENTS, id="bad-flags"),
    pytest.param(Op.createTTL, "{root}/x", CreateMode.PERSISTENT_WITH_TTL, 0,
                 Err.BADARGUMENTS, id="bad-ttl"),
    pytest.param(Op.create2, "{root}/x", 0, None, Err.INVALIDACL, id="valid"),
    pytest.param(Op.create2, "{root}/missing/x", 0, None, Err.INVALIDACL, id="no-parent"),
])
def test_a_sasl_acl_without_sasl_is_refused_where_fixup_acl_runs(
        server, raw_factory, root, op, path, flags, ttl, err):
    c = raw_factory(server)
    body = create_body(path.format(root=root), b"", SASL_ACL, flags, ttl)
    assert c.request(op, body).err == err


def test_a_sasl_acl_without_sasl_comes_after_the_ttl_switch(no_ttl_server, raw_factory):
    c = raw_factory(no_ttl_server)
    body = create_body("/t", b"", SASL_ACL, CreateMode.PERSISTENT_WITH_TTL, 1000)
    assert c.request(Op.createTTL, body).err == Err.UNIMPLEMENTED


@pytest.mark.parametrize("path,err", [
    pytest.param("{root}/", Err.BADARGUMENTS, id="invalid-path"),
    pytest.param("{root}/missing", Err.INVALIDACL, id="missing-node"),
    pytest.param("{root}", Err.INVALIDACL, id="existing-node"),
])
def test_set_acl_with_a_sasl_acl_without_sasl(server, raw_factory, root, path, err):
    c = raw_factory(server)
    body = Writer().string(path.format(root=root)).acls(SASL_ACL).int(-1).bytes()
    assert c.request(Op.setACL, body).err == err


def test_a_sasl_acl_without_sasl_fails_its_multi_op(server, raw_factory, zk, root):
    c = raw_factory(server)
    ops = [(Op.create, create_body(f"{root}/ok", b"")),
           (Op.create, create_body(f"{root}/sasl", b"", SASL_ACL)),
           (Op.create, create_body("rel", b"", SASL_ACL))]
    rep = c.request(Op.multi, multi_body(ops))
    assert rep.err == 0
    assert parse_multi(rep.reader()) == [("error", 0), ("error", Err.INVALIDACL),
                                         ("error", Err.RUNTIMEINCONSISTENCY)]
    rep = c.request(Op.multi, multi_body(ops[2:]))
    assert parse_multi(rep.reader()) == [("error", Err.BADARGUMENTS)]
    assert zk.exists(f"{root}/ok") is None


# ---------------------------------------------------------------- configuration

@pytest.mark.parametrize("min_timeout,configured,granted", [("-1", 4000, 4000), ("-2", -2, 100)])
def test_only_minus_one_means_the_default_min_session_timeout(
        server_factory, raw_factory, min_timeout, configured, granted):
    """QuorumPeerConfig: -1 is 2 ticks; any other value, even negative, is
    taken as given, so a short request is granted as asked."""
    s = server_factory({"minSessionTimeout": min_timeout})
    assert f"minSessionTimeout={configured}\n" in four_letter(s.host, s.port, "conf")
    assert raw_factory(s, timeout_ms=100).negotiated_timeout == granted


def test_a_super_digest_without_a_colon_starts_and_never_matches(server_factory, raw_factory):
    """DigestAuthenticationProvider compares the client's `user:hash` id
    with superDigest as given: without a colon nothing ever equals it."""
    s = server_factory({"DigestAuthenticationProvider.superDigest": "nocolon"})
    owner = raw_factory(s)
    assert owner.add_auth("digest", b"alice:pw") == 0
    alice_only = [(31, "digest", digest_of("alice:pw"))]
    assert owner.create("/secret", b"x", acl=alice_only)[0] == 0
    for credentials in (b"nocolon", b"nocolon:", b""):
        c = raw_factory(s)
        assert c.add_auth("digest", credentials) == 0
        assert c.get_data("/secret")[0] == Err.NOAUTH
        assert "super" not in [scheme for scheme, _ in c.who_am_i()[1]]
    if s.kind == "paddock":
        assert "superDigest has no colon" in s.stderr_tail()
