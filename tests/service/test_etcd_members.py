"""The members of the etcd "cluster" (:mod:`service.etcd.members`): servers on one store announce
themselves; one that stops heartbeating drops out of the list, and long-gone announcements are deleted."""

from __future__ import annotations

from kvstore.objstore.memory import MemoryStore
from service.etcd.members import FORGET_AFTER_S, MEMBER_DIR, STALE_AFTER_S, MemberRegistry


class Clock:
    def __init__(self) -> None:
        self.ms = 5_000_000

    def __call__(self) -> int:
        return self.ms


def registry(objects: MemoryStore, member_id: int, clock: Clock) -> MemberRegistry:
    return MemberRegistry(objects, member_id, f"m{member_id}", lambda: (f"http://127.0.0.1:{member_id}",), clock)


def test_a_silent_member_drops_out_then_is_forgotten() -> None:
    objects, clock = MemoryStore(), Clock()
    a, b = registry(objects, 1, clock), registry(objects, 2, clock)
    assert [m.id for m in a.members()] == [1]  # itself, before any heartbeat
    a.heartbeat()
    b.heartbeat()
    assert [(m.id, m.client_urls) for m in b.members()] == [(1, ("http://127.0.0.1:1",)), (2, ("http://127.0.0.1:2",))]
    clock.ms += int(STALE_AFTER_S * 1000) + 1
    a.heartbeat()  # b was killed: it stops heartbeating
    assert [m.id for m in a.members()] == [1]
    assert len(list(objects.list(MEMBER_DIR))) == 2  # not yet forgotten: it may come back
    b.heartbeat()
    assert [m.id for m in a.members()] == [1, 2]
    clock.ms += int(FORGET_AFTER_S * 1000) + 1
    a.heartbeat()
    assert [m.id for m in a.members()] == [1]
    assert [meta.path for meta in objects.list(MEMBER_DIR)] == [f"{MEMBER_DIR}{1:016x}"]


def test_leaving_removes_the_announcement() -> None:
    objects, clock = MemoryStore(), Clock()
    a, b = registry(objects, 1, clock), registry(objects, 2, clock)
    a.heartbeat()
    b.heartbeat()
    b.leave()
    assert [m.id for m in a.members()] == [1]
