"""Prometheus metrics (`metricsProvider.*` keys): the /metrics page with
ZooKeeper's names and types, checked against a real ZooKeeper's page, and
scraped from a running ensemble by a real Prometheus server."""

import json
import shutil
import subprocess
import urllib.parse
import urllib.request

import pytest
from kazoo.exceptions import QuotaExceededError

from ensemble import Ensemble, wait_for
from zkharness import HOST, KIND, PROMETHEUS_PROVIDER, free_port


def metrics_config(port):
    return {"metricsProvider.className": PROMETHEUS_PROVIDER,
            "metricsProvider.httpHost": HOST,
            "metricsProvider.httpPort": str(port)}


def scrape(port):
    """(content type, {family: type}, {sample name without labels: value})."""
    url = f"http://{HOST}:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        content_type = reply.headers.get("Content-Type")
        text = reply.read().decode()
    families, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            families[name] = kind
        elif line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            if "{" not in name:
                samples[name] = float(value)
    return content_type, families, samples


def metrics_server(server_factory, kind=KIND, extra=None):
    port = free_port()
    server = server_factory({**metrics_config(port), **(extra or {})}, kind=kind)
    server.metrics_port = port
    return server


# What ZooKeeper dashboards read first, with ZooKeeper's types.
ZOOKEEPER_FAMILIES = {
    "znode_count": "gauge", "watch_count": "gauge", "ephemerals_count": "gauge",
    "approximate_data_size": "gauge", "num_alive_connections": "gauge",
    "outstanding_requests": "gauge", "avg_latency": "gauge", "max_latency": "gauge",
    "min_latency": "gauge", "packets_received": "gauge", "packets_sent": "gauge",
    "global_sessions": "gauge", "open_file_descriptor_count": "gauge",
    "max_file_descriptor_count": "gauge", "uptime": "gauge",
    "process_cpu_seconds_total": "counter", "process_resident_memory_bytes": "gauge",
    "readlatency": "summary", "updatelatency": "summary", "fsynctime": "summary",
    "snapshottime": "summary",
}


def test_the_page_has_zookeeper_s_families_and_follows_the_tree(server_factory,
                                                                kazoo_factory):
    server = metrics_server(server_factory)
    content_type, families, before = scrape(server.metrics_port)
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    for name, kind in ZOOKEEPER_FAMILIES.items():
        assert families.get(name) == kind, name
    zk = kazoo_factory(server)
    zk.create("/metrics-test", b"12345")
    zk.create("/metrics-test/a", b"")
    zk.create("/metrics-test/eph", b"", ephemeral=True)
    zk.exists("/metrics-test", watch=lambda event: None)
    _, _, after = scrape(server.metrics_port)
    assert after["znode_count"] == before["znode_count"] + 3
    assert after["ephemerals_count"] == before["ephemerals_count"] + 1
    assert after["watch_count"] == before["watch_count"] + 1
    assert after["num_alive_connections"] >= 1
    assert after["global_sessions"] >= 1
    assert after["packets_received"] > before["packets_received"]
    assert after["updatelatency_count"] >= before["updatelatency_count"] + 3
    assert after["readlatency_count"] >= before["readlatency_count"] + 1
    assert after["fsynctime_count"] > before["fsynctime_count"]


def quota_lines(port):
    """The samples of ZooKeeper's per-namespace quota families."""
    url = f"http://{HOST}:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    return sorted(line for line in text.splitlines() if line.startswith("quota_"))


def fill_quotas(server, kazoo_factory):
    """Two quotas in one namespace and one in another, as zkCli writes
    them, and one create refused by a hard limit."""
    zk = kazoo_factory(server)
    limits = {"/ns1/a": b"count=10,bytes=-1=;byteHardLimit=-1;countHardLimit=-1",
              "/ns1/b": b"count=-1,bytes=-1=;byteHardLimit=100;countHardLimit=1",
              "/ns2": b"count=-1,bytes=50=;byteHardLimit=-1;countHardLimit=-1"}
    for path, data in limits.items():
        zk.ensure_path(path)
        zk.create(f"/zookeeper/quota{path}/zookeeper_limits", data, makepath=True)
        zk.create(f"/zookeeper/quota{path}/zookeeper_stats", b"count=0,bytes=0")
    zk.create("/ns1/a/x", b"12345")
    with pytest.raises(QuotaExceededError):
        zk.create("/ns1/b/x", b"")


@pytest.mark.paddock_only("compares Paddock's page with a ZooKeeper started beside it")
def test_every_zookeeper_name_paddock_exports_is_zookeeper_s_with_its_type(
        server_factory, kazoo_factory):
    enforce = {"zookeeper.enforceQuota": "true"}
    paddock = metrics_server(server_factory, extra=enforce)
    zookeeper = metrics_server(server_factory, kind="zookeeper", extra=enforce)
    for server in (paddock, zookeeper):
        fill_quotas(server, kazoo_factory)
    ours_quota, theirs_quota = quota_lines(paddock.metrics_port), quota_lines(
        zookeeper.metrics_port)
    assert len(ours_quota) == 9
    assert ours_quota == theirs_quota
    _, ours, _ = scrape(paddock.metrics_port)
    _, theirs, _ = scrape(zookeeper.metrics_port)
    shared = {name: kind for name, kind in ours.items() if not name.startswith("paddock_")}
    assert set(ZOOKEEPER_FAMILIES) <= set(shared)
    wrong = {name: (kind, theirs.get(name)) for name, kind in shared.items()
             if theirs.get(name) != kind}
    assert wrong == {}, "families named as ZooKeeper's but not exported by it so"


@pytest.mark.paddock_only("ensembles are Paddock's (tests/e2e/ensemble.py)")
def test_a_real_prometheus_scrapes_every_server_of_an_ensemble(tmp_path):
    prometheus = shutil.which("prometheus")
    assert prometheus, "Prometheus is not installed: apt-get install prometheus"
    with Ensemble(tmp_path / "ensemble", voters=3) as ens:
        for member in ens.members:
            member.metrics_port = free_port()
            member.extra_config = metrics_config(member.metrics_port)
        ens.start()
        leader = ens.leader()
        zk = ens.client(leader)
        zk.create("/scraped", b"")
        for i in range(10):
            zk.create(f"/scraped/n{i}", b"x" * 10)
        targets = [f"{HOST}:{m.metrics_port}" for m in ens.members]
        with running_prometheus(prometheus, tmp_path / "prometheus", targets) as query:
            wait_for(lambda: sorted(query("up")) == [1.0, 1.0, 1.0], 60,
                     what="Prometheus to scrape all three servers")
            counts = wait_for(lambda: agreed(query("znode_count")), 30,
                              what="the same znode_count from every server")
            assert counts[0] >= 11
            leaders = query("paddock_raft_leader_id")
            assert leaders == [float(leader.id)] * 3
            assert query("synced_followers") == [2.0]
            writes = query('sum(paddock_request_duration_seconds_count{kind="update"})')
            assert writes and writes[0] >= 11
            p99 = query("histogram_quantile(0.99, sum by (le) "
                        "(paddock_log_sync_duration_seconds_bucket))")
            assert p99 and 0 < p99[0] < 10


def agreed(values):
    """The three servers' values when they are all equal, else None."""
    return values if len(values) == 3 and len(set(values)) == 1 else None


class running_prometheus:
    """A Prometheus server scraping `targets` every second; yields a query
    function returning the values of an instant query."""

    def __init__(self, binary, workdir, targets):
        self.binary, self.workdir, self.targets = binary, workdir, targets
        self.port = free_port()

    def __enter__(self):
        self.workdir.mkdir(parents=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: paddock\n    static_configs:\n"
            f"      - targets: {json.dumps(self.targets)}\n")
        self.log = open(self.workdir / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [self.binary, f"--config.file={config}",
             f"--storage.tsdb.path={self.workdir / 'data'}",
             f"--web.listen-address={HOST}:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        return self.query

    def query(self, expression):
        url = (f"http://{HOST}:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": expression}))
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                answer = json.load(reply)
        except OSError:
            return []
        return [float(r["value"][1]) for r in answer["data"]["result"]]

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
