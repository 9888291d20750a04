"""Hostile or broken input: the offending connection is closed (or gets an
error code) while other clients carry on; jute.maxbuffer is enforced."""

import socket
import struct
import threading
import time

import pytest
from kazoo.exceptions import ConnectionLoss

from zkwire import Err, Op, RawClient, Writer, connect_request, frame


class Background:
    """A kazoo client that keeps writing while a test misbehaves."""

    def __init__(self, zk, root):
        self.zk, self.root = zk, root
        self.errors, self.count = [], 0
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        path = f"{self.root}/bg"
        self.zk.create(path, b"0")
        while not self.stop.is_set():
            try:
                self.count += 1
                self.zk.set(path, str(self.count).encode())
                assert self.zk.get(path)[0] == str(self.count).encode()
            except Exception as e:  # pragma: no cover - reported below
                self.errors.append(repr(e))
                return
            time.sleep(0.01)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        # the client must still make progress after the misbehaviour
        target = self.count + 3
        deadline = time.monotonic() + 15
        while self.count < target and not self.errors and time.monotonic() < deadline:
            time.sleep(0.01)
        self.stop.set()
        self.t.join(10)
        assert not self.errors, self.errors
        assert self.count >= target, "the well-behaved client stalled"


@pytest.mark.parametrize("payload", [
    pytest.param(struct.pack(">i", -1), id="negative-length"),
    pytest.param(struct.pack(">i", -2147483648), id="min-int-length"),
    pytest.param(struct.pack(">i", 0x7FFFFFFF), id="huge-length"),
    pytest.param(struct.pack(">i", 1048576 * 2) + b"\0" * 1024, id="over-maxbuffer"),
    pytest.param(frame(b""), id="empty-connect-frame"),
    pytest.param(frame(b"\x00\x00\x00\x00"), id="short-connect"),
    pytest.param(b"\x00\x00\x00\x05hello", id="garbage-connect"),
    pytest.param(b"\xde\xad\xbe\xef" * 8, id="random-bytes"),
])
def test_bad_first_frame_closes_connection(server, zk, root, payload):
    with Background(zk, root):
        data, closed = server.send_raw(payload, timeout=10)
        assert closed, "the server must close a connection that sends this"
        assert data == b""
        # the server still accepts new sessions
        c = RawClient(server.host, server.port)
        assert c.exists("/")[0] == 0
        c.close()


def test_truncated_frame_then_hangup(server, zk, root):
    with Background(zk, root):
        for _ in range(20):
            with socket.create_connection((server.host, server.port), timeout=5) as s:
                s.sendall(struct.pack(">i", 100) + b"\x00" * 10)


def test_stalled_partial_frame_does_not_block_others(server, zk, root):
    with socket.create_connection((server.host, server.port), timeout=5) as s:
        s.sendall(struct.pack(">i", 44) + b"\x00" * 7)  # half a connect
        with Background(zk, root):
            time.sleep(1.0)


@pytest.mark.parametrize("payload", [
    pytest.param(struct.pack(">i", -1), id="negative-length"),
    pytest.param(struct.pack(">i", 0x7FFFFFFF), id="huge-length"),
    pytest.param(frame(b""), id="empty-frame"),
    pytest.param(frame(b"\x00\x00\x00\x01"), id="short-header"),
])
def test_bad_frame_after_connect_closes_connection(server, raw_factory, zk, root, payload):
    with Background(zk, root):
        c = raw_factory(server, timeout_ms=20000)
        c.sock.sendall(payload)
        assert c.wait_closed(10)
        # the session itself is alive: it can be resumed
        again = raw_factory(server, session_id=c.session_id, passwd=c.passwd)
        assert again.session_id == c.session_id
        assert again.exists("/")[0] == 0


@pytest.mark.parametrize("opcode", [999, 50, -7, 0])
def test_unknown_opcode_is_unimplemented_then_close(server, raw_factory, zk, root, opcode):
    with Background(zk, root):
        c = raw_factory(server, timeout_ms=20000)
        rep = c.request(opcode, b"abc")
        assert rep.err == Err.UNIMPLEMENTED
        assert c.wait_closed(5), "ZooKeeper closes the connection after UNIMPLEMENTED"
        # only the connection: the session can be resumed
        again = raw_factory(server, session_id=c.session_id, passwd=c.passwd)
        assert again.session_id == c.session_id


@pytest.mark.parametrize("opcode,body", [
    pytest.param(Op.getData, b"\xff\xff", id="getData-garbage"),
    pytest.param(Op.getData, b"", id="getData-empty"),
    pytest.param(Op.getData, Writer().int(-1).bool(False).bytes(), id="getData-null-path"),
    pytest.param(Op.getData, Writer().int(100000).bytes(), id="getData-long-string"),
    pytest.param(Op.exists, b"\x00\x00", id="exists-garbage"),
    pytest.param(Op.setData, b"\x00\x00\x00\x02/a", id="setData-truncated"),
    pytest.param(Op.create, b"\x00\x00\x00\x02/a", id="create-truncated"),
    pytest.param(Op.multi, b"\x00\x00\x00\x01", id="multi-truncated"),
])
def test_malformed_body_is_marshalling_error(server, raw_factory, zk, root, opcode, body):
    with Background(zk, root):
        c = raw_factory(server)
        rep = c.request(opcode, body)
        assert rep.err == Err.MARSHALLINGERROR
        # the connection stays usable
        assert c.exists("/")[0] == 0
        assert not c.closed


def test_malformed_write_consumes_a_zxid(server_factory, raw_factory):
    s = server_factory()
    c = raw_factory(s)
    _, _, st = c.create("/a")
    rep = c.request(Op.setData, b"\x00\x00\x00\x02/a")
    assert rep.err == Err.MARSHALLINGERROR
    assert rep.zxid == st.czxid + 1
    _, _, st2 = c.create("/b")
    assert st2.czxid == st.czxid + 2


def test_many_connections_opened_and_dropped(server, zk, root):
    with Background(zk, root):
        for i in range(50):
            with socket.create_connection((server.host, server.port), timeout=5) as s:
                if i % 2:
                    s.sendall(frame(connect_request()))
                    s.settimeout(5)
                    assert s.recv(4)


# ---------------------------------------------------------------- jute.maxbuffer

MAXBUF = {"jute.maxbuffer": "4096"}


def test_jute_maxbuffer_enforced_raw(server_factory, raw_factory):
    s = server_factory(MAXBUF)
    c = raw_factory(s, timeout_ms=20000)
    assert c.create("/n", b"small")[0] == 0
    assert c.set_data("/n", b"x" * 4000)[0] == 0  # frame just under 4096
    with pytest.raises(ConnectionError):
        c.set_data("/n", b"y" * 4100)             # frame over 4096
    assert c.closed
    again = raw_factory(s, session_id=c.session_id, passwd=c.passwd)
    err, data, st = again.get_data("/n")
    assert data == b"x" * 4000 and st.version == 1


def test_jute_maxbuffer_kazoo(server_factory, kazoo_factory):
    s = server_factory(MAXBUF)
    zk = kazoo_factory(s)
    zk.create("/n", b"small")
    sid = zk.client_id
    with pytest.raises(ConnectionLoss):
        zk.set("/n", b"y" * 5000)
    with pytest.raises(ConnectionLoss):
        zk.create("/big", b"z" * 5000)
    # kazoo reconnects to the same session; nothing was applied
    assert zk.get("/n")[0] == b"small"
    assert zk.exists("/big") is None
    assert zk.client_id == sid


def test_default_maxbuffer_allows_just_under_one_mib(server, zk, root):
    data = b"a" * (1024 * 1024 - 200)
    zk.create(f"{root}/big", data)
    assert zk.get(f"{root}/big")[0] == data


def test_default_maxbuffer_rejects_over_one_mib(server, raw_factory, root):
    c = raw_factory(server)
    assert c.create(f"{root}/n")[0] == 0
    with pytest.raises(ConnectionError):
        c.set_data(f"{root}/n", b"a" * (1024 * 1024 + 100))
