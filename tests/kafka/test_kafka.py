"""Apache Kafka 3.9 in ZooKeeper mode on the server under test.

Two brokers use the server (PADDOCK_TEST_SERVER=paddock|zookeeper) under
the chroot /kafka, once on a standalone server and once on a 3-server
ensemble; the brokers and servers of a topology are shared by its tests,
which run in order (the last deletes every topic). Each test starts by
restarting whatever an earlier failure left down.

What ZooKeeper does for Kafka here: broker registration (ephemeral
/brokers/ids/N), controller election (ephemeral /controller), topic and
partition state (/brokers/topics), config changes (/config, sequential
/config/changes), producer id blocks (/latest_producer_id_block, which
every idempotent or transactional producer needs) and topic deletion
(/admin/delete_topics).
"""

from __future__ import annotations

import collections
import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kafkaharness import KIND, SESSION_TIMEOUT_MS, Cluster, log, wait_for  # noqa: E402

INTERNAL_TOPICS = {"__consumer_offsets", "__transaction_state"}


@pytest.fixture(scope="module", params=["standalone", "ensemble"])
def cluster(request, tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp(f"kafka-{request.param}-{KIND}"), request.param)
    try:
        c.start()
    except BaseException:
        c.close()
        raise
    yield c
    c.close()


@pytest.fixture
def kafka(cluster):
    cluster.heal()
    return cluster


# ------------------------------------------------------------ helpers

def parse_describe(out: str):
    """KafkaTool describe output -> {topic: {"partitions": {p: (leader,
    replicas, isr)}, "config": {key: (value, source)}}}."""
    topics = collections.defaultdict(lambda: {"partitions": {}, "config": {}})
    for line in out.splitlines():
        f = line.split(" ")
        if f[0] == "partition":
            kv = dict(x.split("=", 1) for x in f[3:])
            ids = lambda s: sorted(int(i) for i in s.split(",") if i)  # noqa: E731
            topics[f[1]]["partitions"][int(f[2])] = (kv["leader"], ids(kv["replicas"]),
                                                     ids(kv["isr"]))
        elif f[0] == "config":
            key, value = f[2].split("=", 1)
            topics[f[1]]["config"][key] = (value, f[3].split("=", 1)[1])
    return topics


def read_ids(path) -> list:
    """The complete lines of a file KafkaTool writes (a last line still
    being written is left out)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    return text.split("\n")[:-1]


def count_lines(path) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


class BackgroundProducer:
    """KafkaTool produce at a steady rate until stopped, logging the ids
    of acknowledged records to a file."""

    def __init__(self, kafka: Cluster, topic: str, prefix: str, rate: int = 2000) -> None:
        self.kafka = kafka
        self.acked_path = kafka.workdir / f"{prefix}.acked"
        self.stop_path = kafka.workdir / f"{prefix}.stop"
        self.proc = kafka.spawn_tool("produce", topic, "--prefix", prefix,
                                     "--rate", str(rate), "--stop-file", str(self.stop_path),
                                     "--acked", str(self.acked_path), timeout=300)

    def acked(self) -> int:
        return count_lines(self.acked_path)

    def detail(self) -> str:
        err = Path(self.proc.err_path).read_text(errors="replace")[-3000:]
        state = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
        return (f"--- producer ({state}, {self.acked()} acked) stderr ---\n{err}\n"
                + self.kafka.logs())

    def wait_acked(self, n: int, timeout: float, what: str) -> None:
        wait_for(lambda: self.acked() >= n, timeout,
                 f"{n} acknowledged records ({what})", self.detail, interval=0.2)

    def stop(self, timeout: float = 90) -> str:
        self.stop_path.touch()
        try:
            self.proc.wait(timeout)
        except Exception:
            self.proc.kill()
            raise AssertionError(f"the producer did not stop within {timeout}s\n{self.detail()}")
        out = Path(self.proc.out_path).read_text()
        log(f"producer: {out.strip()}")
        # Records whose outcome is unknown (failed) may or may not be
        # written; acknowledged ones must all be.
        assert self.proc.returncode in (0, 2), \
            f"producer exited {self.proc.returncode}: {out}\n{self.detail()}"
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def assert_all_acked_consumed(kafka: Cluster, topic: str, producer: BackgroundProducer) -> None:
    acked = read_ids(producer.acked_path)
    out = kafka.workdir / f"{topic}.consumed"
    kafka.tool("consume", topic, "--out", str(out), timeout=120)
    consumed = read_ids(out)
    lost = set(acked) - set(consumed)
    assert not lost, (f"{len(lost)} of {len(acked)} acknowledged records were not "
                      f"consumed back, e.g. {sorted(lost)[:10]}\n{kafka.logs()}")
    dups = [i for i, n in collections.Counter(consumed).items() if n > 1]
    assert not dups, (f"{len(dups)} records consumed more than once from an "
                      f"idempotent producer, e.g. {dups[:10]}")
    log(f"{topic}: {len(acked)} acknowledged, {len(consumed)} consumed, none lost")


def ephemeral_owners(kafka: Cluster) -> dict:
    owners = {}
    for bid in (1, 2):
        node = kafka.znode(f"/brokers/ids/{bid}")
        owners[bid] = node[1].ephemeralOwner if node else None
    return owners


# ------------------------------------------------------------ scenarios

def test_1_topics_admin(kafka):
    """Create topics, alter a topic's config, describe them (Admin API),
    and find each step in ZooKeeper under the chroot."""
    kafka.create_topics("orders:6:2", "events:3:2")

    roots = kafka.zk.get_children("/")
    assert "kafka" in roots and "brokers" not in roots, \
        f"Kafka must keep to its chroot /kafka; / holds {sorted(roots)}"
    for topic, partitions in (("orders", 6), ("events", 3)):
        data, _ = kafka.znode(f"/brokers/topics/{topic}")
        assignment = json.loads(data)["partitions"]
        assert sorted(int(p) for p in assignment) == list(range(partitions)), assignment
        assert all(sorted(r) == [1, 2] for r in assignment.values()), assignment
        assert kafka.children(f"/brokers/topics/{topic}/partitions") == \
            sorted(str(p) for p in range(partitions))

    changes_before = kafka.children("/config/changes")
    kafka.tool("alter-config", "orders", "retention.ms=3600000", "max.message.bytes=2000000")
    data, _ = kafka.znode("/config/topics/orders")
    assert json.loads(data)["config"] == {"retention.ms": "3600000",
                                          "max.message.bytes": "2000000"}, data
    new_changes = sorted(set(kafka.children("/config/changes")) - set(changes_before))
    assert new_changes and all(c.startswith("config_change_") and c[-10:].isdigit()
                               for c in new_changes), \
        f"a sequential /config/changes/config_change_N per alteration: {new_changes}"

    # Brokers apply the change through their watch on /config/changes.
    for b in kafka.brokers:
        wait_for(lambda: b.log_lines(r"Processing override for entityPath: topics/orders"
                                     r" with config: .*retention.ms -> 3600000"),
                 30, f"broker {b.id} to apply the new config of topic orders", kafka.logs)

    desc = parse_describe(kafka.tool("describe", "orders", "events").stdout)
    for topic, partitions in (("orders", 6), ("events", 3)):
        parts = desc[topic]["partitions"]
        assert sorted(parts) == list(range(partitions)), desc[topic]
        for p, (leader, replicas, isr) in parts.items():
            assert replicas == [1, 2] and isr == [1, 2] and leader in ("1", "2"), \
                f"{topic}-{p}: leader={leader} replicas={replicas} isr={isr}"
    assert desc["orders"]["config"]["retention.ms"] == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    assert desc["orders"]["config"]["max.message.bytes"] == ("2000000", "DYNAMIC_TOPIC_CONFIG")
    assert "retention.ms" not in desc["events"]["config"]

    listed = kafka.tool("list-topics").stdout.split()
    assert {"orders", "events"} <= set(listed), listed
    cluster_line = kafka.tool("cluster").stdout.strip()
    assert cluster_line == f"controller={kafka.controller()} nodes=1,2", \
        f"{cluster_line!r} vs /controller={kafka.controller()}"


def test_2_produce_consume_100k(kafka):
    """100,000 records of 200 bytes from the default producer (idempotent,
    acks=all), every one consumed back by a consumer group."""
    n = 100_000
    kafka.create_topics("bulk:6:2")
    p = kafka.tool("produce", "bulk", "--prefix", "bulk", "--count", str(n), "--size", "200",
                   timeout=90)
    assert f"sent={n} acked={n} failed=0" in p.stdout, p.stdout

    out = kafka.workdir / "bulk.consumed"
    p = kafka.tool("consume", "bulk", "--out", str(out), "--group", "bulk-readers", "--size", "200",
                   timeout=90)
    assert p.stdout.strip().startswith(f"consumed={n} bad=0"), p.stdout
    consumed = read_ids(out)
    assert len(consumed) == n and set(consumed) == {f"bulk-{i}" for i in range(n)}, \
        f"{len(consumed)} consumed, {len(set(consumed))} distinct"

    # What ZooKeeper holds for this: the producer id block the brokers took
    # (ZooKeeper-mode Kafka allocates producer ids there) and the group's
    # offsets topic.
    data, _ = kafka.znode("/latest_producer_id_block")
    block = json.loads(data)
    assert int(block["broker"]) in (1, 2) and \
        int(block["block_end"]) > int(block["block_start"]) >= 0, block
    data, _ = kafka.znode("/brokers/topics/__consumer_offsets")
    assert all(sorted(r) == [1, 2] for r in json.loads(data)["partitions"].values()), data


def test_3_transactions(kafka):
    """One committed and one aborted transaction: read_committed sees
    exactly the committed records, read_uncommitted both."""
    n = 500
    kafka.create_topics("payments:3:2")
    kafka.tool("txn", "payments", "--prefix", "pay", "--count", str(n),
               "--transactional-id", f"payments-{kafka.topology}", timeout=90)
    committed = {f"pay-commit-{i}" for i in range(n)}
    aborted = {f"pay-abort-{i}" for i in range(n)}

    out = kafka.workdir / "payments.committed"
    kafka.tool("consume", "payments", "--out", str(out), "--isolation", "read_committed")
    seen = read_ids(out)
    assert len(seen) == n and set(seen) == committed, \
        (f"read_committed saw {len(seen)} records: {len(set(seen) & committed)} committed, "
         f"{len(set(seen) & aborted)} aborted")

    out = kafka.workdir / "payments.all"
    kafka.tool("consume", "payments", "--out", str(out), "--isolation", "read_uncommitted")
    seen = read_ids(out)
    assert sorted(seen) == sorted(committed | aborted), \
        f"read_uncommitted saw {len(seen)} records, expected {2 * n}"
    assert kafka.znode("/brokers/topics/__transaction_state") is not None


def test_4_controller_failover(kafka):
    """SIGKILL the controller broker while producing: once its session
    expires the other broker becomes controller and production resumes;
    every acknowledged record is consumed back."""
    kafka.create_topics("failover:4:2")
    producer = BackgroundProducer(kafka, "failover", "failover")
    try:
        producer.wait_acked(500, 45, "production before the controller is killed")
        old = kafka.controller()
        assert old in (1, 2), f"/controller names broker {old}"
        other = 3 - old
        log(f"killing broker {old}, the controller")
        kafka.broker(old).kill()
        t_kill = time.monotonic()
        wait_for(lambda: kafka.controller() == other, 30,
                 lambda: f"broker {other} to become controller in /controller after broker "
                         f"{old} was killed (controller now: {kafka.controller()})", kafka.logs)
        log(f"broker {other} is controller {time.monotonic() - t_kill:.1f}s after the kill")
        assert old not in kafka.registered(), \
            f"broker {old}'s registration outlived its session: {kafka.registered()}"
        at_failover = producer.acked()
        producer.wait_acked(at_failover + 1000, 60,
                            f"production to resume on broker {other} alone")
        log(f"production resumed {time.monotonic() - t_kill:.1f}s after the kill")

        kafka.broker(old).start().wait_started()
        kafka.wait_registered([1, 2])
        assert kafka.controller() == other
        producer.wait_acked(producer.acked() + 500, 60,
                            f"production with broker {old} back")
        producer.stop()
    finally:
        producer.kill()
    assert_all_acked_consumed(kafka, "failover", producer)


@pytest.mark.parametrize("cluster", ["ensemble"], indirect=True)
def test_5_server_leader_failover(kafka):
    """SIGKILL the leader of the ensemble while producing: the brokers'
    sessions survive (their /brokers/ids znodes keep their ephemeralOwner),
    production resumes, and every acknowledged record is consumed back."""
    kafka.create_topics("zkfail:4:2")
    owners = ephemeral_owners(kafka)
    controller = kafka.controller()
    producer = BackgroundProducer(kafka, "zkfail", "zkfail")
    try:
        producer.wait_acked(500, 45, "production before the leader is killed")
        leader = kafka.ensemble.leader()
        log(f"killing {leader.name}, the {KIND} leader")
        leader.kill()
        t_kill = time.monotonic()
        new = kafka.ensemble.leader(timeout=30)
        log(f"{new.name} leads {time.monotonic() - t_kill:.1f}s after the kill")
        at_kill = producer.acked()
        producer.wait_acked(at_kill + 1000, 60, f"production to resume after {leader.name}, "
                            f"the leader, was killed")
        # Past the session timeout, a session that was lost would have
        # expired: the brokers would have registered again (new owners).
        time.sleep(max(0.0, t_kill + SESSION_TIMEOUT_MS / 1000 + 2 - time.monotonic()))
        after = ephemeral_owners(kafka)
        assert after == owners, (
            "a broker lost its session when the leader died: ephemeralOwner of "
            f"/brokers/ids/N before {({k: hex(v or 0) for k, v in owners.items()})}, "
            f"after {({k: hex(v or 0) for k, v in after.items()})}\n{kafka.logs()}")
        assert kafka.controller() == controller, \
            f"the controller moved from {controller} to {kafka.controller()}"

        leader.restart()
        producer.wait_acked(producer.acked() + 500, 60,
                            f"production with {leader.name} back")
        producer.stop()
    finally:
        producer.kill()
    assert_all_acked_consumed(kafka, "zkfail", producer)


def test_6_restart_brokers_delete_topics(kafka):
    """Stop both brokers cleanly (their registrations go with their
    sessions), start them again (back, in new sessions), then delete every
    topic: gone from /brokers/topics and from the Admin listing."""
    owners = ephemeral_owners(kafka)
    for b in kafka.brokers:
        b.stop()
        # A clean shutdown closes the session: the znode goes at once, not
        # after the session timeout.
        wait_for(lambda: b.id not in kafka.registered(), SESSION_TIMEOUT_MS / 1000 - 2,
                 lambda: f"/brokers/ids/{b.id} to go when broker {b.id} closed its session "
                         f"(registered: {kafka.registered()})", kafka.logs)
    assert kafka.registered() == []
    wait_for(lambda: kafka.controller() is None, SESSION_TIMEOUT_MS / 1000 - 2,
             "/controller to go with the last broker's session", kafka.logs)

    for b in kafka.brokers:
        b.start()
    for b in kafka.brokers:
        b.wait_started()
    kafka.wait_registered([1, 2])
    renewed = ephemeral_owners(kafka)
    assert all(renewed[i] != owners[i] for i in (1, 2)), \
        f"new sessions after a restart: owners before {owners}, after {renewed}"
    wait_for(lambda: kafka.controller() in (1, 2), 30, "a controller after the restart",
             kafka.logs)

    listed = set(kafka.tool("list-topics").stdout.split())
    assert set(kafka.topics) <= listed, \
        f"topics lost across the restart: {set(kafka.topics) - listed}"
    kafka.tool("delete-topics", *sorted(listed))

    def gone():
        left = set(kafka.children("/brokers/topics")) - INTERNAL_TOPICS
        pending = kafka.children("/admin/delete_topics")
        return not left and not pending
    wait_for(gone, 60, lambda: "/brokers/topics to hold only internal topics and "
             f"/admin/delete_topics to empty (topics: {kafka.children('/brokers/topics')}, "
             f"pending: {kafka.children('/admin/delete_topics')})", kafka.logs)
    listed = kafka.tool("list-topics").stdout.split()
    assert listed == [], f"deleted topics still listed: {listed}"
