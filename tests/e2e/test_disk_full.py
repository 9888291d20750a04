"""A full disk (ENOSPC) on a real file system: a small tmpfs holds the
server's data directory and a filler file takes its free space. Writes must
fail with a clear error while reads go on, the write caught by the full
disk must complete once space is freed, and nothing acknowledged is lost.

Apache ZooKeeper has no such behaviour to compare with (its request
processors stop the server on an I/O error), so this is Paddock's own.
Mounting needs root (CI runs as root)."""

import os
import subprocess
import time

import pytest
from kazoo.exceptions import NotReadOnlyCallError
from kazoo.handlers.threading import KazooTimeoutError

from ensemble import Ensemble, wait_for

pytestmark = pytest.mark.paddock_only("ZooKeeper stops on a full disk")

# Room for two of the 64 MiB WAL segments the server reserves: the first is
# filled with writes, the second cannot be reserved while the filler takes
# the free space, and can once it is removed.
DISK_MB = 160
VALUE = b"v" * (900 * 1024)


def mount_small_disk(path):
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(path)],
        capture_output=True, text=True)
    if mounted.returncode != 0:
        raise AssertionError(
            "could not mount a small tmpfs for the disk-full test (it needs root with "
            f"CAP_SYS_ADMIN, as CI has): {mounted.stderr.strip()}")


def unmount(path):
    subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def small_disk(server_factory):
    """A stopped server whose data directory is a tmpfs of DISK_MB."""
    s = server_factory(start=False)
    mount_small_disk(s.data_dir)
    yield s
    s.kill()
    unmount(s.data_dir)


@pytest.fixture
def small_disks(tmp_path):
    """A 3-server ensemble, each server's data directory a tmpfs of DISK_MB."""
    ens = Ensemble(tmp_path, voters=3)
    mounted = []
    try:
        for m in ens.members:
            mount_small_disk(m.data_dir)
            mounted.append(m.data_dir)
            (m.data_dir / "myid").write_text(f"{m.id}\n")
        ens.start()
        yield ens
    finally:
        ens.close()
        for path in mounted:
            unmount(path)


def fill(path, leave=0):
    """Takes all free space of path's file system but `leave` bytes."""
    st = os.statvfs(path.parent)
    free = st.f_bavail * st.f_frsize - leave
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.posix_fallocate(fd, 0, free)
    finally:
        os.close(fd)


def test_a_full_disk_refuses_writes_serves_reads_and_recovers(small_disk, kazoo_factory):
    s = small_disk.start()
    c = kazoo_factory(s)
    c.create("/kept", b"before")
    c.create("/d")
    filler = s.data_dir / "filler"
    fill(filler)

    # The reserved segment still takes writes; the first write past it
    # finds the disk full and waits in the log. Its session's later
    # requests, pings included, queue behind it (as in ZooKeeper), so its
    # client may lose the connection meanwhile: another client checks.
    writer = kazoo_factory(s)
    acked, caught = [], None
    for i in range(200):
        path = f"/d/n{i:03d}"
        try:
            acked.append(writer.create_async(path, VALUE).get(timeout=5))
        except KazooTimeoutError:
            caught = path
            break
    assert caught is not None, "200 writes of 900 KB fit in one 64 MB segment"
    with pytest.raises(NotReadOnlyCallError):
        c.set("/kept", b"while full")
    with pytest.raises(NotReadOnlyCallError):
        c.create("/d/refused")
    assert s.four_letter("isro") == "ro"

    # Reads go on, and the refused writes did nothing.
    assert c.get("/kept")[0] == b"before"
    assert sorted(c.get_children("/d")) == [p.rsplit("/", 1)[1] for p in acked]
    log = s.log_path.read_text(errors="replace")
    assert "the disk is full" in log and "free space" in log, s.stderr_tail()

    # Space is back: the caught write completes, writes are accepted again.
    filler.unlink()
    deadline = time.monotonic() + 15
    while s.four_letter("isro") != "rw":
        assert time.monotonic() < deadline, "still read-only after space was freed"
        time.sleep(0.05)
    c.set("/kept", b"after")
    c.create("/d/later", b"x")
    assert c.exists(caught) is not None, "the write caught by the full disk was lost"
    assert "disk space is back" in s.log_path.read_text(errors="replace")

    # Everything acknowledged survives a restart.
    c.stop()
    writer.stop()
    s.restart(kill=True)
    c = kazoo_factory(s)
    assert c.get("/kept")[0] == b"after"
    children = set(c.get_children("/d"))
    for p in acked + [caught, "/d/later"]:
        assert p.rsplit("/", 1)[1] in children, p


def test_a_follower_whose_disk_fills_refuses_writes_and_catches_up(small_disks):
    """The ensemble writes on through the servers with room; the full one
    refuses its clients' writes, answers their reads from what it has, and
    catches up once space is freed."""
    ens = small_disks
    leader = ens.leader()
    full = ens.followers()[0]
    writer = ens.client(leader)
    local = ens.client(full)
    writer.create("/d")
    local.sync("/d")
    filler = full.data_dir / "filler"
    fill(filler)

    # Every server fills its first segment alike; only `full` cannot
    # reserve the next one.
    acked = []
    for i in range(100):
        acked.append(writer.create(f"/d/n{i:03d}", VALUE))
        if full.four_letter("isro") == "ro":
            break
    assert full.four_letter("isro") == "ro", "the follower's disk never filled"
    for i in range(5):
        acked.append(writer.create(f"/d/more{i}", b"x"))
    with pytest.raises(NotReadOnlyCallError):
        local.create("/d/refused")
    assert local.exists("/d") is not None
    assert "the disk is full" in full.log_path.read_text(errors="replace")

    filler.unlink()
    wait_for(lambda: full.four_letter("isro") == "rw", timeout=15,
             what="the follower to leave read-only mode")
    local.sync("/d")
    assert set(local.get_children("/d")) == {p.rsplit("/", 1)[1] for p in acked}
    local.create("/d/after")
    ens.assert_trees_identical()
