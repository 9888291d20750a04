"""ZooKeeper's read-only mode (`readonlymode.enabled`): a server cut off
from its quorum serves the clients that ask for a read-only server (kazoo's
`read_only=True`), reads only, and refuses the others; once the quorum is
back, those clients get read-write sessions again."""

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NotReadOnlyCallError
from kazoo.protocol.states import KeeperState
from kazoo.retry import KazooRetry

from ensemble import Ensemble, wait_for

pytestmark = pytest.mark.paddock_only("ensembles are Paddock's (tests/e2e/ensemble.py)")


def kazoo(member, read_only):
    client = KazooClient(hosts=member.hosts, timeout=4.0, read_only=read_only,
                         connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=0.3),
                         command_retry=None)
    return client


def test_a_server_without_its_quorum_serves_read_only_clients(tmp_path):
    with Ensemble(tmp_path, voters=3, config={"readonlymode.enabled": "true"}) as ensemble:
        ensemble.start()
        ensemble.wait_all_serving()
        writer = ensemble.client(ensemble.leader())
        writer.create("/config", b"v1")
        alone = ensemble.followers()[0]
        assert wait_for(lambda: alone.four_letter("isro") == "rw", timeout=10)
        writer.stop()
        others = [m for m in ensemble.members if m is not alone]
        for member in others:
            member.kill()

        assert wait_for(lambda: alone.four_letter("isro") == "ro", timeout=20,
                        what="the server alone to go read-only")
        assert "Mode: read-only" in alone.srvr()
        reader = kazoo(alone, read_only=True)
        reader.start(timeout=15)
        try:
            assert reader.client_state == KeeperState.CONNECTED_RO
            assert reader.get("/config")[0] == b"v1"
            assert reader.get_children("/", watch=lambda event: None)
            with pytest.raises(NotReadOnlyCallError):
                reader.create("/refused", b"")
            assert reader.exists("/refused") is None

            # A client that cannot take a read-only server is not served.
            refused = kazoo(alone, read_only=False)
            with pytest.raises(Exception):
                refused.start(timeout=4)
            refused.stop()
            refused.close()

            for member in others:
                member.restart()
            assert wait_for(lambda: alone.four_letter("isro") == "rw", timeout=30,
                            what="the server to leave read-only mode")
            assert wait_for(lambda: reader.client_state == KeeperState.CONNECTED, timeout=30,
                            what="the read-only client to get a read-write session")
            reader.create("/after", b"")
            assert ensemble.client(others[0]).exists("/after") is not None
        finally:
            reader.stop()
            reader.close()
