"""pytest fixtures for the end-to-end suite.

- `server`: a shared server (one per run, restarted if a test killed it)
  with the common configuration below; tests isolate themselves under
  their own root path (`root` fixture).
- `server_factory(config, kind=KIND)`: a dedicated server with its own zoo.cfg keys
  (of the kind under test unless told),
  stopped at teardown (SIGTERM, then SIGKILL).
- `kazoo_factory(server, **kw)` / `zk`: started kazoo clients, closed at
  teardown.
- `raw_factory(server, **kw)`: zkwire.RawClient sessions.
"""

from __future__ import annotations

import hashlib
import base64
import logging
import re
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from zkharness import KIND, Server  # noqa: E402
from zkwire import RawClient  # noqa: E402

from kazoo.client import KazooClient  # noqa: E402
from kazoo.handlers import utils as kazoo_utils  # noqa: E402
from kazoo.retry import KazooRetry  # noqa: E402

logging.getLogger("kazoo").setLevel(logging.WARNING)

# Every blocking kazoo call waits at most KAZOO_CALL_TIMEOUT seconds, so a
# server that never answers fails a test quickly instead of hanging it.
KAZOO_CALL_TIMEOUT = 30.0


def _bounded_get(self, block=True, timeout=None, _orig=kazoo_utils.AsyncResult.get):
    if block and timeout is None:
        timeout = KAZOO_CALL_TIMEOUT
    return _orig(self, block, timeout)


kazoo_utils.AsyncResult.get = _bounded_get


def digest(user: str, password: str) -> str:
    """ZooKeeper's DigestAuthenticationProvider.generateDigest."""
    h = hashlib.sha1(f"{user}:{password}".encode()).digest()
    return f"{user}:{base64.b64encode(h).decode()}"


SUPER_PASSWORD = "supersecret"

# Keys every shared-server test may rely on.
SHARED_CONFIG = {
    "extendedTypesEnabled": "true",
    "znode.container.checkIntervalMs": "500",
    "DigestAuthenticationProvider.superDigest": digest("super", SUPER_PASSWORD),
}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "paddock_only(reason): not applicable to Apache ZooKeeper 3.8")
    config.addinivalue_line(
        "markers", "zookeeper_only(reason): only meaningful against Apache ZooKeeper")


def pytest_report_header(config):
    return f"server under test: {KIND}"


def pytest_collection_modifyitems(config, items):
    for item in items:
        m = item.get_closest_marker("paddock_only")
        if m is not None and KIND == "zookeeper":
            reason = m.args[0] if m.args else m.kwargs.get("reason", "paddock only")
            item.add_marker(pytest.mark.skip(reason=f"paddock only: {reason}"))
        m = item.get_closest_marker("zookeeper_only")
        if m is not None and KIND != "zookeeper":
            reason = m.args[0] if m.args else m.kwargs.get("reason", "zookeeper only")
            item.add_marker(pytest.mark.skip(reason=f"zookeeper only: {reason}"))


# ---------------------------------------------------------------- servers

class _Shared:
    server = None
    count = 0


@pytest.fixture(scope="session")
def _shared_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("shared")


@pytest.fixture
def server(_shared_dir):
    """The shared server; restarted in a fresh directory if it died."""
    s = _Shared.server
    if s is None or not s.running():
        if s is not None:
            sys.stderr.write(f"\nshared server died; log tail:\n{s.stderr_tail()}\n")
        _Shared.count += 1
        s = Server(_shared_dir / f"s{_Shared.count}", SHARED_CONFIG, name="shared")
        s.start()
        _Shared.server = s
    yield s


def pytest_sessionfinish(session, exitstatus):
    if _Shared.server is not None:
        _Shared.server.stop()
        _Shared.server = None


@pytest.fixture
def server_factory(tmp_path):
    started = []

    def make(config=None, start=True, name=None, kind=KIND):
        n = len(started) + 1
        s = Server(tmp_path / f"server{n}", config, name=name or f"server{n}", kind=kind)
        started.append(s)
        if start:
            s.start()
        return s

    yield make
    for s in started:
        try:
            s.stop()
        except Exception as e:  # pragma: no cover - teardown best effort
            sys.stderr.write(f"stopping {s.name}: {e}\n")


# ---------------------------------------------------------------- clients

def make_kazoo(server, **kw) -> KazooClient:
    kw.setdefault("timeout", 10.0)
    kw.setdefault("connection_retry",
                  KazooRetry(max_tries=-1, delay=0.1, max_delay=0.5))
    kw.setdefault("command_retry", None)
    kw.setdefault("hosts", server.hosts)
    c = KazooClient(**kw)
    c.start(timeout=20)
    return c


@pytest.fixture
def kazoo_factory():
    clients = []

    def make(server, **kw):
        c = make_kazoo(server, **kw)
        clients.append(c)
        return c

    yield make
    for c in clients:
        try:
            c.stop()
            c.close()
        except Exception:
            pass


@pytest.fixture
def zk(server, kazoo_factory):
    return kazoo_factory(server)


@pytest.fixture
def raw_factory():
    clients = []

    def make(server, **kw):
        c = RawClient(server.host, server.port, **kw)
        clients.append(c)
        return c

    yield make
    for c in clients:
        try:
            c.close()
        except Exception:
            pass


@pytest.fixture
def root(request, server, kazoo_factory):
    """A fresh persistent node for this test on the shared server."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:60]
    path = f"/t-{name}-{uuid.uuid4().hex[:8]}"
    c = kazoo_factory(server)
    c.create(path, b"")
    return path
