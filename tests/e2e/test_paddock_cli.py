"""The `paddock` binary itself: zero-config `paddock serve`."""

import signal
import socket
import subprocess
import time

import pytest

from conftest import make_kazoo
from zkharness import paddock_bin
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
