"""`paddock bench`: every workload completes against a running server
(Paddock, or Apache ZooKeeper with PADDOCK_TEST_SERVER=zookeeper) and
writes its results as JSON. Tiny sizes: this checks the tool, not the
numbers (bench/compare measures; CI runs it in --quick form)."""

import json
import os
import re
import subprocess

import pytest

from zkharness import KIND, paddock_bin

TINY = {
    "mix": ["--sessions", "2", "--outstanding", "2", "--znodes", "20",
            "--read-ratios", "0,1", "--seconds", "0.5", "--warmup", "0.2"],
    "latency": ["--ops", "20"],
    "crud": ["--clients", "3", "--znodes", "10", "--value-sizes", "100,1000"],
    "barrier": ["--clients", "3", "--barriers", "3"],
    "watch": ["--clients", "10", "--rounds", "2"],
    "treesize": ["--sizes", "0,500", "--sessions", "2", "--outstanding", "2",
                 "--seconds", "0.5"],
    "statesize": ["--megabytes", "2", "--value-size", "1000",
                  "--step-megabytes", "1"],
    "rate": ["--rate", "200", "--sessions", "2", "--znodes", "20",
             "--read-ratios", "0,1", "--seconds", "0.5", "--warmup", "0.2"],
    "children": ["--children", "100", "--sessions", "2", "--outstanding", "4",
                 "--page", "7"],
    "session-storm": ["--sessions", "50"],
    "rebalance": ["--clients", "20", "--storage-nodes", "2", "--partitions", "8",
                  "--step-interval-ms", "20", "--warmup", "0.5"],
}


def bench(*args, timeout=120):
    if not paddock_bin().exists():
        pytest.skip(f"{paddock_bin()} is not built")
    return subprocess.run([str(paddock_bin()), "bench", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("workload", sorted(TINY))
def test_workload_completes_and_writes_json(server, tmp_path, workload):
    out = tmp_path / f"{workload}.json"
    run = bench(workload, "--target", server.hosts, "--json", str(out),
                *TINY[workload])
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert result["workload"] == workload
    assert result["command"].startswith(f"paddock bench {workload} --target ")
    assert result["rows"], result
    # the table on stdout names every row
    for row in result["rows"]:
        assert row["label"] in run.stdout


def test_mix_reports_one_row_per_read_ratio(server, tmp_path):
    out = tmp_path / "mix.json"
    run = bench("mix", "--target", server.hosts, "--json", str(out),
                *TINY["mix"])
    assert run.returncode == 0, run.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [r["x"] for r in rows] == [0.0, 1.0]
    assert all(r["metrics"]["ops_per_sec"] > 0 for r in rows)
    # without the server's PID its CPU is unknown, and not guessed
    assert all("cpu_us_per_op" not in r["metrics"] for r in rows)


def test_cpu_per_request_is_the_servers_own(server, tmp_path):
    """Given the server's PID, every row of a load reports the server's
    CPU time per request, read from /proc/PID/stat."""
    out = tmp_path / "mix.json"
    run = bench("mix", "--target", server.hosts, "--pid", str(server.proc.pid),
                "--json", str(out), *TINY["mix"])
    assert run.returncode == 0, run.stderr
    rows = json.loads(out.read_text())["rows"]
    for row in rows:
        cpu = row["metrics"]["cpu_us_per_op"]
        # more than nothing, and no more than every core of the machine
        assert 0 < cpu < os.cpu_count() * 1e6 / row["metrics"]["ops_per_sec"], row


def test_rate_offers_the_load_it_is_given(server, tmp_path):
    """Open loop: the requests answered per second follow the offered
    rate, not the server's speed."""
    out = tmp_path / "rate.json"
    run = bench("rate", "--target", server.hosts, "--json", str(out),
                "--rate", "400", "--sessions", "4", "--znodes", "20",
                "--read-ratios", "1", "--seconds", "2", "--warmup", "0.5")
    assert run.returncode == 0, run.stderr
    [row] = json.loads(out.read_text())["rows"]
    assert 300 <= row["metrics"]["ops_per_sec"] <= 440, row


def test_rebalance_finishes_the_plan_exactly_once_after_a_kill(server, tmp_path):
    """The rebalancer is SIGKILLed after half the plan; the standby is
    elected once its session expires and finishes. The run itself fails
    unless every move happened exactly once."""
    out = tmp_path / "rebalance.json"
    run = bench("rebalance", "--target", server.hosts, "--json", str(out),
                *TINY["rebalance"])
    assert run.returncode == 0, run.stderr
    killed = re.search(r"killing rebalancer (\d) after move 2\n", run.stderr)
    assert killed, run.stderr
    standby = 1 - int(killed.group(1))
    assert f"rebalancer {standby} finished the plan" in run.stderr
    rows = {r["label"]: r["metrics"] for r in json.loads(out.read_text())["rows"]}
    assert rows["rebalancer"]["moves"] == 4
    # bounded below by the dead rebalancer's 4 s session timeout
    assert rows["rebalancer"]["takeover_ms"] >= 3000
    assert rows["map change to every client"]["count"] == 4
    assert rows["routing"]["requests"] > 0
    assert rows["routing"]["errors"] == 0


@pytest.mark.timeout(180)
def test_rolling_restart_keeps_every_session_and_write(tmp_path):
    """Three servers of the kind under test, each stopped with SIGTERM and
    restarted in turn, the leader last, under writes. The run itself fails
    if an acknowledged write is lost."""
    out = tmp_path / "rolling.json"
    run = bench("rolling-restart", "--start", KIND, "--servers", "3",
                "--data-dir", str(tmp_path / "data"), "--json", str(out),
                "--writers", "3", "--settle", "0.5", timeout=170)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("(follower) restarted") == 2, run.stderr
    assert run.stderr.count("(leader) restarted") == 1, run.stderr
    rows = {r["label"]: r["metrics"] for r in json.loads(out.read_text())["rows"]}
    assert len(rows) == 4, rows
    whole = rows["all restarts"]
    assert whole["sessions_expired"] == 0, whole
    assert whole["other_errors"] == 0, whole
    assert whole["acknowledged_writes"] > 0, whole


def test_rolling_restart_needs_servers_it_started(server):
    run = bench("rolling-restart", "--target", server.hosts)
    assert run.returncode != 0
    assert "--start" in run.stderr


def test_failover_needs_a_leader_to_kill(server):
    run = bench("failover", "--target", server.hosts)
    assert run.returncode != 0
    assert "--leader-pid" in run.stderr


def test_a_target_is_required():
    run = bench("latency")
    assert run.returncode != 0
    assert "--target" in run.stderr
