"""The AdminServer: ZooKeeper's HTTP commands (`admin.*` keys), their JSON
shapes and aliases, against whichever server is under test."""

import json
import socket
import time
import urllib.error
import urllib.request

import pytest

from ensemble import Ensemble, wait_for
from zkharness import HOST, free_port

# The commands every test here relies on, primary name first, as ZooKeeper
# 3.8 lists and answers them.
COMMANDS = {
    "configuration": ["conf", "config"],
    "connection_stat_reset": ["crst"],
    "connections": ["cons"],
    "dirs": [],
    "dump": [],
    "environment": ["env", "envi"],
    "get_trace_mask": ["gtmk"],
    "hash": [],
    "initial_configuration": ["icfg"],
    "is_read_only": ["isro"],
    "last_snapshot": ["lsnp"],
    "leader": ["lead"],
    "monitor": ["mntr"],
    "observer_connection_stat_reset": ["orst"],
    "observers": ["obsr"],
    "ruok": [],
    "server_stats": ["srvr"],
    "set_trace_mask": ["stmk"],
    "stat_reset": ["srst"],
    "stats": ["stat"],
    "system_properties": ["sysp"],
    "voting_view": [],
    "watch_summary": ["wchs"],
    "watches": ["wchc"],
    "watches_by_path": ["wchp"],
    "zabstate": [],
}


def get(port, path):
    with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=10) as reply:
        return reply.status, reply.headers.get("Content-Type"), reply.read().decode()


def command(port, name):
    status, content_type, body = get(port, f"/commands/{name}")
    assert status == 200
    assert content_type.startswith("application/json")
    return json.loads(body)


@pytest.fixture
def admin(server_factory):
    """A server with its AdminServer on a port of its own."""
    port = free_port()
    server = server_factory({"admin.enableServer": "true",
                             "admin.serverAddress": HOST,
                             "admin.serverPort": str(port)})
    server.admin_port = port
    return server


def test_the_listing_links_every_command(admin):
    status, _, body = get(admin.admin_port, "/commands")
    assert status == 200
    for name in COMMANDS:
        assert f'<a href="/commands/{name}">{name}</a>' in body


def test_every_alias_answers_as_its_command(admin):
    for name, aliases in COMMANDS.items():
        for asked in [name] + aliases:
            answer = command(admin.admin_port, asked)
            assert answer["command"] == name, asked
            # A standalone server has no leader; set_trace_mask needs its
            # argument.
            if name not in ("leader", "set_trace_mask"):
                assert answer["error"] is None, (asked, answer)


def test_an_unknown_command_is_an_answer_with_an_error(admin):
    answer = command(admin.admin_port, "nosuch")
    assert answer == {"command": "nosuch", "error": "Unknown command: nosuch"}


@pytest.mark.parametrize("garbage", [
    b"\x00\x01\x02 not http at all\r\n\r\n",
    b"GET /commands/ruok HTTP/1.1\r\nHost: x\r\nNo colon in this header\r\n\r\n",
    b"GET /commands/ruok HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n",
])
def test_a_malformed_request_is_answered_400_and_costs_nothing_else(admin, garbage):
    with socket.create_connection((HOST, admin.admin_port), timeout=10) as s:
        s.sendall(garbage)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    status = reply.split(b"\r\n", 1)[0]
    assert status.startswith(b"HTTP/1.1 4"), reply[:200]
    assert command(admin.admin_port, "ruok")["error"] is None


def test_the_trace_mask_is_set_and_read_back(admin):
    assert command(admin.admin_port, "gtmk")["tracemask"] == 306
    assert command(admin.admin_port, "stmk?traceMask=1234")["tracemask"] == 1234
    assert command(admin.admin_port, "get_trace_mask")["tracemask"] == 1234
    needs = "setTraceMask requires long traceMask argument"
    assert command(admin.admin_port, "stmk") == {"command": "set_trace_mask", "error": needs}
    bad = command(admin.admin_port, "stmk?traceMask=lots")
    assert bad == {"command": "set_trace_mask", "error": f"{needs}, got lots"}
    assert command(admin.admin_port, "gtmk")["tracemask"] == 1234


def test_system_properties_name_the_process(admin):
    answer = command(admin.admin_port, "sysp")
    for key in ("os.name", "os.arch", "user.name", "user.dir", "user.home",
                "java.io.tmpdir", "file.separator", "path.separator", "line.separator"):
        assert isinstance(answer.get(key), str), (key, answer)
    assert answer["file.separator"] == "/" and answer["line.separator"] == "\n"


def test_last_snapshot_names_the_newest_snapshot(server_factory, kazoo_factory):
    """ZooKeeper takes a snapshot every snapCount/2 to snapCount txns; so
    does Paddock. After 60 writes with snapCount 20 there is one past zxid
    0, and lsnp names its zxid (hex, no 0x) and when it was written."""
    port = free_port()
    server = server_factory({"admin.enableServer": "true", "admin.serverAddress": HOST,
                             "admin.serverPort": str(port), "snapCount": "20"})
    zk = kazoo_factory(server)
    for i in range(60):
        zk.create(f"/n{i}", b"")
    last_zxid = zk.exists("/n59").czxid

    def newest():
        answer = command(port, "last_snapshot")
        return answer if int(answer["zxid"], 16) not in (0, 2**64 - 1) else None
    answer = wait_for(newest, timeout=15)
    assert 0 < int(answer["zxid"], 16) <= last_zxid, answer
    assert abs(answer["timestamp"] - time.time()) < 120, answer


def test_sessions_ephemerals_and_watches_show(admin, kazoo_factory):
    zk = kazoo_factory(admin)
    zk.create("/admin-test", b"x")
    zk.create("/admin-test/eph", b"", ephemeral=True)
    zk.get("/admin-test", watch=lambda event: None)
    session = zk.client_id[0]
    port = admin.admin_port

    connections = command(port, "connections")["connections"]
    mine = [c for c in connections if c["session_id"] == session]
    assert len(mine) == 1
    for key in ("remote_socket_address", "packets_received", "packets_sent",
                "last_operation", "session_timeout", "last_zxid", "max_latency"):
        assert key in mine[0], key

    dump = command(port, "dump")
    assert dump["session_id_to_ephemeral_paths"][str(session)] == ["/admin-test/eph"]
    assert any(session in ids for ids in dump["expiry_time_to_session_ids"].values())

    assert command(port, "watches")["session_id_to_watched_paths"][str(session)] == \
        ["/admin-test"]
    assert command(port, "watches_by_path")["path_to_session_ids"]["/admin-test"] == [session]
    summary = command(port, "watch_summary")
    assert summary["num_connections"] == 1
    assert summary["num_paths"] == 1 and summary["num_total_watches"] == 1


def test_stats_monitor_and_configuration_agree(admin, kazoo_factory):
    zk = kazoo_factory(admin)
    zk.create("/admin-stats", b"")
    port = admin.admin_port
    stats = command(port, "stats")
    assert stats["server_stats"]["server_state"] == "standalone"
    assert stats["read_only"] is False
    assert isinstance(stats["node_count"], int)
    assert stats["server_stats"]["last_processed_zxid"] == zk.exists("/admin-stats").mzxid
    assert len(stats["connections"]) == 1
    assert "connections" not in command(port, "server_stats")

    monitor = command(port, "monitor")
    assert monitor["znode_count"] == stats["node_count"]
    assert monitor["server_state"] == "standalone"
    assert isinstance(monitor["avg_latency"], float)

    conf = command(port, "configuration")
    assert conf["client_port"] == admin.port
    assert conf["server_id"] == 0
    assert conf["min_session_timeout"] == 4000
    assert f"clientPort={admin.port}" in command(port, "initial_configuration")[
        "initial_configuration"]
    assert command(port, "environment")["zookeeper.version"]
    assert command(port, "is_read_only")["read_only"] is False
    dirs = command(port, "dirs")
    assert dirs["datadir_size"] > 0 and dirs["logdir_size"] > 0


def test_stat_reset_zeroes_the_packet_counts(admin, kazoo_factory):
    zk = kazoo_factory(admin)
    for _ in range(5):
        zk.exists("/")
    port = admin.admin_port
    assert command(port, "server_stats")["server_stats"]["packets_received"] >= 5
    command(port, "stat_reset")
    assert command(port, "server_stats")["server_stats"]["packets_received"] < 5


def test_a_standalone_server_has_no_leader_or_voting_view(admin):
    port = admin.admin_port
    assert command(port, "leader") == {"command": "leader",
                                       "error": "server is not initialized"}
    assert command(port, "voting_view")["current_config"] == {}
    assert command(port, "zabstate")["voting"] is False
    assert command(port, "observers")["observers"] == []


def test_admin_enable_server_false_opens_no_port(server_factory):
    port = free_port()
    server = server_factory({"admin.enableServer": "false",
                             "admin.serverAddress": HOST,
                             "admin.serverPort": str(port)})
    assert server.four_letter("ruok") == "imok"
    with pytest.raises(urllib.error.URLError):
        get(port, "/commands/ruok")


def leaders_named(members, leader_id):
    """Each member's `leader` answer, once all of them name `leader_id`."""
    answers = [command(m.admin_port, "leader") for m in members]
    return answers if all(a["leader_id"] == leader_id for a in answers) else None


@pytest.mark.paddock_only("ensembles are Paddock's (tests/e2e/ensemble.py)")
def test_an_ensemble_reports_its_leader_and_voting_view(tmp_path):
    with Ensemble(tmp_path / "ensemble", voters=3) as ens:
        for member in ens.members:
            member.admin_port = free_port()
            member.extra_config = {"admin.enableServer": "true",
                                   "admin.serverAddress": HOST,
                                   "admin.serverPort": str(member.admin_port)}
        ens.start()
        leader = ens.leader()
        answers = wait_for(lambda: leaders_named(ens.members, leader.id), 20,
                           what="every server to name the leader")
        assert [a["is_leader"] for a in answers] == [m is leader for m in ens.members]
        assert all(a["leader_ip"] == HOST for a in answers)
        view = command(leader.admin_port, "voting_view")["current_config"]
        assert view == {str(m.id): f"{HOST}:{m.peer_port}:{m.election_port}:participant"
                        f";0.0.0.0:{m.port}" for m in ens.members}
        for member in ens.members:
            zab = command(member.admin_port, "zabstate")
            assert (zab["myid"], zab["voting"], zab["zabstate"]) == \
                (member.id, True, "broadcast")
            assert zab["is_leader"] == (member is leader)
        stats = command(leader.admin_port, "server_stats")["server_stats"]
        assert stats["server_state"] == "leader"
