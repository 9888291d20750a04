"""The `paddock` binary itself: zero-config `paddock serve`."""

import signal
import socket
import subprocess
import time

import pytest

from conftest import make_kazoo
from zkharness import paddock_bin
from kazoo.security import make_acl
from zkwire import four_letter

DEFAULT_PORT = 2181


def port_in_use(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class _Addr:
    hosts = f"127.0.0.1:{DEFAULT_PORT}"


def start_zero_config(cwd, log):
    proc = subprocess.Popen([str(paddock_bin()), "serve"], cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"paddock serve exited with {proc.returncode}")
        try:
            # srvr: the one word ZooKeeper's default whitelist always allows
            out = four_letter("127.0.0.1", DEFAULT_PORT, "srvr", timeout=2)
            if out.startswith("Zookeeper version:"):
                return proc
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("zero-config paddock serve did not answer srvr on 2181")


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@pytest.mark.paddock_only("Apache ZooKeeper has no zero-config mode")
def test_zero_config_serve(tmp_path):
    if port_in_use(DEFAULT_PORT):
        pytest.skip("port 2181 is in use on this machine")
    log_path = tmp_path / "paddock.log"
    with open(log_path, "wb") as log:
        proc = start_zero_config(tmp_path, log)
        try:
            zk = make_kazoo(_Addr)
            zk.create("/zero-config", b"persisted")
            zk.stop()
            zk.close()
        finally:
            stop(proc)
        assert (tmp_path / "paddock-data").is_dir()
        proc = start_zero_config(tmp_path, log)
        try:
            zk = make_kazoo(_Addr)
            assert zk.get("/zero-config")[0] == b"persisted"
            zk.stop()
            zk.close()
        finally:
            stop(proc)
    assert log_path.stat().st_size > 0, "paddock serve logs to stderr"


@pytest.mark.paddock_only("Apache ZooKeeper has no zero-config mode")
def test_zero_config_uses_zookeeper_default_whitelist(tmp_path):
    """Without a config the 4lw whitelist is ZooKeeper's default: srvr only."""
    if port_in_use(DEFAULT_PORT):
        pytest.skip("port 2181 is in use on this machine")
    with open(tmp_path / "paddock.log", "wb") as log:
        proc = start_zero_config(tmp_path, log)
        try:
            assert four_letter("127.0.0.1", DEFAULT_PORT, "stat") == \
                "stat is not executed because it is not in the whitelist.\n"
        finally:
            stop(proc)


@pytest.mark.paddock_only("the flags of `paddock serve`")
def test_serve_flags_with_jaas_file(tmp_path):
    """`--port`, `--data-dir` and `--jaas-config` without any zoo.cfg."""
    from test_sasl import JAAS
    from zkharness import free_port
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    port = free_port()
    log = open(tmp_path / "paddock.log", "wb")
    proc = subprocess.Popen(
        [str(paddock_bin()), "serve", "--port", str(port), "--bind", "127.0.0.1",
         "--data-dir", str(tmp_path / "data"), "--jaas-config", str(jaas)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "paddock.log").read_text()
            try:
                if four_letter("127.0.0.1", port, "srvr", timeout=2).startswith("Zookeeper"):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "paddock serve did not start"
            time.sleep(0.1)

        class Addr:
            hosts = f"127.0.0.1:{port}"
        zk = make_kazoo(Addr, sasl_options={"mechanism": "DIGEST-MD5",
                                            "username": "alice", "password": "secret"})
        try:
            assert zk.client_id is not None, "connected: SASL passed"
            zk.create("/by-alice", b"", acl=[make_acl("sasl", "alice", all=True)])
            assert zk.get("/by-alice")[0] == b""
        finally:
            zk.stop()
            zk.close()
        assert (tmp_path / "data" / "version-paddock").is_dir()
    finally:
        stop(proc)
        log.close()


@pytest.mark.paddock_only("ZooKeeper silently keeps unknown keys as system properties")
def test_an_unsupported_zoo_cfg_key_is_named_at_start_up(server_factory):
    server = server_factory({"skipACL": "yes", "some.unknown.key": "1"})
    log = server.log_path.read_text(errors="replace")
    warning = next((line for line in log.splitlines()
                    if "zoo.cfg keys Paddock does not support" in line), None)
    assert warning is not None, log
    assert "skipACL" in warning and "some.unknown.key" in warning, warning
    assert "WARN" in warning, warning
