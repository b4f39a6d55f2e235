"""Two etcd client libraries from PyPI, written by nobody here, each running a lock and a leader election
against ``lakekv serve --etcd-listen``: ``aetcd`` (asyncio, over gRPC) and ``etcd3gw`` (OpenStack's, over
etcd's JSON gateway).

``etcd3`` (python-etcd3 0.12.0) is not among them: its generated message classes need protobuf's
pure-Python runtime under protobuf 7, and its ``Lock.acquire`` fails with tenacity 9 (``wait()`` is called
with a new signature) before it talks to any server.

aetcd runs in a client process of its own (tests/service/aetcd_recipes.py says why). Both libraries'
locks are their own recipes over KV and Lease (a key created with a lease under a compare on its create
revision); the election is the leader-key recipe through each library's transactions, leases and watches.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any


from tests.service.etcd_peers import LakekvEtcd

WAIT_S = 60


def run_recipes(module: str, port: int) -> dict[str, Any]:
    """``python -m tests.service.<module> 127.0.0.1 port``: what the library saw, as JSON."""
    run = subprocess.run(
        [sys.executable, "-m", f"tests.service.{module}", "127.0.0.1", str(port)],
        capture_output=True, text=True, timeout=5 * WAIT_S,
    )
    assert run.returncode == 0, run.stderr
    seen: dict[str, Any] = json.loads(run.stdout)
    return seen


def test_aetcd_runs_a_lock_and_an_election(lakekv: LakekvEtcd) -> None:
    seen = run_recipes("aetcd_recipes", lakekv.etcd_port)
    assert seen["lock"] == {
        "first": True, "second_while_held": False, "released": True, "second_after_release": True,
        "only_second_holds": True,
    }
    assert seen["election"] == {
        "alice": True, "leader_while_alice_lives": "alice", "bob_waiting": True, "bob": True,
        "leader_after": "bob", "leader_lease_is_bobs": True,
    }


def test_etcd3gw_runs_a_lock_and_an_election_through_the_json_gateway(lakekv: LakekvEtcd) -> None:
    from etcd3gw.client import Etcd3Client

    client = Etcd3Client(host="127.0.0.1", port=lakekv.server.port, timeout=WAIT_S)  # finds /v3/ by /version
    first, second = client.lock("jobs", ttl=60), client.lock("jobs", ttl=60)
    assert first.acquire() and first.is_acquired()
    assert not second.acquire()  # held
    assert first.release() and second.acquire() and second.is_acquired()
    assert second.release()

    key = "/election/leader"

    def campaign(me: str, lease: Any) -> None:
        while not client.create(key, me, lease=lease):
            found = client.get(key, metadata=True)
            if found:  # wait for the leader's key to change or go, from its revision: none is missed
                revision = int(found[0][1]["mod_revision"])
                client.watch_once(key, timeout=WAIT_S, start_revision=revision + 1)

    alice, bob = client.lease(60), client.lease(60)
    campaign("alice", alice)
    with ThreadPoolExecutor(1) as pool:
        bob_campaign = pool.submit(campaign, "bob", bob)
        assert client.get(key) == [b"alice"] and not bob_campaign.done()
        assert alice.revoke()  # the leader dies: its lease goes, and its key with it
        bob_campaign.result(timeout=WAIT_S)
    ((value, meta),) = client.get(key, metadata=True)
    assert value == b"bob" and int(meta["lease"]) == bob.id
    assert key.encode() in bob.keys()
