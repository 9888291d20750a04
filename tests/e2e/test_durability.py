"""Durability of Paddock's own files: recovery through snapshots and the
write-ahead log, and the recovery policy for damaged logs (DESIGN.md §4).

These look inside Paddock's data directory, so they run against Paddock
only."""

import re
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest
from kazoo.exceptions import KazooException

from zkharness import ServerError, paddock_bin

pytestmark = pytest.mark.paddock_only("inspects Paddock's own data files")

# Small enough that a few hundred writes take several snapshots.
SNAPSHOT_EVERY = {"snapCount": "50"}


def wal_segments(server):
    return sorted((server.data_dir / "version-paddock" / "log").glob("wal-*.log"))


def snapshots(server):
    """Finished snapshots: a `.tmp` file is one being written right now, a
    `.removing` one an old snapshot being freed, and `snap.spare` an old
    snapshot kept for the next one to be written over."""
    directory = server.data_dir / "version-paddock" / "snapshots"
    return sorted(p for p in directory.glob("*")
                  if p.suffix not in (".tmp", ".removing", ".spare"))


def files_in_flight(server):
    """Snapshots being written and files being removed, in every directory."""
    top = server.data_dir / "version-paddock"
    return [p for p in top.rglob("*") if p.suffix in (".tmp", ".removing")]


def left_from_before(server, since_ns):
    """The files in flight that were last changed before `since_ns`: what a
    start should have cleaned. A restarted server may begin a snapshot of
    its own at once (its log since the last one is long), under the same
    name; that one is new."""
    left = []
    for path in files_in_flight(server):
        try:
            if path.stat().st_ctime_ns < since_ns:
                left.append(path)
        except FileNotFoundError:
            pass
    return left


def test_recovery_through_snapshots_and_log(server_factory, kazoo_factory):
    s = server_factory(SNAPSHOT_EVERY)
    zk = kazoo_factory(s)
    zk.create("/d", b"")
    for i in range(400):
        zk.create(f"/d/n{i:04}", str(i).encode())
    for i in range(0, 400, 7):
        zk.set(f"/d/n{i:04}", b"changed")
    for i in range(0, 400, 11):
        zk.delete(f"/d/n{i:04}")
    expected = {name: zk.get(f"/d/{name}")[0] for name in zk.get_children("/d")}
    zk.stop()
    assert snapshots(s), "snapCount=50 should have produced snapshots"

    for kill in (False, True):
        s.restart(kill=kill)
        zk = kazoo_factory(s)
        got = {name: zk.get(f"/d/{name}")[0] for name in zk.get_children("/d")}
        assert got == expected
        zk.stop()


def deltas(server):
    """Finished delta snapshots: what changed since the snapshot before."""
    directory = server.data_dir / "version-paddock" / "deltas"
    return sorted(p for p in directory.glob("*")
                  if p.suffix not in (".tmp", ".removing", ".spare"))


def state_of(zk, parent):
    """Every child's data and the stat fields a txn applied twice would
    move (its version, its data's zxid), and the parent's."""
    children = {}
    for name in zk.get_children(parent):
        data, stat = zk.get(f"{parent}/{name}")
        children[name] = (data, stat.version, stat.mzxid)
    stat = zk.exists(parent)
    return children, (stat.cversion, stat.pzxid, stat.numChildren)


def write_a_tree_in_deltas(zk):
    """A tree larger than twice snapCount (50), so that deltas come between
    its whole snapshots, with data set again and again, so that a txn
    applied twice shows in a version."""
    zk.create("/d", b"")
    for i in range(400):
        zk.create(f"/d/n{i:04}", str(i).encode())
    for i in range(0, 400, 11):
        zk.delete(f"/d/n{i:04}")


# The znodes of the tree in deltas whose data a round sets again.
KEPT = [i for i in range(1, 400, 13) if i % 11]


def set_a_round(zk, round):
    for i in KEPT:
        zk.set(f"/d/n{i:04}", f"round {round}".encode())


def index_of(path):
    """The log index in a snapshot's or a delta's file name."""
    return int(path.name.split("-")[1].split(".")[0], 16)


def deltas_after_newest_snapshot(server):
    newest = max((index_of(p) for p in snapshots(server)), default=0)
    return [p for p in deltas(server) if index_of(p) > newest]


def stopped_with_deltas(server, kazoo_factory, kill):
    """Writes a tree in deltas, then sets some of its data round after
    round until the server, stopped (or killed) after a round, leaves a
    delta after its newest whole snapshot: a whole snapshot written last
    removes the deltas before it. Returns the state the server held."""
    zk = kazoo_factory(server)
    write_a_tree_in_deltas(zk)
    for round in range(30):
        set_a_round(zk, round)
        expected = state_of(zk, "/d")
        zk.stop()
        if kill:
            server.kill()
        else:
            server.stop()
        if deltas_after_newest_snapshot(server):
            return expected
        server.start()
        zk = kazoo_factory(server)
    pytest.fail("no delta after the newest whole snapshot in 30 rounds")


def last_load(log):
    """The line of the last start's snapshot load."""
    log = re.sub(r"\x1b\[[0-9;]*m", "", log)
    lines = [line for line in log.splitlines() if "loaded snapshot" in line]
    assert lines, log
    return lines[-1]


def loaded_deltas(log):
    """How many deltas the last start loaded after its snapshot."""
    return int(last_load(log).split("deltas=")[1].split()[0])


def loaded_snapshot(log):
    """The log index of the snapshot the last start loaded."""
    return int(last_load(log).split("zxid=")[1].split()[0])


def test_a_restart_loads_the_snapshot_and_the_deltas_after_it(server_factory, kazoo_factory):
    """The tree of a killed server comes back from its last whole snapshot,
    the deltas after it and the log after those, each txn applied once:
    no version or zxid moved by a txn replayed over a delta holding it."""
    s = server_factory(SNAPSHOT_EVERY)
    expected = stopped_with_deltas(s, kazoo_factory, kill=True)

    s.start()
    assert loaded_deltas(s.stderr_tail(400)) > 0
    zk = kazoo_factory(s)
    assert state_of(zk, "/d") == expected
    zk.stop()


def folded_snapshots(log):
    """The whole snapshots the server folded from a snapshot and its deltas
    rather than wrote from its tree: how many deltas each folded, by its
    log index."""
    log = re.sub(r"\x1b\[[0-9;]*m", "", log)
    folded = {}
    deltas_since_whole = 0
    for index, kind in re.findall(r'zxid=(\d+) kind="(\w+)"', log):
        if kind == "delta":
            deltas_since_whole += 1
            continue
        if kind == "folded":
            folded[int(index)] = deltas_since_whole
        deltas_since_whole = 0
    return folded


def test_a_snapshot_folded_from_deltas_holds_the_tree(server_factory, kazoo_factory):
    """A whole snapshot taken while deltas follow on one is folded from the
    files, the base and its deltas, not written from the tree: with every
    delta gone, a killed server comes back from a snapshot folded from
    several and the log after it with every version and zxid as they
    were."""
    s = server_factory(SNAPSHOT_EVERY)
    zk = kazoo_factory(s)
    write_a_tree_in_deltas(zk)
    for round in range(30):
        set_a_round(zk, round)
        newest = max(index_of(p) for p in snapshots(s))
        if folded_snapshots(s.stderr_tail(10_000)).get(newest, 0) >= 3:
            break
    else:
        pytest.fail("the newest snapshot was not folded from 3 deltas or more in 30 rounds")
    expected = state_of(zk, "/d")
    zk.stop()
    s.kill()
    for delta in deltas(s):
        delta.unlink()

    s.start()
    log = s.stderr_tail(10_000)
    assert loaded_deltas(log) == 0
    assert loaded_snapshot(log) in folded_snapshots(log)
    zk = kazoo_factory(s)
    assert state_of(zk, "/d") == expected
    zk.stop()


def snapshots_written(log):
    """The snapshots the server wrote, in order: each one's log index and
    kind (whole, delta or folded)."""
    log = re.sub(r"\x1b\[[0-9;]*m", "", log)
    return [(int(index), kind) for index, kind in re.findall(r'zxid=(\d+) kind="(\w+)"', log)]


def test_a_snapshot_after_most_of_the_tree_changed_is_written_whole(server_factory, kazoo_factory):
    """Once one multi rewrote every znode of a tree in deltas, the next
    snapshot is written whole from the tree, neither a delta (as large as
    the tree) nor folded (reading the chain's files to replace all they
    hold), and a killed server comes back from it with every version and
    zxid as they were."""
    s = server_factory(SNAPSHOT_EVERY)
    zk = kazoo_factory(s)
    write_a_tree_in_deltas(zk)
    rewrite = zk.transaction()
    for name in zk.get_children("/d"):
        rewrite.set_data(f"/d/{name}", b"rewritten")
    rewrite.commit()
    rewritten_at = zk.exists(f"/d/n{KEPT[0]:04}").mzxid
    for round in range(30):
        set_a_round(zk, round)
        written = snapshots_written(s.stderr_tail(10_000))
        after = [(index, kind) for index, kind in written if index >= rewritten_at]
        if after:
            break
    else:
        pytest.fail("no snapshot written after the rewrite in 30 rounds")
    assert after[0][1] == "whole", written
    expected = state_of(zk, "/d")
    zk.stop()

    s.restart(kill=True)
    zk = kazoo_factory(s)
    assert state_of(zk, "/d") == expected
    zk.stop()


def test_a_damaged_delta_gives_way_to_the_snapshot_and_the_log(server_factory, kazoo_factory):
    """A delta found damaged while the restart reads it: the server says so,
    and starts from the whole snapshot and the log after it instead."""
    s = server_factory(SNAPSHOT_EVERY)
    expected = stopped_with_deltas(s, kazoo_factory, kill=False)
    newest = deltas_after_newest_snapshot(s)[-1]
    damaged = bytearray(newest.read_bytes())
    damaged[len(damaged) // 2] ^= 0x01
    newest.write_bytes(bytes(damaged))

    s.start()
    log = s.stderr_tail(400)
    assert "cannot be loaded with it" in log, log
    assert loaded_deltas(log) == 0
    zk = kazoo_factory(s)
    assert state_of(zk, "/d") == expected
    zk.stop()


def test_a_damaged_newest_snapshot_gives_way_to_the_one_before(server_factory, kazoo_factory):
    """A restart reads its snapshot once, checking it as it decodes it: a
    flipped byte in the newest is found on the way, and the server starts
    from the snapshot before it and the log after that one, with every
    write, and says so."""
    s = server_factory(SNAPSHOT_EVERY)
    zk = kazoo_factory(s)
    zk.create("/d", b"")
    for i in range(300):
        zk.create(f"/d/n{i:04}", str(i).encode() * 50)
    expected = {name: zk.get(f"/d/{name}")[0] for name in zk.get_children("/d")}
    zk.stop()
    s.stop()
    found = snapshots(s)
    assert len(found) >= 2, found
    newest = bytearray(found[-1].read_bytes())
    newest[len(newest) // 2] ^= 0x01
    found[-1].write_bytes(bytes(newest))

    s.start()
    log = s.stderr_tail(400)
    assert found[-1].name in log and "trying an older one" in log, log
    zk = kazoo_factory(s)
    got = {name: zk.get(f"/d/{name}")[0] for name in zk.get_children("/d")}
    assert got == expected
    zk.stop()


@pytest.mark.parametrize("caught", [".tmp", ".removing"])
def test_a_kill_while_a_snapshot_is_written_or_a_file_removed_loses_nothing(
        server_factory, kazoo_factory, caught):
    """SIGKILL the moment a snapshot is being written (`.tmp`, over the
    spare) or an old log segment or snapshot is being freed (`.removing`,
    2 MB at a time), while a client
    writes: every acknowledged write is there after the restart, and what
    was in flight is cleaned up."""
    s = server_factory({"snapCount": "200"})
    zk = kazoo_factory(s)
    zk.create("/k", b"")
    killed = threading.Event()

    def kill_when_caught():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(p.suffix == caught for p in files_in_flight(s)):
                killed.set()
                s.kill()
                return
            time.sleep(0.001)

    watcher = threading.Thread(target=kill_when_caught)
    watcher.start()
    acknowledged = []
    payload = b"x" * 8192
    try:
        while not killed.is_set():
            acknowledged.append(zk.create(f"/k/n{len(acknowledged):06}", payload))
    except KazooException:
        pass
    watcher.join()
    assert killed.is_set(), f"never saw a {caught} file"
    zk.stop()
    restarted_ns = time.time_ns()
    s.start()
    assert not left_from_before(s, restarted_ns), left_from_before(s, restarted_ns)
    zk = kazoo_factory(s)
    names = set(zk.get_children("/k"))
    missing = [p for p in acknowledged if p.rsplit("/", 1)[1] not in names]
    assert not missing, f"{len(missing)} acknowledged creates lost, first {missing[0]}"
    zk.stop()


def test_log_is_trimmed_behind_snapshots(server_factory, kazoo_factory):
    s = server_factory(SNAPSHOT_EVERY)
    zk = kazoo_factory(s)
    payload = b"x" * 4096
    zk.create("/big", b"")
    for i in range(300):
        zk.create(f"/big/n{i}", payload)
    zk.stop()
    assert len(snapshots(s)) <= 3, "older snapshots are deleted"


def corrupt_middle_record(segment: Path):
    """Flips a byte inside the first record's payload: damage in the middle
    of the log, with valid records after it."""
    data = bytearray(segment.read_bytes())
    # 8-byte file magic, 20-byte record header, then the payload.
    data[8 + 20 + 2] ^= 0xFF
    segment.write_bytes(bytes(data))


def test_corrupt_middle_record_stops_the_server_with_a_clear_message(server_factory, kazoo_factory):
    s = server_factory()
    zk = kazoo_factory(s)
    for i in range(20):
        zk.create(f"/c{i}", b"v")
    zk.stop()
    s.stop()
    segments = wal_segments(s)
    assert segments
    corrupt_middle_record(segments[0])
    with pytest.raises(ServerError) as failure:
        s.start(timeout=20)
    message = str(failure.value)
    assert segments[0].name in message, message
    assert "offset" in message, message


def test_torn_tail_is_truncated_and_the_server_starts(server_factory, kazoo_factory):
    s = server_factory()
    zk = kazoo_factory(s)
    for i in range(20):
        zk.create(f"/t{i}", b"v")
    zk.stop()
    s.kill()
    segment = wal_segments(s)[-1]
    # A record header that promises more bytes than were written: what a
    # crash in the middle of an append leaves behind.
    data = bytearray(segment.read_bytes())
    end = len(data.rstrip(b"\0"))
    torn = struct.pack(">IIQ", 0x12345678, 1000, 999) + b"partial"
    data[end:end + len(torn)] = torn
    segment.write_bytes(bytes(data))
    s.start()
    assert "truncat" in s.stderr_tail(200).lower()
    zk = kazoo_factory(s)
    assert all(zk.exists(f"/t{i}") for i in range(20))
    zk.create("/after", b"ok")
    zk.stop()


def test_bad_configuration_is_reported_with_the_key(tmp_path):
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"dataDir={tmp_path}\nminSessionTimeout=9000\nmaxSessionTimeout=1000\n")
    p = subprocess.run([str(paddock_bin()), "serve", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    assert "minSessionTimeout" in p.stderr and "maxSessionTimeout" in p.stderr, p.stderr


def test_a_snapshot_is_due_by_log_size_as_well_as_by_count(server_factory, kazoo_factory):
    """Few large writes: snapCount is far off, snapSizeLimitInKb is not. The
    log since the last snapshot is held in memory too, so without the size
    limit a client writing megabytes at a time would grow the server by
    snapCount times that before any snapshot let the log go."""
    s = server_factory({"snapCount": "100000", "snapSizeLimitInKb": "4096"})
    zk = kazoo_factory(s)
    zk.create("/big", b"")
    for i in range(20):
        zk.create(f"/big/n{i}", b"x" * (900 * 1024))
    wait = time.monotonic() + 10
    while not snapshots(s):
        assert time.monotonic() < wait, "18 MB of log and no snapshot"
        time.sleep(0.05)
    zk.stop()
    s.restart(kill=True)
    zk = kazoo_factory(s)
    assert len(zk.get_children("/big")) == 20
