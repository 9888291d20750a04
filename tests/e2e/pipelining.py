"""A session's writes and reads sent back to back, in one socket write,
and what ZooKeeper promises of them: replies in order, every read showing
the session's writes before it and none after it, a watch event after the
read that set it and before the reply of the write that fired it."""

import time

from zkwire import EventType, Op, Writer, path_watch_body, request_header


def set_body(path: str, value: bytes) -> bytes:
    return Writer().string(path).buffer(value).int(-1).bytes()


def check_reads_between_writes(c, path: str, rounds: int = 60) -> None:
    """`path` exists. Each round sets it, reads it (every fifth read with a
    watch), checks it exists, and every third round sets it again with no
    read between; the next round's set then fires the watch."""
    requests, expected = [], []
    latest = None
    for i in range(rounds):
        latest = b"v%d" % i
        requests.append((Op.setData, set_body(path, latest)))
        expected.append(("set", latest))
        watch = i % 5 == 0
        requests.append((Op.getData, path_watch_body(path, watch=watch)))
        expected.append(("get-watch" if watch else "get", latest))
        requests.append((Op.exists, path_watch_body(path)))
        expected.append(("exists", latest))
        if i % 3 == 2:
            latest = b"w%d" % i
            requests.append((Op.setData, set_body(path, latest)))
            expected.append(("set", latest))
    xids = c.submit_requests(requests)
    replies = [c.wait_reply(x, timeout=30) for x in xids]

    last_set_mzxid = 0
    for (kind, value), xid, reply in zip(expected, xids, replies):
        assert reply.err == 0, (kind, xid, reply.err)
        r = reply.reader()
        if kind == "set":
            stat = r.stat()
            assert stat.mzxid > last_set_mzxid
            last_set_mzxid = stat.mzxid
            continue
        if kind.startswith("get"):
            assert r.buffer() == value, (kind, xid, "saw another write than the latest before it")
        stat = r.stat()
        assert stat.mzxid == last_set_mzxid, (kind, xid, "not the latest write before it")

    order = [(kind, f.xid if kind == "reply" else f) for kind, f in c.frames]
    replies_seen = [x for kind, x in order if kind == "reply"]
    assert replies_seen == sorted(replies_seen), "replies out of order"
    position = {x: i for i, (kind, x) in enumerate(order) if kind == "reply"}
    events = [i for i, (kind, e) in enumerate(order)
              if kind == "event" and e.path == path and e.type == EventType.NodeDataChanged]
    watched = [j for j, (kind, _) in enumerate(expected) if kind == "get-watch"]
    assert len(events) == len(watched), (events, watched)
    for event_at, j in zip(events, watched):
        firing = next(k for k in range(j + 1, len(expected)) if expected[k][0] == "set")
        assert position[xids[j]] < event_at < position[xids[firing]], \
            "the event must come after the read that set its watch and before the reply of the write that fired it"


def check_listings_between_creates(c, parent: str, children: int = 30) -> None:
    """`parent` exists and is empty. Creates its children one by one, each
    followed by getChildren, getChildren2 and getAllChildrenNumber sent
    with it: each listing shows exactly the children created before it."""
    from zkwire import create_body
    requests = []
    for i in range(children):
        requests.append((Op.create, create_body(f"{parent}/c{i:03d}")))
        requests.append((Op.getChildren, path_watch_body(parent)))
        requests.append((Op.getChildren2, path_watch_body(parent)))
        requests.append((Op.getAllChildrenNumber, Writer().string(parent).bytes()))
    xids = c.submit_requests(requests)
    replies = [c.wait_reply(x, timeout=30) for x in xids]
    for i in range(children):
        created, listed, listed2, counted = replies[4 * i:4 * i + 4]
        expected = [f"c{j:03d}" for j in range(i + 1)]
        assert created.err == 0 and listed.err == 0 and listed2.err == 0 and counted.err == 0
        assert sorted(listed.reader().strings()) == expected
        r = listed2.reader()
        assert sorted(r.strings()) == expected
        assert r.stat().numChildren == i + 1
        assert counted.reader().int() == i + 1


def check_watches_of_a_closed_connection_are_dropped(connect, resume, path: str, version,
                                                     watch_count, attempts: int = 5) -> None:
    """A new session (`connect()`) sets `path` and reads it with a watch,
    1,000 times back to back in one socket write, then at once resumes
    the session on a new connection (`resume(c)`), which closes the first
    while many reads still wait behind their writes. Those are answered
    after the connection is gone, or never (what the first connection had
    not read yet is dropped with it); none may leave its watch behind
    (ZooKeeper's WatchManager ignores a watch whose connection is stale).
    Several `attempts`, as the writes may all be applied before the
    session moves. `version()` is the node's version as another client
    reads it, `watch_count()` the server's count of watches."""
    for _ in range(attempts):
        c = connect()
        c.submit_requests([request
                           for i in range(1000)
                           for request in ((Op.setData, set_body(path, b"v%d" % i)),
                                           (Op.getData, path_watch_body(path, watch=True)))])
        resumed = resume(c)
        seen, deadline = None, time.monotonic() + 10
        while time.monotonic() < deadline:
            now = version()
            if now == seen:
                break  # no write applied for a fifth of a second: all are
            seen = now
            time.sleep(0.2)
        # The closed connection's watches go once its writer has stopped.
        while watch_count() != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert watch_count() == 0, "a watch outlived its connection"
        resumed.close()


def check_writes_sent_apart_keep_their_order(clients, paths, rounds: int = 1000) -> None:
    """Each of `paths` exists at version 0, and each of `clients` writes
    its own, all at once. Each round sends two setData, each expecting the
    version the one before it leaves, in two socket writes a few
    microseconds apart: the first may be all the server has read when it
    schedules it, and the second arrive while the first is not yet
    proposed. Every other round, a sync and a read go before the first
    write in its socket write, so that the first write waits for the read
    and the second may arrive just as it is answered. Both writes must
    succeed, in the order sent, every round. The gap sweeps 0 to 100
    microseconds, as where the window falls depends on the server's build
    and load, which the other sessions keep up."""
    import threading
    failures = []

    def write(c, path):
        try:
            for i in range(rounds):
                before = []
                if i % 2:
                    before = [(Op.sync, Writer().string(path).bytes()),
                              (Op.getData, path_watch_body(path))]
                xids = c.submit_requests(
                    before + [(Op.setData, versioned_set_body(path, 2 * i))])
                second = c.next_xid()
                until = time.perf_counter_ns() + i % 500 * 200
                while time.perf_counter_ns() < until:
                    pass
                c.send(request_header(second, Op.setData) + versioned_set_body(path, 2 * i + 1))
                for xid in xids + [second]:
                    err = c.wait_reply(xid, timeout=30).err
                    if err != 0:
                        failures.append((path, i, xid, err))
                        return
        except Exception as error:  # noqa: BLE001 - reported below
            failures.append((path, repr(error)))

    threads = [threading.Thread(target=write, args=pair) for pair in zip(clients, paths)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, ("a later write was applied first", failures)


def versioned_set_body(path: str, version: int) -> bytes:
    return Writer().string(path).buffer(b"v%d" % version).int(version).bytes()
