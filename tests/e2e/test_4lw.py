"""Four-letter words on the client port: output shapes and the whitelist."""

import re
import socket
import time

import pytest

from zkwire import CreateMode, read_until_close


def lines(text):
    return text.splitlines()


def kv(text, sep):
    out = {}
    for line in lines(text):
        if sep in line:
            k, v = line.split(sep, 1)
            out[k] = v
    return out


SRVR_RE = re.compile(
    r"Zookeeper version: (?P<version>[^\n]+)\n"
    r"Latency min/avg/max: \d+/\d+(\.\d+)?/\d+\n"
    r"Received: \d+\n"
    r"Sent: \d+\n"
    r"Connections: (?P<connections>\d+)\n"
    r"Outstanding: \d+\n"
    r"Zxid: 0x(?P<zxid>[0-9a-f]+)\n"
    r"Mode: standalone\n"
    r"Node count: (?P<nodes>\d+)\n$")


@pytest.fixture
def quiet_server(server_factory):
    """A dedicated server, so that counts are exact."""
    return server_factory({"tickTime": "2000", "maxClientCnxns": "50"})


def test_ruok(server):
    assert server.four_letter("ruok") == "imok"


def test_ruok_sent_in_pieces(server):
    with socket.create_connection((server.host, server.port), timeout=5) as s:
        s.sendall(b"ru")
        time.sleep(0.3)
        s.sendall(b"ok")
        data, closed = read_until_close(s, 5)
    assert (data, closed) == (b"imok", True)


def test_srvr_on_fresh_server(quiet_server):
    out = quiet_server.four_letter("srvr")
    m = SRVR_RE.match(out)
    assert m, out
    assert m.group("zxid") == "0"
    # a fresh tree: /, /zookeeper, /zookeeper/config, /zookeeper/quota, and
    # ZooKeeper counts the root twice (it is stored under "" and "/")
    assert m.group("nodes") == "5"
    assert m.group("connections") == "1"


def test_srvr_counts_and_zxid(quiet_server, raw_factory):
    c = raw_factory(quiet_server)
    _, _, st = c.create("/a", b"x")
    out = quiet_server.four_letter("srvr")
    m = SRVR_RE.match(out)
    assert m, out
    assert int(m.group("zxid"), 16) == st.czxid
    assert m.group("nodes") == "6"
    assert m.group("connections") == "2"


def test_stat(quiet_server, raw_factory):
    c = raw_factory(quiet_server)
    out = quiet_server.four_letter("stat")
    ls = lines(out)
    assert ls[0].startswith("Zookeeper version: ")
    assert ls[1] == "Clients:"
    clients = []
    i = 2
    while ls[i] != "":
        clients.append(ls[i])
        i += 1
    assert len(clients) == 2  # the session and this 4lw connection
    for cl in clients:
        assert re.match(r"^ /127\.0\.0\.1:\d+\[\d+\]\(queued=\d+,recved=\d+,sent=\d+\)$", cl), cl
    rest = "\n".join([ls[0]] + ls[i + 1:]) + "\n"
    assert SRVR_RE.match(rest), out
    assert c.session_id != 0


def test_mntr(quiet_server, raw_factory, kazoo_factory):
    before = kv(quiet_server.four_letter("mntr"), "\t")
    for key in ("zk_version", "zk_server_state", "zk_znode_count",
                "zk_ephemerals_count", "zk_num_alive_connections",
                "zk_watch_count", "zk_outstanding_requests",
                "zk_approximate_data_size", "zk_avg_latency", "zk_max_latency",
                "zk_min_latency", "zk_packets_received", "zk_packets_sent",
                "zk_open_file_descriptor_count", "zk_max_file_descriptor_count"):
        assert key in before, key
    assert before["zk_server_state"] == "standalone"
    assert before["zk_znode_count"] == "5"
    assert before["zk_ephemerals_count"] == "0"
    assert before["zk_watch_count"] == "0"
    srvr_version = SRVR_RE.match(quiet_server.four_letter("srvr")).group("version")
    assert before["zk_version"] == srvr_version

    c = raw_factory(quiet_server)
    c.create("/p", b"12345")
    c.create("/p/e", mode=CreateMode.EPHEMERAL)
    c.get_data("/p", watch=True)
    after = kv(quiet_server.four_letter("mntr"), "\t")
    assert after["zk_znode_count"] == "7"
    assert after["zk_ephemerals_count"] == "1"
    assert after["zk_watch_count"] == "1"
    assert int(after["zk_num_alive_connections"]) == 2
    assert int(after["zk_approximate_data_size"]) > int(before["zk_approximate_data_size"])
    # every line is key<TAB>value
    for line in lines(quiet_server.four_letter("mntr")):
        assert re.match(r"^zk_[a-z0-9_]+\t\S.*$", line), line


def test_conf(quiet_server):
    conf = kv(quiet_server.four_letter("conf"), "=")
    assert conf["clientPort"] == str(quiet_server.port)
    assert conf["tickTime"] == "2000"
    assert conf["minSessionTimeout"] == "4000"
    assert conf["maxSessionTimeout"] == "40000"
    assert conf["maxClientCnxns"] == "50"
    assert conf["dataDir"].startswith(str(quiet_server.data_dir))
    assert conf["serverId"] == "0"


def test_envi(server):
    out = server.four_letter("envi")
    ls = lines(out)
    assert ls[0] == "Environment:"
    env = kv(out, "=")
    for key in ("zookeeper.version", "host.name", "os.name", "os.arch",
                "os.version", "user.name", "user.dir"):
        assert key in env, key


def test_cons(quiet_server, raw_factory):
    c = raw_factory(quiet_server, timeout_ms=12000)
    c.exists("/")
    out = quiet_server.four_letter("cons")
    sid = f"0x{c.session_id:x}"
    mine = [line for line in lines(out) if f"sid={sid}," in line]
    assert len(mine) == 1, out
    assert re.match(r"^ /127\.0\.0\.1:\d+\[1\]\(queued=\d+,recved=\d+,sent=\d+,"
                    r"sid=0x[0-9a-f]+,lop=\w+,est=\d+,to=12000,", mine[0]), mine[0]
    assert out.endswith("\n\n")
    # The last answer's time is in milliseconds of the monotonic clock
    # (ZooKeeper's Time.currentElapsedTime), where est is the wall clock's.
    answered = int(re.search(r",lresp=(\d+),", mine[0]).group(1))
    now_ms = time.monotonic() * 1000
    assert now_ms - 60_000 <= answered <= now_ms + 1000, mine[0]


def test_watch_words(quiet_server, raw_factory):
    c = raw_factory(quiet_server)
    c.create("/w")
    assert quiet_server.four_letter("wchs") == "0 connections watching 0 paths\nTotal watches:0\n"
    c.get_data("/w", watch=True)
    sid = f"0x{c.session_id:x}"
    assert quiet_server.four_letter("wchs") == "1 connections watching 1 paths\nTotal watches:1\n"
    assert quiet_server.four_letter("wchc") == f"{sid}\n\t/w\n\n"
    assert quiet_server.four_letter("wchp") == f"/w\n\t{sid}\n\n"


def test_dump(quiet_server, raw_factory):
    c = raw_factory(quiet_server)
    c.create("/eph", mode=CreateMode.EPHEMERAL)
    out = quiet_server.four_letter("dump")
    sid = f"0x{c.session_id:x}"
    assert out.startswith("SessionTracker dump:\n")
    assert "ephemeral nodes dump:\nSessions with Ephemerals (1):\n" in out
    assert f"{sid}:\n\t/eph\n" in out


def test_isro(server):
    assert server.four_letter("isro") == "rw"


def test_unknown_word_closes_without_answer(server):
    for word in ("xyzw", "kill", "RUOK"):
        data, closed = server.send_raw(word.encode())
        assert (data, closed) == (b"", True), word


def test_four_letter_word_only_as_first_bytes(server, raw_factory):
    """Once a session is established, the bytes `ruok` are a frame length
    (0x72756f6b, far above jute.maxbuffer): the connection is closed."""
    c = raw_factory(server)
    c.sock.sendall(b"ruok")
    assert c.wait_closed(5)


def test_whitelist(server_factory):
    s = server_factory({"4lw.commands.whitelist": "ruok, conf"})
    assert s.four_letter("ruok") == "imok"
    assert s.four_letter("conf").startswith("clientPort=")
    for word in ("stat", "mntr", "cons", "envi", "wchs", "dump", "isro"):
        assert s.four_letter(word) == \
            f"{word} is not executed because it is not in the whitelist.\n"
    # srvr is always allowed (zkServer.sh status depends on it)
    assert SRVR_RE.match(s.four_letter("srvr"))


def test_default_whitelist_is_srvr_only(server_factory):
    s = server_factory({"4lw.commands.whitelist": None})
    assert SRVR_RE.match(s.four_letter("srvr"))
    for word in ("ruok", "stat", "mntr", "conf"):
        assert s.four_letter(word) == \
            f"{word} is not executed because it is not in the whitelist.\n"
