"""Crash safety: SIGKILL the server at random moments while a client writes;
after every restart on the same data directory, every acknowledged write is
there and nothing is half-applied.

The seed is printed; rerun one schedule with PADDOCK_CRASH_SEED=<seed>.
"""

import os
import random
import threading
import time

import pytest
from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from zkharness import KIND

KILLS = 5
# Apache ZooKeeper once expired the writer's session across a kill and
# restart (a CI run, seed 844144677; three reruns of that seed and six of
# others did not), which Paddock must never do. Only against ZooKeeper is
# an expiry one more way for a write's outcome to be unknown; kazoo goes
# on in a new session, and every acknowledged write is still checked.
UNCERTAIN = (ConnectionLoss, OperationTimeoutError, KazooTimeoutError) + (
    (SessionExpiredError,) if KIND == "zookeeper" else ())


class Writer:
    """One client doing a mix of writes in sequence; it records which were
    acknowledged and which were in flight when the connection broke."""

    def __init__(self, zk, rng):
        self.zk = zk
        self.rng = rng
        self.i = 0
        self.acked_seq = {}        # path -> data
        self.acked_seq_order = []  # paths in ack order
        self.uncertain_seq = set()  # data tokens
        self.acked_multi = set()
        self.uncertain_multi = set()
        self.acked_nodes = {}      # path -> data
        self.uncertain_nodes = {}
        self.counter_log = []      # (value, "acked" | "uncertain")
        self.errors = []
        self.ops = 0
        self.pause = threading.Event()
        self.paused = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def one_op(self):
        self.i += 1
        i = self.i
        kind = self.rng.choice(["seq", "seq", "set", "set", "multi", "node"])
        try:
            if kind == "seq":
                token = f"seq-{i}".encode()
                try:
                    path = self.zk.create("/crash/seq-", token, sequence=True)
                except UNCERTAIN:
                    self.uncertain_seq.add(token)
                    raise
                self.acked_seq[path] = token
                self.acked_seq_order.append(path)
            elif kind == "set":
                try:
                    self.zk.set("/crash/counter", str(i).encode())
                except UNCERTAIN:
                    self.counter_log.append((i, "uncertain"))
                    raise
                self.counter_log.append((i, "acked"))
            elif kind == "multi":
                t = self.zk.transaction()
                t.create(f"/crash/m-{i}-a", b"a")
                t.create(f"/crash/m-{i}-b", b"b")
                try:
                    res = t.commit()
                except UNCERTAIN:
                    self.uncertain_multi.add(i)
                    raise
                assert res == [f"/crash/m-{i}-a", f"/crash/m-{i}-b"], res
                self.acked_multi.add(i)
            else:
                path, data = f"/crash/n-{i}", os.urandom(self.rng.randint(0, 3000))
                try:
                    self.zk.create(path, data)
                except UNCERTAIN:
                    self.uncertain_nodes[path] = data
                    raise
                self.acked_nodes[path] = data
            self.ops += 1
        except UNCERTAIN:
            time.sleep(0.05)

    def run(self):
        try:
            while not self.stop.is_set():
                if self.pause.is_set():
                    self.paused.set()
                    time.sleep(0.02)
                    continue
                self.paused.clear()
                self.one_op()
        except Exception as e:  # reported by the test
            self.errors.append(repr(e))
            self.paused.set()


def read_all(zk, names):
    """getData for many nodes, pipelined."""
    pending = {n: zk.get_async(f"/crash/{n}") for n in names}
    return {n: a.get(timeout=60)[0] for n, a in pending.items()}


def verify(zk, w, round_no):
    children = set(zk.get_children("/crash"))
    data = read_all(zk, [c for c in children if c.startswith(("seq-", "n-"))])

    # sequential creates
    seq = {c: data[c] for c in children if c.startswith("seq-")}
    for path, token in w.acked_seq.items():
        name = path.rsplit("/", 1)[1]
        assert name in seq, f"round {round_no}: acknowledged {path} lost"
        assert seq[name] == token, f"round {round_no}: {path} has wrong data"
    acked_names = {p.rsplit("/", 1)[1] for p in w.acked_seq}
    for name, token in seq.items():
        if name not in acked_names:
            assert token in w.uncertain_seq, \
                f"round {round_no}: {name} ({token}) was never written"
    tokens = list(seq.values())
    assert len(tokens) == len(set(tokens)), f"round {round_no}: duplicated create"
    suffixes = [int(p[-10:]) for p in w.acked_seq_order]
    assert suffixes == sorted(suffixes), "sequence numbers went backwards"

    # multi: both or neither
    multis = {}
    for c in children:
        if c.startswith("m-"):
            _, i, half = c.split("-")
            multis.setdefault(int(i), set()).add(half)
    for i, halves in multis.items():
        assert halves == {"a", "b"}, f"round {round_no}: multi {i} half applied: {halves}"
        assert i in w.acked_multi or i in w.uncertain_multi, f"multi {i} never written"
    for i in w.acked_multi:
        assert i in multis, f"round {round_no}: acknowledged multi {i} lost"

    # plain creates with data
    for path, value in w.acked_nodes.items():
        name = path.rsplit("/", 1)[1]
        assert name in children, f"round {round_no}: {path} lost"
        assert data[name] == value, f"round {round_no}: {path} data differs"
    for c in children:
        if c.startswith("n-"):
            path = f"/crash/{c}"
            assert path in w.acked_nodes or path in w.uncertain_nodes, path
            if path in w.uncertain_nodes:
                assert data[c] == w.uncertain_nodes[path]

    # the counter holds the last acknowledged value or a later in-flight one
    value = int(zk.get("/crash/counter")[0])
    last_acked_idx = max((k for k, (_, st) in enumerate(w.counter_log) if st == "acked"),
                         default=-1)
    allowed = {0} if last_acked_idx < 0 else {w.counter_log[last_acked_idx][0]}
    if last_acked_idx < 0:
        allowed |= {v for v, _ in w.counter_log}
    allowed |= {v for v, st in w.counter_log[last_acked_idx + 1:] if st == "uncertain"}
    assert value in allowed, f"round {round_no}: counter {value} not in {sorted(allowed)}"


@pytest.mark.timeout(240)
def test_sigkill_loses_no_acknowledged_write(server_factory, kazoo_factory):
    seed = int(os.environ.get("PADDOCK_CRASH_SEED", random.randrange(1 << 30)))
    print(f"\ncrash test seed: {seed} (rerun with PADDOCK_CRASH_SEED={seed})")
    rng = random.Random(seed)
    s = server_factory({"snapCount": "100"})
    zk = kazoo_factory(s, timeout=30.0)
    zk.create("/crash", b"")
    zk.create("/crash/counter", b"0")
    checker = kazoo_factory(s, timeout=30.0)

    w = Writer(zk, rng)
    w.thread.start()
    try:
        for round_no in range(1, KILLS + 1):
            time.sleep(rng.uniform(0.3, 2.0))
            assert not w.errors, w.errors
            s.kill()
            time.sleep(rng.uniform(0.0, 0.3))
            s.start()
            # let the writer go on for a moment on the restarted server
            time.sleep(0.3)
            w.pause.set()
            assert w.paused.wait(60), "writer did not pause"
            assert not w.errors, w.errors
            deadline = time.monotonic() + 60
            while checker.state != KazooState.CONNECTED and time.monotonic() < deadline:
                time.sleep(0.05)
            checker.sync("/crash")
            verify(checker, w, round_no)
            print(f"round {round_no}: ok after {w.ops} acknowledged ops "
                  f"({len(w.acked_seq)} seq, {len(w.acked_multi)} multi, "
                  f"{len(w.acked_nodes)} nodes; in flight at kills: "
                  f"{len(w.uncertain_seq) + len(w.uncertain_multi) + len(w.uncertain_nodes)}"
                  f" creates, {sum(st == 'uncertain' for _, st in w.counter_log)} sets)")
            w.pause.clear()
    finally:
        w.stop.set()
        w.pause.clear()
        w.thread.join(60)
    assert not w.errors, w.errors
    assert w.ops >= 20, f"only {w.ops} writes were acknowledged"
    # a final clean restart keeps everything too
    s.restart()
    deadline = time.monotonic() + 60
    while checker.state != KazooState.CONNECTED and time.monotonic() < deadline:
        time.sleep(0.05)
    verify(checker, w, "final")


def test_a_long_log_is_replayed_whole_and_in_order(server_factory, kazoo_factory):
    """Thousands of writes with no snapshot after them, replayed at once by a
    restart after SIGKILL (Paddock hands its apply loop batches of
    thousands of entries then, where a server keeping up with its clients
    sees a few): the result must be the tree the writes made, in their
    order (sequence numbers, versions, deletes of what was created)."""
    s = server_factory({"snapCount": "1000000"})
    zk = kazoo_factory(s)
    zk.create("/replay", b"")
    creates = [zk.create_async("/replay/s-", str(i).encode(), sequence=True)
               for i in range(2000)]
    names = [c.get(timeout=60).rsplit("/", 1)[1] for c in creates]
    assert names == [f"s-{i:010}" for i in range(2000)]
    sets = [zk.set_async(f"/replay/{name}", b"set")
            for name in names[::3] for _ in range(2)]
    for result in sets:
        result.get(timeout=60)
    deletes = [zk.delete_async(f"/replay/{name}") for name in names[::5]]
    for result in deletes:
        result.get(timeout=60)

    def tree():
        return {name: (data, stat.version, stat.czxid, stat.mzxid)
                for name in zk.get_children("/replay")
                for data, stat in [zk.get(f"/replay/{name}")]}

    expected = tree()
    assert len(expected) == 2000 - len(names[::5])
    parent = zk.get("/replay")[1]
    zk.stop()

    s.kill()
    s.start()
    zk = kazoo_factory(s)
    assert tree() == expected
    assert zk.get("/replay")[1].cversion == parent.cversion
    # The next sequence number follows the replayed creates.
    assert zk.create("/replay/s-", b"", sequence=True) == "/replay/s-0000002000"
