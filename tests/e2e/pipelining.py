"""A session's writes and reads sent back to back, in one socket write,
and what ZooKeeper promises of them: replies in order, every read showing
the session's writes before it and none after it, a watch event after the
read that set it and before the reply of the write that fired it."""

from zkwire import EventType, Op, Writer, path_watch_body


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
