"""The members of the etcd "cluster": the servers serving etcd's API over one store.

There is no Raft and no membership to agree on: the cluster is the store, and a
member is a ``lakekv serve --etcd-listen`` process on it. Each announces itself
with one small object beside the store's files,
``etcd-members/<member id as 16 hex digits>``, JSON ``{"id", "name",
"client_urls", "heartbeat_ms"}``, rewritten every :data:`HEARTBEAT_S` seconds
and deleted when it stops. ``Cluster.MemberList`` lists the members whose
heartbeat is recent (a ``kill -9``'d server drops out after
:data:`STALE_AFTER_S`); announcements far older than that are deleted by
whichever member sees them, so the directory does not grow with restarts.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Callable, Final

from kvstore.objstore.base import ObjectStore

MEMBER_DIR: Final = "etcd-members/"
HEARTBEAT_S: Final = 2.0
# Three missed heartbeats (and some slack for a loaded machine) before a member is no longer listed.
STALE_AFTER_S: Final = 10.0
# An announcement this old belongs to a server long gone: delete it.
FORGET_AFTER_S: Final = 3600.0


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Member:
    id: int
    name: str
    client_urls: tuple[str, ...]
    heartbeat_ms: int

    def encode(self) -> bytes:
        return json.dumps(
            {"id": self.id, "name": self.name, "client_urls": list(self.client_urls), "heartbeat_ms": self.heartbeat_ms}
        ).encode()

    @staticmethod
    def decode(raw: bytes) -> Member:
        data = json.loads(raw)
        return Member(int(data["id"]), str(data["name"]), tuple(data["client_urls"]), int(data["heartbeat_ms"]))


def _path(member_id: int) -> str:
    return f"{MEMBER_DIR}{member_id:016x}"


class MemberRegistry:
    """This server's announcement, and the list of every member's."""

    def __init__(
        self, objects: ObjectStore, member_id: int, name: str, client_urls: Callable[[], tuple[str, ...]],
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        """``client_urls``: where clients reach this server now (known once its port is bound)."""
        self._objects = objects
        self._clock = clock
        self._id = member_id
        self._name = name
        self._client_urls = client_urls

    def me(self) -> Member:
        return Member(self._id, self._name, self._client_urls(), self._clock())

    def heartbeat(self) -> None:
        """Announce (again) that this server is up."""
        me = self.me()
        self._objects.put(_path(me.id), me.encode())

    def leave(self) -> None:
        """Stop being listed (a clean shutdown)."""
        self._objects.delete(_path(self._id))

    def members(self) -> list[Member]:
        """The members with a recent heartbeat, this server always among them, ordered by id."""
        now = self._clock()
        me = self.me()
        found = {me.id: me}
        for meta in self._objects.list(MEMBER_DIR):
            try:
                member = Member.decode(self._objects.get(meta.path))
            except FileNotFoundError:
                continue  # it left between the listing and the read
            age_s = (now - member.heartbeat_ms) / 1000
            if age_s > FORGET_AFTER_S:
                self._objects.delete(meta.path)
            elif age_s <= STALE_AFTER_S and member.id != me.id:
                found[member.id] = member
        return [found[member_id] for member_id in sorted(found)]
