"""etcd's Lease service: Grant, Revoke, KeepAlive, TimeToLive, Leases, with no write per keepalive.

A lease is a record beside the store (:mod:`service.etcd.lease_table`): a
keepalive moves its deadline and touches no key, so it consumes no revision
and watchers see nothing, as in etcd. A key put with a lease carries the
lease id in its etcd record (:mod:`service.etcd.keyspace`) and is visible
only while the lease lives: reads ask :meth:`Leases.live`, which costs
no I/O while the lease's known deadline is ahead. Expiry then becomes a
real delete: each server sweeps the leases whose deadline has passed
(:meth:`Leases.sweep`, every :data:`SWEEP_INTERVAL_S` at most) and revokes
them, one commit each that deletes their keys, so watchers get etcd's
DELETE events (a lock waiter wakes on them).

Which keys a lease has: each put with a lease also writes an attachment
row ``ATTACHED + <lease id, 8 bytes> + <etcd key>`` in the same commit (no
extra revision), deleted when the key is put without the lease or deleted.
Revoking reads those rows and deletes each key whose record still names the
lease. Attachment rows are not etcd keys: no Range or Watch sees them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import AsyncIterator
from typing import Any, Final

import grpc
import grpc.aio

from kvstore.errors import StoreError
from kvstore.leases import RESERVED
from service.etcd import errors
from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.etcdserverpb import rpc_pb2_grpc
from service.etcd.context import EtcdContext, abort_with, unary
from service.etcd.keyspace import KEYS, Keyspace, decode
from service.etcd.lease_table import LeaseRecord, LeaseTable
from service.etcd.waiting import OpenStreams

_log = logging.getLogger("lakekv.etcd.lease")

ATTACHED: Final = RESERVED + b"etcd/lease/"
_ID: Final = struct.Struct(">Q")
# How long an expired lease's keys may linger (invisible) before a sweep deletes them.
SWEEP_INTERVAL_S: Final = 0.5

def _attachment_prefix(lease_id: int) -> bytes:
    return ATTACHED + _ID.pack(lease_id & ((1 << 64) - 1))


class Leases:
    """The store's leases as etcd sees them; :class:`~service.etcd.keyspace.LeaseHook` of the keyspace.

    Thread-safe; calls block (run them on the server's worker threads).
    """

    def __init__(self, keyspace: Keyspace, table: LeaseTable) -> None:
        self._keyspace = keyspace
        self._store = keyspace.store
        self.table = table

    # -- the keyspace's hook (inside its writing transaction) ------------------

    def check(self, txn: Any, lease_id: int) -> None:
        """Refuse a lease that is not alive (a txn checks every put's lease before running any op).

        Raises:
            errors.EtcdError: LEASE_NOT_FOUND.
        """
        self._check_fresh(lease_id)

    def _check_fresh(self, lease_id: int) -> None:
        # A write reads the record, never a cached deadline: a lease revoked on another server must
        # not get new keys (its cached deadline may still be ahead).
        if lease_id:
            self.table.live(lease_id)  # raises errors.EtcdLeaseNotFoundError

    def on_put(self, txn: Any, key: bytes, old_lease: int, new_lease: int) -> None:
        """Attach ``key`` to ``new_lease``: the row carries no expiry (see the module docstring).

        Raises:
            errors.EtcdError: LEASE_NOT_FOUND when ``new_lease`` is not alive.
        """
        self._check_fresh(new_lease)
        if old_lease == new_lease:
            return None
        if new_lease:
            txn.put(_attachment_prefix(new_lease) + key, b"")
        if old_lease:
            txn.delete(_attachment_prefix(old_lease) + key)
        return None

    def on_delete(self, txn: Any, key: bytes, old_lease: int) -> None:
        if old_lease:
            txn.delete(_attachment_prefix(old_lease) + key)

    def live(self, lease_id: int) -> bool:
        """Whether a key attached to ``lease_id`` is visible now (no I/O while its known deadline is ahead)."""
        return self.table.is_alive(lease_id)

    # -- the Lease service ------------------------------------------------------

    def grant(self, ttl: int, lease_id: int = 0) -> LeaseRecord:
        """etcd's LeaseGrant. An expired record with ``lease_id`` is revoked first (its keys go)."""
        if lease_id:
            old = self.table.get(lease_id)
            if old is not None and old.expire_ms <= self.table.now_ms():
                self.revoke(lease_id)
        return self.table.grant(ttl, lease_id)

    def keepalive(self, lease_id: int) -> int:
        """etcd's LeaseRenew: the granted TTL, or 0 when the lease is gone (etcd answers so, not an error)."""
        try:
            return self.table.keepalive(lease_id).ttl
        except errors.EtcdLeaseLateError:
            self.revoke(lease_id)  # others may have seen it expire: it must stay dead
            return 0
        except errors.EtcdLeaseNotFoundError:
            return 0

    def attached_keys(self, lease_id: int) -> list[bytes]:
        """The etcd keys attached to the lease now."""
        prefix = _attachment_prefix(lease_id)
        keys = []
        with self._store.snapshot() as snapshot:
            for row_key, _, _ in list(snapshot.scan_with_revision(prefix=prefix)):
                key = row_key[len(prefix):]
                for store_key, raw, revision in snapshot.scan_with_revision(KEYS + key, KEYS + key + b"\x00"):
                    if decode(store_key, raw, revision).lease == lease_id:
                        keys.append(key)
        return keys

    @staticmethod
    def _attached_in(txn: Any, lease_id: int) -> list[tuple[bytes, bool]]:
        """``(etcd key, whether its record still names the lease)`` for each of the lease's attachment rows."""
        prefix = _attachment_prefix(lease_id)
        found = []
        for row_key, _ in list(txn.scan(prefix=prefix)):
            key = row_key[len(prefix):]
            raw, revision = txn.get_with_revision(KEYS + key)
            found.append((key, raw is not None and decode(KEYS + key, raw, revision or 0).lease == lease_id))
        return found

    def revoke(self, lease_id: int) -> int:
        """Delete the lease's keys in one commit (no commit if it has none), then the lease; the revision after.

        Raises:
            errors.EtcdLeaseNotFoundError: there is no such lease (never granted, or already revoked or swept).
        """
        if self.table.get(lease_id) is None:
            raise errors.EtcdLeaseNotFoundError()

        def delete_keys(txn: Any) -> int:
            attached = self._attached_in(txn, lease_id)
            if not any(mine for _, mine in attached):
                return int(txn.start_seq)  # nothing visible to delete: no commit, no revision (as etcd)
            prefix = _attachment_prefix(lease_id)
            for key, mine in attached:
                if mine:
                    txn.delete(KEYS + key)
                txn.delete(prefix + key)
            return int(txn.commit())

        revision = self._store.run(delete_keys)
        self.table.remove(lease_id)
        return revision

    def time_to_live(self, lease_id: int, keys: bool) -> pb.LeaseTimeToLiveResponse:
        """etcd's LeaseTimeToLive: TTL -1 for a lease that is gone (etcd answers so, not an error)."""
        record = self.table.get(lease_id)
        now = self.table.now_ms()
        if record is None or record.expire_ms <= now:
            return pb.LeaseTimeToLiveResponse(ID=lease_id, TTL=-1)
        response = pb.LeaseTimeToLiveResponse(ID=lease_id, TTL=record.remaining_s(now), grantedTTL=record.ttl)
        if keys:
            response.keys.extend(self.attached_keys(lease_id))
        return response

    def sweep(self) -> list[int]:
        """Revoke every lease whose deadline has passed; the ids revoked."""
        self.table.forget_tombstones()
        revoked = []
        for lease_id in self.table.expired():
            try:
                self.revoke(lease_id)
            except errors.EtcdLeaseNotFoundError:
                continue  # another server swept it first
            revoked.append(lease_id)
        return revoked


class LeaseServicer(rpc_pb2_grpc.LeaseServicer):
    def __init__(self, context: EtcdContext, leases: Leases) -> None:
        self._context = context
        self._leases = leases
        self._streams = OpenStreams(context)

    def _header(self, revision: int | None = None) -> pb.ResponseHeader:
        return self._context.header(self._context.store.seq if revision is None else revision)

    @unary
    async def LeaseGrant(self, request: pb.LeaseGrantRequest, context: grpc.aio.ServicerContext) -> pb.LeaseGrantResponse:
        record = await self._context.blocking(self._leases.grant, request.TTL, request.ID)
        return pb.LeaseGrantResponse(header=self._header(), ID=record.id, TTL=record.ttl)

    @unary
    async def LeaseRevoke(
        self, request: pb.LeaseRevokeRequest, context: grpc.aio.ServicerContext
    ) -> pb.LeaseRevokeResponse:
        revision = await self._context.blocking(self._leases.revoke, request.ID)
        return pb.LeaseRevokeResponse(header=self._header(revision))

    async def LeaseKeepAlive(
        self, request_iterator: AsyncIterator[pb.LeaseKeepAliveRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.LeaseKeepAliveResponse]:
        try:
            async for request in self._streams.until_stopped(request_iterator):
                ttl = await self._context.blocking(self._leases.keepalive, request.ID)
                yield pb.LeaseKeepAliveResponse(header=self._header(), ID=request.ID, TTL=ttl)
        except (errors.EtcdError, ValueError, TypeError, StoreError) as exc:
            await abort_with(context, exc)

    @unary
    async def LeaseTimeToLive(
        self, request: pb.LeaseTimeToLiveRequest, context: grpc.aio.ServicerContext
    ) -> pb.LeaseTimeToLiveResponse:
        response = await self._context.blocking(self._leases.time_to_live, request.ID, request.keys)
        response.header.CopyFrom(self._header())
        return response

    @unary
    async def LeaseLeases(
        self, request: pb.LeaseLeasesRequest, context: grpc.aio.ServicerContext
    ) -> pb.LeaseLeasesResponse:
        ids = await self._context.blocking(self._leases.table.ids)
        return pb.LeaseLeasesResponse(header=self._header(), leases=[pb.LeaseStatus(ID=i) for i in ids])


async def sweep_forever(context: EtcdContext, leases: Leases) -> None:
    """Turn expired leases into deletes until cancelled (the server's stop)."""
    while True:
        try:
            await context.blocking(leases.sweep)
        except StoreError as exc:
            _log.warning("lease sweep failed, retrying: %s", exc)
        await asyncio.sleep(SWEEP_INTERVAL_S)


def add_to_server(context: EtcdContext, server: grpc.aio.Server) -> None:
    leases = Leases(context.keyspace, LeaseTable(context.store.objects))
    context.keyspace.leases = leases
    rpc_pb2_grpc.add_LeaseServicer_to_server(LeaseServicer(context, leases), server)  # type: ignore[no-untyped-call]
    task = asyncio.get_running_loop().create_task(sweep_forever(context, leases))

    async def stop() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    context.after_stop.append(stop)
