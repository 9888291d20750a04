"""A tiny ZooKeeper wire-protocol (Jute) client for tests.

kazoo 2.11 lacks several newer operations (TTL and container creates,
addWatch, removeWatches, setWatches2, whoAmI, getEphemerals,
getAllChildrenNumber, multiRead) and hides details such as the negotiated
session timeout or the exact error code in a multi reply header.  This module
speaks the protocol directly so tests can check those, and can also send
deliberately broken input.

Everything here is synchronous with explicit timeouts: a background thread
reads frames, request() waits for the reply with the matching xid.
"""

from __future__ import annotations

import queue
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Optional


# ---------------------------------------------------------------- constants

class Op:
    notification = 0
    create = 1
    delete = 2
    exists = 3
    getData = 4
    setData = 5
    getACL = 6
    setACL = 7
    getChildren = 8
    sync = 9
    ping = 11
    getChildren2 = 12
    check = 13
    multi = 14
    create2 = 15
    reconfig = 16
    checkWatches = 17
    removeWatches = 18
    createContainer = 19
    deleteContainer = 20
    createTTL = 21
    multiRead = 22
    auth = 100
    setWatches = 101
    sasl = 102
    getEphemerals = 103
    getAllChildrenNumber = 104
    setWatches2 = 105
    addWatch = 106
    whoAmI = 107
    createSession = -10
    closeSession = -11
    error = -1


class Err:
    OK = 0
    SYSTEMERROR = -1
    RUNTIMEINCONSISTENCY = -2
    DATAINCONSISTENCY = -3
    CONNECTIONLOSS = -4
    MARSHALLINGERROR = -5
    UNIMPLEMENTED = -6
    OPERATIONTIMEOUT = -7
    BADARGUMENTS = -8
    UNKNOWNSESSION = -12
    APIERROR = -100
    NONODE = -101
    NOAUTH = -102
    BADVERSION = -103
    NOCHILDRENFOREPHEMERALS = -108
    NODEEXISTS = -110
    NOTEMPTY = -111
    SESSIONEXPIRED = -112
    INVALIDCALLBACK = -113
    INVALIDACL = -114
    AUTHFAILED = -115
    SESSIONMOVED = -118
    NOTREADONLY = -119
    EPHEMERALONLOCALSESSION = -120
    NOWATCHER = -121
    RECONFIGDISABLED = -123
    SESSIONCLOSEDREQUIRESASLAUTH = -124
    QUOTAEXCEEDED = -125
    THROTTLEDOP = -127


class CreateMode:
    PERSISTENT = 0
    EPHEMERAL = 1
    PERSISTENT_SEQUENTIAL = 2
    EPHEMERAL_SEQUENTIAL = 3
    CONTAINER = 4
    PERSISTENT_WITH_TTL = 5
    PERSISTENT_SEQUENTIAL_WITH_TTL = 6


class AddWatchMode:
    PERSISTENT = 0
    PERSISTENT_RECURSIVE = 1


class WatcherType:
    """removeWatches / checkWatches type field."""
    CHILDREN = 1
    DATA = 2
    ANY = 3


class EventType:
    NONE = -1
    NodeCreated = 1
    NodeDeleted = 2
    NodeDataChanged = 3
    NodeChildrenChanged = 4
    DataWatchRemoved = 5
    ChildWatchRemoved = 6
    PersistentWatchRemoved = 7


class Perms:
    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31


WATCH_XID = -1
PING_XID = -2
AUTH_XID = -4
SET_WATCHES_XID = -8

OPEN_ACL_UNSAFE = [(Perms.ALL, "world", "anyone")]


# ---------------------------------------------------------------- encoding

class Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def int(self, v: int) -> "Writer":
        self.buf += struct.pack(">i", v)
        return self

    def long(self, v: int) -> "Writer":
        self.buf += struct.pack(">q", v)
        return self

    def bool(self, v: bool) -> "Writer":
        self.buf += b"\x01" if v else b"\x00"
        return self

    def buffer(self, v: Optional[bytes]) -> "Writer":
        if v is None:
            return self.int(-1)
        self.int(len(v))
        self.buf += v
        return self

    def string(self, v: Optional[str]) -> "Writer":
        return self.buffer(None if v is None else v.encode("utf-8"))

    def strings(self, vs) -> "Writer":
        self.int(len(vs))
        for v in vs:
            self.string(v)
        return self

    def acls(self, acls) -> "Writer":
        self.int(len(acls))
        for perms, scheme, ident in acls:
            self.int(perms).string(scheme).string(ident)
        return self

    def bytes(self) -> bytes:
        return bytes(self.buf)


class Reader:
    def __init__(self, data: bytes, off: int = 0) -> None:
        self.data = data
        self.off = off

    def remaining(self) -> int:
        return len(self.data) - self.off

    def int(self) -> int:
        (v,) = struct.unpack_from(">i", self.data, self.off)
        self.off += 4
        return v

    def long(self) -> int:
        (v,) = struct.unpack_from(">q", self.data, self.off)
        self.off += 8
        return v

    def bool(self) -> bool:
        v = self.data[self.off]
        self.off += 1
        return v != 0

    def buffer(self) -> Optional[bytes]:
        n = self.int()
        if n < 0:
            return None
        v = self.data[self.off:self.off + n]
        if len(v) != n:
            raise ValueError("short buffer")
        self.off += n
        return bytes(v)

    def string(self) -> Optional[str]:
        b = self.buffer()
        return None if b is None else b.decode("utf-8")

    def strings(self):
        n = self.int()
        return [self.string() for _ in range(max(n, 0))]

    def stat(self) -> "Stat":
        return Stat(
            czxid=self.long(), mzxid=self.long(), ctime=self.long(),
            mtime=self.long(), version=self.int(), cversion=self.int(),
            aversion=self.int(), ephemeralOwner=self.long(),
            dataLength=self.int(), numChildren=self.int(), pzxid=self.long())

    def acls(self):
        n = self.int()
        out = []
        for _ in range(max(n, 0)):
            perms = self.int()
            scheme = self.string()
            ident = self.string()
            out.append((perms, scheme, ident))
        return out


@dataclass
class Stat:
    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeralOwner: int
    dataLength: int
    numChildren: int
    pzxid: int


@dataclass
class Reply:
    xid: int
    zxid: int
    err: int
    body: bytes

    def reader(self) -> Reader:
        return Reader(self.body)


@dataclass
class WatchEvent:
    type: int
    state: int
    path: str


class ZkError(Exception):
    def __init__(self, err: int, what: str = "") -> None:
        super().__init__(f"{what}: ZooKeeper error {err}")
        self.err = err


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def connect_request(timeout_ms: int = 10000, session_id: int = 0,
                    passwd: bytes = b"\x00" * 16, last_zxid: int = 0,
                    read_only: bool = False) -> bytes:
    return (Writer().int(0).long(last_zxid).int(timeout_ms).long(session_id)
            .buffer(passwd).bool(read_only).bytes())


def request_header(xid: int, op: int) -> bytes:
    return Writer().int(xid).int(op).bytes()


# request bodies ------------------------------------------------------------

def create_body(path, data=b"", acl=None, flags=0, ttl=None) -> bytes:
    w = Writer().string(path).buffer(data).acls(
        OPEN_ACL_UNSAFE if acl is None else acl).int(flags)
    if ttl is not None:
        w.long(ttl)
    return w.bytes()


def path_watch_body(path, watch=False) -> bytes:
    return Writer().string(path).bool(watch).bytes()


def multi_body(ops) -> bytes:
    """ops: list of (opcode, body_bytes)."""
    w = Writer()
    for op, body in ops:
        w.int(op).bool(False).int(-1)
        w.buf += body
    w.int(-1).bool(True).int(-1)
    return w.bytes()


def parse_multi(reader: Reader):
    """Returns a list of (type, err, payload-reader-tuple) per op result."""
    results = []
    while True:
        typ = reader.int()
        done = reader.bool()
        err = reader.int()
        if done:
            break
        if typ == Op.error:
            results.append(("error", reader.int()))
        elif typ in (Op.create,):
            results.append(("create", reader.string()))
        elif typ in (Op.create2, Op.createTTL, Op.createContainer):
            results.append(("create2", reader.string(), reader.stat()))
        elif typ == Op.delete:
            results.append(("delete",))
        elif typ == Op.setData:
            results.append(("setData", reader.stat()))
        elif typ == Op.check:
            results.append(("check",))
        elif typ == Op.getData:
            results.append(("getData", reader.buffer(), reader.stat()))
        elif typ == Op.getChildren:
            results.append(("getChildren", reader.strings()))
        else:
            raise ValueError(f"unknown multi result type {typ} err {err}")
    return results


# ---------------------------------------------------------------- sockets

def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed by server")
        out += chunk
    return bytes(out)


def read_frame(sock: socket.socket) -> bytes:
    (n,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, n)


def read_until_close(sock: socket.socket, timeout: float = 5.0):
    """Reads until EOF. Returns (data, closed) where closed tells whether
    the peer closed the connection before `timeout` elapsed."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + timeout
    data = bytearray()
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return bytes(data), True
        if not chunk:
            return bytes(data), True
        data += chunk
    return bytes(data), False


def four_letter(host: str, port: int, word: str, timeout: float = 10.0) -> str:
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        data, closed = read_until_close(s, timeout)
    return data.decode("utf-8", errors="replace")


class RawClient:
    """A minimal ZooKeeper session over one TCP connection.

    A reader thread collects replies (by xid) and watch events (in
    `self.events`); a pinger thread keeps the session alive unless
    `pings=False` or `stop_pings()` was called.
    """

    def __init__(self, host: str, port: int, timeout_ms: int = 10000,
                 session_id: int = 0, passwd: bytes = b"\x00" * 16,
                 last_zxid: int = 0, pings: bool = True,
                 io_timeout: float = 10.0) -> None:
        self.host, self.port = host, port
        self.io_timeout = io_timeout
        self.sock = socket.create_connection((host, port), timeout=io_timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(frame(connect_request(timeout_ms, session_id,
                                                passwd, last_zxid)))
        r = Reader(read_frame(self.sock))
        self.protocol_version = r.int()
        self.negotiated_timeout = r.int()
        self.session_id = r.long()
        self.passwd = r.buffer()
        self.read_only = r.bool() if r.remaining() else False
        self.events: "queue.Queue[WatchEvent]" = queue.Queue()
        # Every frame received, in order: ("event", WatchEvent) or
        # ("reply", Reply); lets tests check the order of events and replies.
        self.frames: list = []
        self.last_zxid = last_zxid
        self._xid = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._replies: dict = {}
        self._closed = threading.Event()
        self._pinging = threading.Event()
        if self.negotiated_timeout <= 0:
            # session expired / rejected: the server closes the connection
            self._closed.set()
            return
        self.sock.settimeout(None)
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        if pings:
            self._pinging.set()
        self._pinger = threading.Thread(target=self._ping_loop, daemon=True)
        self._pinger.start()

    # -- plumbing

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def _read_loop(self) -> None:
        try:
            while True:
                data = read_frame(self.sock)
                r = Reader(data)
                xid, zxid, err = r.int(), r.long(), r.int()
                if zxid > 0:
                    self.last_zxid = max(self.last_zxid, zxid)
                if xid == WATCH_XID:
                    ev = WatchEvent(r.int(), r.int(), r.string())
                    self.frames.append(("event", ev))
                    self.events.put(ev)
                    continue
                if xid == PING_XID:
                    continue
                rep = Reply(xid, zxid, err, data[r.off:])
                self.frames.append(("reply", rep))
                with self._cond:
                    self._replies[xid] = rep
                    self._cond.notify_all()
        except (OSError, ConnectionError, struct.error, ValueError):
            pass
        finally:
            self._closed.set()
            with self._cond:
                self._cond.notify_all()

    def _ping_loop(self) -> None:
        interval = max(self.negotiated_timeout / 3000.0, 0.1)
        while not self._closed.wait(interval):
            if self._pinging.is_set():
                try:
                    self.send(request_header(PING_XID, Op.ping))
                except OSError:
                    return

    def stop_pings(self) -> None:
        self._pinging.clear()

    def send(self, payload: bytes) -> None:
        with self._lock:
            self.sock.sendall(frame(payload))

    def next_xid(self) -> int:
        with self._lock:
            self._xid += 1
            return self._xid

    def submit(self, op: int, body: bytes = b"", xid: Optional[int] = None) -> int:
        if xid is None:
            xid = self.next_xid()
        self.send(request_header(xid, op) + body)
        return xid

    def submit_all(self, op: int, bodies: list) -> list:
        """Sends one request per body in a single write, so that they reach
        the server together; returns their xids."""
        return self.submit_requests([(op, body) for body in bodies])

    def submit_requests(self, requests: list) -> list:
        """Sends (op, body) requests in a single write, so that they reach
        the server together; returns their xids."""
        xids = [self.next_xid() for _ in requests]
        payload = b"".join(frame(request_header(xid, op) + body)
                           for xid, (op, body) in zip(xids, requests))
        with self._lock:
            self.sock.sendall(payload)
        return xids

    def wait_reply(self, xid: int, timeout: Optional[float] = None) -> Reply:
        deadline = time.monotonic() + (timeout or self.io_timeout)
        with self._cond:
            while xid not in self._replies:
                if self._closed.is_set():
                    raise ConnectionError(
                        f"connection closed while waiting for xid {xid}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no reply for xid {xid}")
                self._cond.wait(left)
            return self._replies.pop(xid)

    def request(self, op: int, body: bytes = b"", xid: Optional[int] = None,
                timeout: Optional[float] = None) -> Reply:
        return self.wait_reply(self.submit(op, body, xid), timeout)

    def next_event(self, timeout: float = 10.0) -> WatchEvent:
        return self.events.get(timeout=timeout)

    def drain_events(self, wait: float = 0.5) -> list:
        """All events that arrive within `wait` seconds of quiet."""
        out = []
        while True:
            try:
                out.append(self.events.get(timeout=wait))
            except queue.Empty:
                return out

    def no_event(self, wait: float = 0.5) -> bool:
        try:
            ev = self.events.get(timeout=wait)
        except queue.Empty:
            return True
        self.events.put(ev)
        return False

    def wait_closed(self, timeout: float) -> bool:
        return self._closed.wait(timeout)

    def close_socket(self) -> None:
        self._pinging.clear()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._closed.set()

    def close(self) -> None:
        """closeSession then close the socket."""
        if not self._closed.is_set():
            try:
                self.request(Op.closeSession, timeout=5)
            except (OSError, ConnectionError, TimeoutError):
                pass
        self.close_socket()

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- operations (return err codes and parsed bodies)

    def check(self, reply: Reply, what: str) -> Reader:
        if reply.err != 0:
            raise ZkError(reply.err, what)
        return reply.reader()

    def create(self, path, data=b"", acl=None, mode=CreateMode.PERSISTENT,
               ttl=None, op=None):
        """create2/createContainer/createTTL. Returns (err, path, stat)."""
        if op is None:
            if mode == CreateMode.CONTAINER:
                op = Op.createContainer
            elif mode in (CreateMode.PERSISTENT_WITH_TTL,
                          CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL):
                op = Op.createTTL
            else:
                op = Op.create2
        if op == Op.createTTL and ttl is None:
            ttl = -1
        rep = self.request(op, create_body(path, data, acl, mode,
                                           ttl if op == Op.createTTL else None))
        if rep.err != 0:
            return rep.err, None, None
        r = rep.reader()
        p = r.string()
        stat = r.stat() if op != Op.create else None
        return 0, p, stat

    def delete(self, path, version=-1) -> int:
        return self.request(Op.delete, Writer().string(path).int(version)
                            .bytes()).err

    def exists(self, path, watch=False):
        rep = self.request(Op.exists, path_watch_body(path, watch))
        return rep.err, (rep.reader().stat() if rep.err == 0 else None)

    def get_data(self, path, watch=False):
        rep = self.request(Op.getData, path_watch_body(path, watch))
        if rep.err:
            return rep.err, None, None
        r = rep.reader()
        return 0, r.buffer(), r.stat()

    def set_data(self, path, data, version=-1):
        rep = self.request(Op.setData, Writer().string(path).buffer(data)
                           .int(version).bytes())
        return rep.err, (rep.reader().stat() if rep.err == 0 else None)

    def get_children(self, path, watch=False):
        rep = self.request(Op.getChildren2, path_watch_body(path, watch))
        if rep.err:
            return rep.err, None, None
        r = rep.reader()
        return 0, r.strings(), r.stat()

    def get_acl(self, path):
        rep = self.request(Op.getACL, Writer().string(path).bytes())
        if rep.err:
            return rep.err, None, None
        r = rep.reader()
        return 0, r.acls(), r.stat()

    def sync(self, path):
        rep = self.request(Op.sync, Writer().string(path).bytes())
        return rep.err, (rep.reader().string() if rep.err == 0 else None)

    def add_auth(self, scheme: str, auth: bytes) -> int:
        body = Writer().int(0).string(scheme).buffer(auth).bytes()
        return self.request(Op.auth, body, xid=AUTH_XID).err

    def sasl_digest_md5(self, user: str, password: str) -> int:
        """SASL DIGEST-MD5 over opcode 102, as ZooKeeper clients do it (the
        server name is the fixed `zk-sasl-md5`). Returns the first non-zero
        error code, or 0 when the exchange completed."""
        import puresasl.client
        cli = puresasl.client.SASLClient(host="zk-sasl-md5", service="zookeeper",
                                        mechanism="DIGEST-MD5", username=user,
                                        password=password)
        challenge = None
        for _ in range(5):
            if cli.complete:
                return 0
            response = cli.process(challenge=challenge)
            if cli.complete and not response:
                return 0
            rep = self.request(Op.sasl, Writer().buffer(response or b"").bytes())
            if rep.err:
                return rep.err
            challenge = rep.reader().buffer()
        return 0 if cli.complete else Err.AUTHFAILED

    def add_watch(self, path, mode) -> int:
        return self.request(Op.addWatch, Writer().string(path).int(mode)
                            .bytes()).err

    def remove_watches(self, path, wtype) -> int:
        return self.request(Op.removeWatches, Writer().string(path)
                            .int(wtype).bytes()).err

    def check_watches(self, path, wtype) -> int:
        return self.request(Op.checkWatches, Writer().string(path)
                            .int(wtype).bytes()).err

    def set_watches2(self, relative_zxid, data=(), exist=(), child=(),
                     persistent=(), recursive=()) -> int:
        body = (Writer().long(relative_zxid).strings(list(data))
                .strings(list(exist)).strings(list(child))
                .strings(list(persistent)).strings(list(recursive)).bytes())
        return self.request(Op.setWatches2, body, xid=SET_WATCHES_XID).err

    def set_watches(self, relative_zxid, data=(), exist=(), child=()) -> int:
        body = (Writer().long(relative_zxid).strings(list(data))
                .strings(list(exist)).strings(list(child)).bytes())
        return self.request(Op.setWatches, body, xid=SET_WATCHES_XID).err

    def get_ephemerals(self, prefix="/"):
        rep = self.request(Op.getEphemerals, Writer().string(prefix).bytes())
        return rep.err, (rep.reader().strings() if rep.err == 0 else None)

    def get_all_children_number(self, path):
        rep = self.request(Op.getAllChildrenNumber,
                           Writer().string(path).bytes())
        return rep.err, (rep.reader().int() if rep.err == 0 else None)

    def who_am_i(self):
        rep = self.request(Op.whoAmI)
        if rep.err:
            return rep.err, None
        r = rep.reader()
        n = r.int()
        return 0, [(r.string(), r.string()) for _ in range(n)]

    def multi(self, ops, read=False):
        """ops: list of (opcode, body). Returns (header_err, results)."""
        rep = self.request(Op.multiRead if read else Op.multi, multi_body(ops))
        if rep.body:
            return rep.err, parse_multi(rep.reader())
        return rep.err, None


# multi op builders -----------------------------------------------------------

def m_create(path, data=b"", acl=None, mode=CreateMode.PERSISTENT, op=Op.create):
    return (op, create_body(path, data, acl, mode))


def m_delete(path, version=-1):
    return (Op.delete, Writer().string(path).int(version).bytes())


def m_set(path, data, version=-1):
    return (Op.setData, Writer().string(path).buffer(data).int(version).bytes())


def m_check(path, version):
    return (Op.check, Writer().string(path).int(version).bytes())


def m_get_data(path):
    return (Op.getData, path_watch_body(path, False))


def m_get_children(path):
    return (Op.getChildren, path_watch_body(path, False))
