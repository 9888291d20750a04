"""The Go client (go-zookeeper, tests/go) against the server: the places
where it once found Paddock stricter than ZooKeeper (a plain create with
the container flag, digest credentials without a colon).

The program is built once per run with the Go toolchain; the module comes
from the Go module proxy (tests/go/go.sum pins it).
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from zkharness import REPO

GO_DIR = REPO / "tests" / "go"
BUILD_TIMEOUT = 300
RUN_TIMEOUT = 60


@pytest.fixture(scope="module")
def zkgo(tmp_path_factory):
    go = shutil.which("go")
    if go is None:
        pytest.fail("the Go toolchain is missing: apt-get install golang-go")
    binary = tmp_path_factory.mktemp("zkgo") / "zkgo"
    p = subprocess.run([go, "build", "-o", str(binary), "."], cwd=GO_DIR,
                       capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert p.returncode == 0, f"go build failed:\n{p.stderr}"
    return binary


def test_go_client_container_flag_and_digest_without_colon(server, zkgo, zk, root):
    p = subprocess.run([str(zkgo), server.hosts, root], capture_output=True,
                       text=True, timeout=RUN_TIMEOUT)
    assert p.returncode == 0, f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert "ok create with FlagContainer" in p.stdout
    assert "ok AddAuth digest without a colon" in p.stdout
    # The create went through and left a node that reads like a persistent
    # one; that it is not a container (reaped once its last child goes) is
    # checked on the wire in test_exactness.py.
    stat = zk.exists(f"{root}/flag-container")
    assert stat is not None and stat.ephemeralOwner == 0
