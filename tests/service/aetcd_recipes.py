"""A lock and a leader election with the ``aetcd`` client library (asyncio, from PyPI), against an etcd
endpoint: ``python -m tests.service.aetcd_recipes HOST PORT`` prints one JSON object of what it saw.

It runs in its own process: aetcd registers etcd's message types (``authpb``, ``etcdserverpb``...) in
protobuf's default pool under the same names as lakekv's own generated classes, so the two cannot be
imported into one process.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

# How long a waiting candidate or lock waits before the run fails (a loaded machine is slow).
WAIT_S = 60


async def lock_twice(client: Any) -> dict[str, Any]:
    first, second = client.lock(b"jobs", ttl=60), client.lock(b"jobs", ttl=60)
    seen = {"first": await first.acquire(timeout=WAIT_S)}
    seen["second_while_held"] = await second.acquire(timeout=1)  # held: it cannot be had, however long one waits
    seen["released"] = await first.release()
    seen["second_after_release"] = await second.acquire(timeout=WAIT_S)
    seen["only_second_holds"] = await second.is_acquired() and not await first.is_acquired()
    await second.release()
    return seen


async def campaign(client: Any, key: bytes, me: bytes, lease: Any) -> bool:
    """The leader-key recipe: create the key with my lease unless it exists; else wait for it to change."""
    while True:
        won, _ = await client.transaction(
            compare=[client.transactions.create(key) == 0],
            success=[client.transactions.put(key, me, lease=lease)],
            failure=[],
        )
        if won:
            return True
        leader = await client.get(key)
        if leader is not None:  # wait for the leader's key to change or go, from its revision: none is missed
            await client.watch_once(key, timeout=WAIT_S, start_revision=leader.mod_revision + 1)


async def election(client: Any) -> dict[str, Any]:
    key = b"/election/leader"
    alice, bob = await client.lease(60), await client.lease(60)
    seen: dict[str, Any] = {"alice": await campaign(client, key, b"alice", alice)}
    bob_campaign = asyncio.create_task(campaign(client, key, b"bob", bob))
    seen["leader_while_alice_lives"] = (await client.get(key)).value.decode()
    seen["bob_waiting"] = not bob_campaign.done()
    await alice.revoke()  # the leader dies: its lease goes, and its key with it
    seen["bob"] = await asyncio.wait_for(bob_campaign, WAIT_S)
    leader = await client.get(key)
    seen["leader_after"] = leader.value.decode()
    seen["leader_lease_is_bobs"] = leader.lease == bob.id
    return seen


async def main() -> None:
    import aetcd

    async with aetcd.Client(host=sys.argv[1], port=int(sys.argv[2]), timeout=WAIT_S) as client:
        print(json.dumps({"lock": await lock_twice(client), "election": await election(client)}))


if __name__ == "__main__":
    asyncio.run(main())
