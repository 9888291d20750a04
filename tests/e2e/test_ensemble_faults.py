"""A replicated ensemble under faults: the leader SIGKILLed under load, or
stopped with SIGTERM (it hands leadership over first), a follower frozen
(SIGSTOP) and resumed, a follower restarted with its data wiped, a
minority left alone.  Every test ends the same way: every write a
client saw acknowledged is on every server, and all servers hold identical
trees (paths, data, ACLs and the replicated Stat fields).

Each test starts its own 3-server ensemble (tickTime=200: sessions of
400..4000 ms, kazoo clients get 4000 ms).
"""

from __future__ import annotations

import signal
import time

import pytest

from ensemble import Ensemble, Writer, wait_for
from zkwire import CreateMode, Err, Op, RawClient, Writer as JuteWriter, create_body

from kazoo.client import KazooState

pytestmark = pytest.mark.paddock_only("ensembles are configured the Paddock way")


@pytest.fixture
def make_ensemble(tmp_path):
    made = []

    def make(voters=3, observers=0, config=None):
        e = Ensemble(tmp_path / f"ens{len(made) + 1}", voters, observers, config)
        made.append(e)
        e.start()
        return e

    yield make
    for e in made:
        # Shown by pytest only when the test failed.
        print(f"\n===== ensemble in {e.workdir}: {e.states()}\n{e.log_since({}, 80)}")
        e.close()


def start_writers(ens, root, sets=True):
    """One writer per server, each kazoo client given all hosts with its own
    server first, so clients start spread over the ensemble."""
    writers = []
    for m in ens.members:
        c = ens.client(m, all_hosts=True)
        writers.append(Writer(c, root, f"c{m.id}", sets=sets))
    for w in writers:
        w.start()
    return writers


def wait_progress(writers, since, count, timeout, what):
    wait_for(lambda: all(w.acked_since(since) >= count for w in writers), timeout,
             what=f"every writer to get {count} writes acknowledged {what} "
                  f"(got {[w.acked_since(since) for w in writers]})")


def stop_writers(writers):
    for w in writers:
        w.stop()


def assert_all_running(ens):
    """No server died on its own (a crash, a panic)."""
    for m in ens.members:
        if m.proc is not None and m.proc.poll() is not None:
            raise AssertionError(f"{m.name} exited with code {m.proc.returncode}; "
                                 f"{ens.states()}\n--- {m.name} log tail ---\n"
                                 f"{m.log_tail(30)}")


def verify_acknowledged(ens, writers, members=None):
    """Every acknowledged create is on every server with its data, and every
    writer's counter is at least at its last acknowledged set."""
    assert_all_running(ens)
    for m in (ens.live() if members is None else members):
        tree = ens.snapshot_tree(m)
        for w in writers:
            missing = [p for p in w.acked_paths() if p not in tree]
            assert not missing, (f"{m.name} lacks {len(missing)} of {len(w.acked_paths())} "
                                 f"writes acknowledged to {w.wname}: {missing[:5]}")
            wrong = [p for p, d, _ in w.acked if d is not None and tree[p][0] != d]
            assert not wrong, f"{m.name}: wrong data at {wrong[:5]}"
            if w.set_acked:
                counter = f"{w.root}/{w.wname}"
                value = int(tree[counter][0])
                last = w.set_acked[-1][0]
                assert value >= last, (f"{m.name}: {counter} is {value}, but the set to "
                                       f"{last} was acknowledged")


def max_gap(times):
    times = sorted(times)
    return max((b - a for a, b in zip(times, times[1:])), default=0.0)


def assert_sessions_kept(writers):
    for w in writers:
        assert w.client.client_id == w.session_at_start, \
            f"{w.wname} got a new session: {w.session_at_start} -> {w.client.client_id}"
        lost = [s for _, s in w.states if s == KazooState.LOST]
        assert not lost, f"{w.wname} lost its session: {w.states}"


# ---------------------------------------------------------------- leader kill

@pytest.mark.timeout(150)
def test_leader_sigkill_under_load_keeps_sessions_and_acknowledged_writes(make_ensemble):
    ens = make_ensemble()
    root = "/kill"
    ens.client(ens.leader()).create(root, b"")
    old = ens.leader()
    writers = start_writers(ens, root)
    try:
        t = time.monotonic()
        wait_progress(writers, t, 20, 20, "before the kill")
        t_kill = time.monotonic()
        old.kill()
        new = ens.leader(exclude=[old], timeout=20)
        t_elected = time.monotonic()
        assert new is not old
        # The clients carry on, every one of them (the one on the killed
        # server moves to another with its session).
        wait_progress(writers, t_kill, 10, 30, "after the leader was killed")
        old.restart()
        assert old.mode() in ("follower", "leader")
        t_back = time.monotonic()
        wait_progress(writers, t_back, 10, 30, "after the old leader came back")
    finally:
        stop_writers(writers)
    gap = max_gap(t for w in writers for t in w.ack_times() if t >= t_kill - 1)
    print(f"old leader server.{old.id}, new leader server.{new.id} "
          f"{t_elected - t_kill:.2f}s after the kill; longest gap between acks "
          f"(any client) {gap:.2f}s; unknown outcomes: "
          f"{sum(len(w.unknown) for w in writers)}")
    assert_sessions_kept(writers)
    old.wait_serving()
    verify_acknowledged(ens, writers)
    ens.assert_trees_identical()


# ---------------------------------------------------------------- leader stop

def looking_count(member) -> int:
    """mntr's zk_looking_count: how often the server lost its leader."""
    for line in member.four_letter("mntr").splitlines():
        key, _, value = line.partition("\t")
        if key == "zk_looking_count":
            return int(value)
    raise AssertionError(f"server.{member.id} has no zk_looking_count in mntr")


@pytest.mark.timeout(150)
def test_leader_sigterm_hands_leadership_over_without_an_election(make_ensemble):
    """A leader stopped with SIGTERM first hands leadership to a follower:
    another server leads within 500 ms of the signal, where an election
    would wait out a randomized 1..2 s timeout first; writes pause for less
    than that timeout; no client loses its session nor an acknowledged
    write."""
    ens = make_ensemble()
    root = "/term"
    ens.client(ens.leader()).create(root, b"")
    old = ens.leader()
    others = [m for m in ens.voters if m is not old]
    writers = start_writers(ens, root)
    try:
        t = time.monotonic()
        wait_progress(writers, t, 20, 20, "before the stop")
        looking_before = {m.id: looking_count(m) for m in others}
        t_term = time.monotonic()
        old.proc.send_signal(signal.SIGTERM)
        new = wait_for(lambda: next((m for m in others if m.mode(timeout=0.5) == "leader"), None),
                       timeout=20, interval=0.005, what="another server to lead")
        t_led = time.monotonic()
        assert old.proc.wait(10) == 0, "the stopped leader exited with an error"
        old.terminate()     # reaped: down, as the checks below expect
        wait_progress(writers, t_term, 10, 30, "after the leader stopped")
        looking_after = {m.id: looking_count(m) for m in others}
    finally:
        stop_writers(writers)
    gap = max_gap(t for w in writers for t in w.ack_times() if t >= t_term - 1)
    print(f"old leader server.{old.id}, new leader server.{new.id} "
          f"{t_led - t_term:.3f}s after SIGTERM; longest gap between acks "
          f"(any client) {gap:.3f}s; unknown outcomes: "
          f"{sum(len(w.unknown) for w in writers)}")
    assert f"handed leadership to server.{new.id}" in old.log_tail(200)
    assert t_led - t_term < 0.5, f"server.{new.id} led {t_led - t_term:.3f}s after SIGTERM"
    assert gap < 1.0, f"writes stopped for {gap:.3f}s"
    changes = {i: looking_after[i] - looking_before[i] for i in looking_before}
    assert set(changes.values()) == {1}, \
        f"each server should have lost its leader once, to the hand-off: {changes}"
    assert_sessions_kept(writers)
    verify_acknowledged(ens, writers, members=others)
    old.restart()
    verify_acknowledged(ens, writers)
    ens.assert_trees_identical()


# ---------------------------------------------------------------- frozen follower

@pytest.mark.timeout(120)
def test_follower_sigstop_then_sigcont_catches_up(make_ensemble):
    ens = make_ensemble()
    root = "/frozen"
    leader = ens.leader()
    ens.client(leader).create(root, b"")
    frozen = [m for m in ens.voters if m is not leader][0]
    writers = start_writers(ens, root)
    try:
        wait_progress(writers, time.monotonic(), 10, 20, "before the stop")
        t_stop = time.monotonic()
        frozen.stop()
        time.sleep(4.0)
        during = sum(w.acked_since(t_stop) for w in writers)
        assert during > 0, "no write was acknowledged while one follower of three was stopped"
        # the writer whose server froze has moved elsewhere, same session
        wait_progress(writers, t_stop, 5, 20, "while a follower is stopped")
        frozen.cont()
        t_cont = time.monotonic()
        frozen.wait_serving(20)
        wait_progress(writers, t_cont, 10, 20, "after SIGCONT")
    finally:
        if frozen.stopped:
            frozen.cont()
        stop_writers(writers)
    assert_sessions_kept(writers)
    # It catches up by itself, not only when a sync asks it to.
    leader = ens.leader()
    wait_for(lambda: frozen.zxid() == leader.zxid(), 15,
             what=f"{frozen.name} to reach the leader's zxid")
    print(f"acks while server.{frozen.id} was stopped: {during}; "
          f"leader before/after: server.{leader.id}")
    verify_acknowledged(ens, writers)
    ens.assert_trees_identical()


# ---------------------------------------------------------------- wiped follower

@pytest.mark.timeout(120)
@pytest.mark.parametrize("snap_count,way", [
    # the leader keeps its whole log: the wiped server replays it
    ("1000000", "log"),
    # the leader snapshots and compacts every few dozen writes: the wiped
    # server can only come back by a snapshot streamed from the leader
    ("40", "snapshot"),
])
def test_follower_restarted_with_wiped_data_catches_up(make_ensemble, snap_count, way):
    ens = make_ensemble(config={"snapCount": snap_count})
    root = "/wiped"
    leader = ens.leader()
    c = ens.client(leader)
    c.create(root, b"")
    before = [c.create(f"{root}/before-{i}", f"b{i}".encode()) for i in range(150)]
    c.set(f"{root}/before-0", b"changed")
    c.delete(f"{root}/before-1")
    victim = [m for m in ens.voters if m is not leader][-1]
    victim.kill()
    victim.wipe()
    assert sorted(p.name for p in victim.data_dir.iterdir()) == ["myid"]
    while_down = [c.create(f"{root}/down-{i}", b"d") for i in range(100)]
    # keep writing while it catches up
    writers = start_writers(ens, root)
    try:
        time.sleep(0.5)
        victim.restart(timeout=30)
        assert victim.mode() == "follower"
        t = time.monotonic()
        wait_progress(writers, t, 5, 20, "after the wiped server came back")
    finally:
        stop_writers(writers)
    assert_sessions_kept(writers)
    leader = ens.leader()
    wait_for(lambda: victim.zxid() == leader.zxid(), 15,
             what=f"{victim.name} to reach the leader's zxid")
    tree = ens.snapshot_tree(victim)
    expect = set(before[2:] + while_down + [before[0]])
    missing = sorted(expect - set(tree))
    assert not missing, f"wiped {victim.name} lacks {len(missing)} nodes: {missing[:5]}"
    assert f"{root}/before-1" not in tree
    assert tree[f"{root}/before-0"][0] == b"changed"
    verify_acknowledged(ens, writers)
    ens.assert_trees_identical()
    log = victim.log_text() or ""
    restored = "restored a snapshot from the leader" in log
    assert restored == (way == "snapshot"), f"{victim.name} caught up by {way}?"
    if restored:
        # decoded while its pieces arrived, not read back from disk after
        assert "decoded_as_it_arrived=true" in log, \
            f"{victim.name} read the leader's snapshot back from disk"


@pytest.mark.timeout(120)
def test_a_wiped_voter_votes_again_only_above_the_terms_it_was_told(make_ensemble):
    """A voter restarted empty with its old id has forgotten its votes: it
    is fenced until the other voters told it their terms, votes only above
    them, and the fence is lifted once it holds a higher term durably."""
    ens = make_ensemble()
    root = "/fenced"
    leader = ens.leader()
    c = ens.client(leader)
    c.create(root, b"")
    before = [c.create(f"{root}/before-{i}", b"b") for i in range(20)]
    victim = [m for m in ens.voters if m is not leader][-1]
    victim.kill()
    victim.wipe()
    victim.restart(timeout=30)

    def log():
        # since the wipe: every server of a new group starts fenced too
        text = victim.log_path.read_text(errors="replace")
        return text.rsplit("data dir wiped", 1)[1]

    assert "has no raft state" in log()
    wait_for(lambda: "a majority of the other voters answered" in log(), 10,
             what=f"{victim.name} to learn the other voters' terms")
    assert "vote fence is lifted" not in log(), "no election happened above the floor yet"
    assert (victim.data_dir / "version-paddock").is_dir()
    fence_files = list(victim.data_dir.rglob("vote-fence"))
    assert len(fence_files) == 1, fence_files

    # The old leader goes: the election that follows is above the floor,
    # so the wiped server may take part, and its fence is lifted.
    leader.kill()
    new_leader = ens.leader(exclude=[leader])
    wait_for(lambda: "vote fence is lifted" in log(), 10,
             what=f"{victim.name} to lift its fence")
    assert not fence_files[0].exists()
    c = ens.client(new_leader)
    after = c.create(f"{root}/after", b"a")
    leader.restart(timeout=30)
    wait_for(lambda: victim.zxid() == ens.leader().zxid(), 15,
             what=f"{victim.name} to reach the leader's zxid")
    tree = ens.snapshot_tree(victim)
    missing = sorted(set(before + [after]) - set(tree))
    assert not missing, f"{victim.name} lacks {missing}"
    ens.assert_trees_identical()


# ---------------------------------------------------------------- minority

def _submit_create(raw, path):
    return raw.submit(Op.create2, create_body(path, b"minority"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("alone", ["leader", "follower"])
def test_minority_never_acknowledges_a_write(make_ensemble, alone):
    ens = make_ensemble()
    root = "/minority"
    leader = ens.leader()
    ens.client(leader).create(root, b"")
    lone = leader if alone == "leader" else [m for m in ens.voters if m is not leader][0]
    others = [m for m in ens.voters if m is not lone]
    raw = RawClient(lone.host, lone.port, timeout_ms=4000, io_timeout=5)
    try:
        assert raw.create(f"{root}/with-quorum", b"")[0] == 0
        for m in others:
            m.stop()
        t_stop = time.monotonic()
        pending = {}          # xid -> path
        replies = {}          # path -> (err, seconds after the stop, during minority?)
        new_session = None
        try:
            for i in range(3):
                if raw.closed:
                    break
                path = f"{root}/w{i}"
                try:
                    pending[_submit_create(raw, path)] = path
                except OSError:
                    break
                time.sleep(1.0)
            # A new session is a write too (it goes through the log).
            try:
                fresh = RawClient(lone.host, lone.port, timeout_ms=4000, io_timeout=3)
                new_session = fresh.negotiated_timeout
                fresh.close_socket()
            except (OSError, ConnectionError) as e:
                new_session = repr(e)
            deadline = t_stop + 6.0
            for xid, path in list(pending.items()):
                try:
                    rep = raw.wait_reply(xid, timeout=max(0.05, deadline - time.monotonic()))
                    replies[path] = (rep.err, time.monotonic() - t_stop, True)
                    del pending[xid]
                except (TimeoutError, ConnectionError):
                    pass
            acked_in_minority = {p: r for p, r in replies.items() if r[0] == 0}
        finally:
            for m in others:
                m.cont()
        assert not acked_in_minority, (
            f"server.{lone.id} ({alone}) acknowledged writes with 2 of 3 servers "
            f"stopped: {acked_in_minority}")
        assert not (isinstance(new_session, int) and new_session > 0), (
            f"server.{lone.id} ({alone}) established a new session "
            f"(timeout {new_session} ms) with 2 of 3 servers stopped")
        ens.wait_all_serving(20)
        ens.leader(timeout=20)
        # Writes still pending may complete now that a quorum is back.
        for xid, path in list(pending.items()):
            try:
                rep = raw.wait_reply(xid, timeout=10)
                replies[path] = (rep.err, time.monotonic() - t_stop, False)
            except TimeoutError:
                replies[path] = ("no reply", None, False)
            except ConnectionError:
                replies[path] = ("connection closed", None, False)
    finally:
        raw.close_socket()
    print(f"alone: server.{lone.id} ({alone}); replies: {replies}; "
          f"new session attempt: {new_session!r}")
    acked = [p for p, r in replies.items() if r[0] == 0]
    refused = [p for p, r in replies.items()
               if isinstance(r[0], int) and r[0] not in (0, Err.CONNECTIONLOSS)]
    c = ens.client(ens.leader())
    c.sync(root)
    for p in acked:
        assert c.exists(p) is not None, f"{p} was acknowledged after recovery but is missing"
    for p in refused:
        assert c.exists(p) is None, f"{p} was refused (err {replies[p][0]}) yet applied"
    # The cluster works again through the server that was alone.
    again = ens.client(lone)
    again.create(f"{root}/after", b"")
    ens.assert_trees_identical()


# ---------------------------------------------------------------- more failures

@pytest.mark.timeout(120)
def test_stopped_leader_is_deposed_and_rejoins(make_ensemble):
    """SIGSTOP the leader (it keeps its sockets and believes it leads): the
    others elect a new leader; on SIGCONT the old one must follow, acknowledge
    nothing from its stale term, and serve fresh reads after a sync."""
    ens = make_ensemble()
    root = "/deposed"
    old = ens.leader()
    ens.client(old).create(root, b"")
    writers = start_writers(ens, root)
    try:
        wait_progress(writers, time.monotonic(), 10, 20, "before the stop")
        t_stop = time.monotonic()
        old.stop()
        new = ens.leader(timeout=20)          # among the running servers
        assert new is not old
        wait_progress(writers, t_stop, 10, 30, "while the old leader is stopped")
        old.cont()
        t_cont = time.monotonic()
        old.wait_serving(20)
        wait_progress(writers, t_cont, 10, 30, "after the old leader resumed")
        leader = ens.leader(timeout=20)       # exactly one leader again
    finally:
        if old.stopped:
            old.cont()
        stop_writers(writers)
    assert_all_running(ens)
    assert_sessions_kept(writers)
    print(f"old leader server.{old.id}, leader after: server.{leader.id}, "
          f"modes now: {[m.mode() for m in ens.members]}")
    # A client on the old leader reads the latest write after a sync.
    last_path, last_data, _ = max((a for w in writers for a in w.acked if a[1]),
                                  key=lambda a: a[2])
    c = ens.client(old)
    c.sync(root)
    assert c.get(last_path)[0] == last_data
    verify_acknowledged(ens, writers)
    ens.assert_trees_identical()


@pytest.mark.timeout(120)
def test_five_servers_keep_writing_with_two_killed(make_ensemble):
    ens = make_ensemble(voters=5)
    root = "/five"
    old = ens.leader()
    ens.client(old).create(root, b"")
    writers = start_writers(ens, root)
    try:
        wait_progress(writers, time.monotonic(), 10, 20, "before the kills")
        follower = [m for m in ens.voters if m is not old][0]
        t_kill = time.monotonic()
        old.kill()
        follower.kill()
        new = ens.leader(timeout=20)
        assert new not in (old, follower)
        wait_progress(writers, t_kill, 10, 30, "with 2 of 5 servers killed")
        old.restart()
        follower.restart()
        t_back = time.monotonic()
        wait_progress(writers, t_back, 10, 30, "after both came back")
    finally:
        stop_writers(writers)
    assert_sessions_kept(writers)
    verify_acknowledged(ens, writers)
    ens.assert_trees_identical()


@pytest.mark.timeout(120)
def test_session_whose_server_was_killed_expires_under_the_new_leader(make_ensemble):
    """A client that was on the killed leader and never comes back: the new
    leader, which alone expires sessions, must expire it (after a fresh full
    timeout) and its ephemeral must go from every server."""
    ens = make_ensemble()
    root = "/orphan"
    old = ens.leader()
    timeout_ms = 2000
    raw = RawClient(old.host, old.port, timeout_ms=timeout_ms)
    try:
        assert raw.create(root, b"")[0] == 0
        assert raw.create(f"{root}/eph", b"", mode=CreateMode.EPHEMERAL)[0] == 0
        survivors = [m for m in ens.voters if m is not old]
        clients = [ens.client(m) for m in survivors]
        for c in clients:
            c.sync(root)
            assert c.exists(f"{root}/eph") is not None
        t_kill = time.monotonic()
        old.kill()
        raw.wait_closed(5)
        new = ens.leader(exclude=[old], timeout=20)

        def gone():
            clients[0].sync(root)
            return clients[0].exists(f"{root}/eph") is None

        wait_for(gone, 20, what="the orphaned session to expire")
        elapsed = time.monotonic() - t_kill
    finally:
        raw.close_socket()
    print(f"orphaned session expired {elapsed:.2f}s after the kill (timeout "
          f"{timeout_ms} ms, new leader server.{new.id})")
    assert elapsed >= timeout_ms / 1000.0 * 0.9, \
        f"a session of {timeout_ms} ms expired {elapsed:.2f}s after its server died"
    for c in clients[1:]:
        c.sync(root)
        assert c.exists(f"{root}/eph") is None
    old.restart()
    ens.assert_trees_identical()


@pytest.mark.timeout(90)
def test_requests_forwarded_to_a_dead_leader_are_answered_promptly(make_ensemble):
    """Right after the leader dies, the followers still believe in it for an
    election timeout and forward writes (and syncs' read-index requests) to
    it, where they are lost.  The client must hear about it promptly — a
    reply once a new leader commits the write, or ConnectionLoss (the
    connection closed) so it retries — not wait until its own ping timeout
    or a 10 s server-side timeout.  ZooKeeper's followers close their
    client connections as soon as they lose the leader (within syncLimit
    ticks, here 1 s).

    Long sessions (20 s, allowed by maxSessionTimeout) keep the client's
    ping timeout out of the picture; the clients keep pinging throughout."""
    bound = 5.0    # an election here takes 1..2 s
    ens = make_ensemble(config={"maxSessionTimeout": "30000"})
    old = ens.leader()
    followers = [m for m in ens.voters if m is not old]
    clients = [(f, kind, RawClient(f.host, f.port, timeout_ms=20000))
               for f in followers for kind in ("create", "sync")]
    outcomes = []
    try:
        for i, (_, _, r) in enumerate(clients):
            assert r.create(f"/before-{i}", b"")[0] == 0
        t_kill = time.monotonic()
        old.kill()
        xids = []
        for i, (_, kind, r) in enumerate(clients):
            if kind == "create":
                xids.append(r.submit(Op.create2, create_body(f"/after-{i}", b"")))
            else:
                xids.append(r.submit(Op.sync, JuteWriter().string("/").bytes()))
        for i, ((f, kind, r), xid) in enumerate(zip(clients, xids)):
            try:
                rep = r.wait_reply(xid, timeout=15)
                what, err = f"reply err {rep.err}", rep.err
            except ConnectionError:
                what, err = "connection closed", None
            except TimeoutError:
                what, err = "nothing", None
            outcomes.append((i, f, kind, what, time.monotonic() - t_kill, err))
        new = ens.leader(exclude=[old], timeout=20)
    finally:
        for _, _, r in clients:
            r.close_socket()
    report = "; ".join(f"{kind} via {f.name}: {what} after {dt:.2f}s"
                       for _, f, kind, what, dt, _ in outcomes)
    print(f"killed leader server.{old.id}, new leader server.{new.id}; {report}")
    slow = [f"{kind} via {f.name}" for _, f, kind, _, dt, _ in outcomes if dt > bound]
    assert not slow, (f"requests sent to a follower just after the leader died got no "
                      f"answer for more than {bound}s: {report}")
    c = ens.client(new)
    c.sync("/")
    for i, _, kind, _, _, err in outcomes:
        if kind == "create" and err == 0:
            assert c.exists(f"/after-{i}") is not None
    old.restart()
    ens.assert_trees_identical()


@pytest.mark.timeout(120)
def test_deposed_leader_survives_proposals_forwarded_to_it(make_ensemble):
    """Freeze the leader while clients on both followers pipeline writes:
    the followers forward them to the frozen leader until they elect a new
    one.  On SIGCONT the old leader learns it was deposed and then reads the
    forwarded proposals queued on its sockets; as a follower it must pass
    them on (raft forwards them keeping their original sender) or drop them
    — not crash.  Three rounds, since which arrives first is a race."""
    ens = make_ensemble()
    acked, sent = [], 0
    for rnd in range(3):
        old = ens.leader()
        followers = [m for m in ens.voters if m is not old]
        raws = [RawClient(f.host, f.port, timeout_ms=4000) for f in followers]
        pending = []
        try:
            old.stop()
            for k in range(50):
                for i, r in enumerate(raws):
                    path = f"/r{rnd}-f{i}-{k:03d}"
                    try:
                        pending.append((r, r.submit(Op.create2, create_body(path, b"")), path))
                        sent += 1
                    except OSError:
                        pass
                time.sleep(0.01)
            new = ens.leader(timeout=20)
            assert new is not old
            old.cont()
            time.sleep(2.0)
            assert old.running(), (
                f"round {rnd}: the deposed leader {old.name} exited after SIGCONT:\n"
                f"{old.log_tail(40)}")
            old.wait_serving(20)
            for r, xid, path in pending:
                try:
                    if r.wait_reply(xid, timeout=5).err == 0:
                        acked.append(path)
                except (TimeoutError, ConnectionError):
                    pass
        finally:
            if old.stopped:
                old.cont()
            for r in raws:
                r.close_socket()
    print(f"{len(acked)} of {sent} pipelined creates acknowledged")
    ens.assert_paths_everywhere(acked)
    ens.assert_trees_identical()


def test_an_observer_is_still_replicated_after_the_voters_restart_from_snapshots(make_ensemble):
    """Every voter restarts from a snapshot of its own: the group's
    membership then comes from the snapshot's header, which must keep the
    observer, or no leader would send it anything again."""
    ens = make_ensemble(voters=3, observers=1, config={"snapCount": 20})
    observer = ens.observers[0]
    c = ens.client(ens.leader())
    c.create("/before", b"")
    for i in range(60):
        c.create(f"/before/n{i}", b"x")
    for member in ens.voters:
        snapshots = member.data_dir / "version-paddock" / "snapshots"
        wait_for(lambda: any(not p.name.endswith(".tmp") for p in snapshots.glob("*")),
                 timeout=10, what=f"a snapshot on {member.name}")
    for member in ens.voters:
        member.kill()
    for member in ens.voters:
        member.spawn()
    ens.wait_all_serving()
    writer = ens.client(ens.leader())
    writer.create("/after", b"written after the restart")
    reader = ens.client(observer)
    assert wait_for(lambda: reader.exists("/after") is not None, timeout=10,
                    what="the write to reach the observer"), \
        "the observer no longer receives the log"
