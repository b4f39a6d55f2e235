"""``GET /kv/v1/watch``: a store's changes as a stream of server-sent events.

``?prefix=`` (unpadded base64url; default every key), ``?start_revision=N``
(replay every change with a revision at or above N, then follow; default:
changes after the current revision; a key's revision works, as in etcd),
``?end_revision=N`` (stop once every change up to committed revision N is
sent). A reconnecting client sends ``Last-Event-ID`` (or ``start_revision=``
the last id + 1) and misses nothing: the events come from the version chain
itself (:mod:`kvstore.watch`), so a server restart, or a different server on
the same store, replays them from the same revisions. (A numeric
``Last-Event-ID``, from before ids were revisions, is the version it was.) Each message carries
the events of one lakekv version (one group commit), in commit order; its id
is ``r`` and the revision it is complete through::

    id: r57
    data: {"revision": 57, "version": 42, "events": [{"revision": 57, "seq": 57, "key": b64, "value": b64, "kind": "put"}]}

The stream opens with the comments ``: next <version>`` and
``: next-revision <revision>``: where it starts, where a client resumes if
the connection drops before any event; a stream that reached its end closes
with the same two comments. ``kind`` is ``put``, ``delete`` (value null) or
``expire`` (a TTL ran out; its revision is the expired put's). A comment line
(``: keepalive``) comes every :data:`KEEPALIVE_S` when nothing else does. A
start below the compaction floor (``POST /kv/v1/compact``) or no longer
retained is 410 ``SnapshotTooOldError`` (etcd's "required revision has been
compacted") before the stream begins. A storage error once the stream is
under way ends the stream with its ``: next`` comments, where the client
resumes; a revision that is gone then gets its 410.

Deprecated: ``?start=``/``?end=`` take a lakekv version (an internal grouping
of commits) and still mean one; ``"version"`` in messages and ``: next`` are
kept for those clients. Each excludes its revision form.

A watch wakes at once when this server applies a version (its own commits,
or its follower catching up) and reads it from memory on the event loop
(:meth:`kvstore.watch.Watch.poll_applied`); other processes' commits are
found by probing for the next root file every :data:`POLL_S`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from itertools import groupby
from typing import Final

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import StreamingResponse

from kvstore import Store
from kvstore.errors import StoreError
from kvstore.watch import EXPIRE_EVENT, Watch, WatchEvent
from service.codec import KV_PREFIX, b64encode, client_key, query_key, query_number
from service.errors import ApiError
from service.kv_api import KvState
from service.routing import route

_log = logging.getLogger("lakekv.serve")

POLL_S: Final = 0.1
KEEPALIVE_S: Final = 15.0


def _start(request: Request) -> tuple[int | None, int | None]:
    """``(start_revision, start version)``: at most one is given (``start=``, a version, is deprecated)."""
    start_revision: int | None = query_number(request, "start_revision", int)
    start: int | None = query_number(request, "start", int)
    if start_revision is not None and start is not None:
        raise ApiError(400, "ValueError", "start_revision and start exclude each other (start, a version, is deprecated)")
    last_id = request.headers.get("last-event-id")
    if last_id is not None:
        if start_revision is not None or start is not None:
            raise ApiError(400, "ValueError", "start_revision (or start) and Last-Event-ID exclude each other")
        text = last_id.strip()
        if text.startswith("r") and text[1:].isdigit():
            start_revision = int(text[1:]) + 1
        elif text.isdigit():
            # An id from before ids were revisions: a version. Unambiguous (ids are "r<revision>" now),
            # so a client reconnecting across the upgrade resumes where it was.
            start = int(text) + 1
        else:
            raise ApiError(400, "ValueError", f"Last-Event-ID must be a message's id (r<revision>), got {last_id!r}")
    if start_revision is not None and start_revision < 0:
        raise ApiError(400, "ValueError", f"start_revision must be a revision >= 0, got {start_revision}")
    if start is not None and start < 0:
        raise ApiError(400, "ValueError", f"start must be a version >= 0, got {start}")
    return start_revision, start


def _end(request: Request, store: Store, start: int | None) -> tuple[int | None, int | None]:
    """``(end version, last revision to report)`` from ``end_revision=`` or the deprecated ``end=`` (a version)."""
    end_revision: int | None = query_number(request, "end_revision", int)
    end: int | None = query_number(request, "end", int)
    if end_revision is not None and end is not None:
        raise ApiError(400, "ValueError", "end_revision and end exclude each other (end, a version, is deprecated)")
    if end is not None:
        if end < 0 or (start is not None and end < start):
            raise ApiError(400, "ValueError", f"end must be a version >= start, got {end}")
        return end, None
    if end_revision is None:
        return None, None
    if end_revision < 0:
        raise ApiError(400, "ValueError", f"end_revision must be a revision >= 0, got {end_revision}")
    store.refresh()
    if end_revision > store.seq:
        # Its version is not known before it is committed: refuse rather than end at a guess.
        raise ApiError(400, "ValueError", f"end_revision {end_revision} is not committed yet (newest: {store.seq})")
    with store.at(revision=end_revision) as snapshot:  # the version holding it (410 if compacted)
        return snapshot.version, end_revision


def _message(watcher: Watch, version: int, events: list[WatchEvent]) -> str:
    # The id is a revision: every change up to it has been sent, so Last-Event-ID resumes right after it.
    revision = watcher.revision_through(version)
    body = {
        "revision": revision,
        "version": version,
        "events": [
            {"revision": e.seq, "seq": e.seq, "key": b64encode(client_key(e.key)),
             "value": None if e.value is None else b64encode(e.value), "kind": e.kind}
            for e in events
        ],
    }
    return f"id: r{revision}\ndata: {json.dumps(body, separators=(',', ':'))}\n\n"


def _messages(watcher: Watch, events: list[WatchEvent], last_revision: int | None) -> str:
    if last_revision is not None:
        events = [e for e in events if e.seq <= last_revision or e.kind == EXPIRE_EVENT]
    return "".join(_message(watcher, version, list(group))
                   for version, group in groupby(events, key=lambda e: e.version))


def _next(watcher: Watch) -> str:
    """Where the stream is: ``next-revision`` for ``start_revision``, and the deprecated version for ``start``."""
    return f": next {watcher.next_version}\n: next-revision {watcher.next_revision}\n\n"


async def watch(request: Request) -> StreamingResponse:
    state: KvState = request.app.state.kv
    prefix = query_key(request, "prefix") or b""
    start_revision, start = _start(request)
    store = state.store
    end, last_revision = await run_in_threadpool(_end, request, store, start)

    def open_watch() -> Watch:
        if start_revision is not None:
            return store.watch(KV_PREFIX + prefix, None, end, POLL_S, start_revision=start_revision)
        # The deprecated version start (or none): Store.watch refuses a version below the compaction floor.
        return store.watch(KV_PREFIX + prefix, start, end, POLL_S)

    watcher: Watch = await run_in_threadpool(open_watch)
    start_comment = _next(watcher)
    try:
        first = await run_in_threadpool(watcher.poll)  # a start no longer retained fails here, as a 410
    except BaseException:
        watcher.close()
        raise
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    def wake_up(version: int) -> None:
        loop.call_soon_threadsafe(wake.set)

    unsubscribe = store.subscribe(wake_up)

    async def stream() -> AsyncIterator[str]:
        try:
            # Where this stream starts, for a client that gave no start and must
            # resume from here if the connection drops before the first event.
            yield start_comment
            if first:
                yield _messages(watcher, first, last_revision)
            quiet_s = 0.0
            probe = True  # read storage on this pass: another process may have committed
            while not watcher.closed:
                wake.clear()
                # This server's own versions come from memory, on the loop: no
                # worker-thread hop between a commit and its event.
                events = watcher.poll_applied()
                if events is None and (probe or watcher.next_version <= store.version):
                    try:
                        events = await run_in_threadpool(watcher.poll)
                    except StoreError as exc:
                        # Not a bug: storage failed, or retention deleted a version this
                        # stream had yet to send. End the stream where it is: the client
                        # resumes from there, and gets a 410 if that version is gone.
                        _log.warning("watch stream ended at version %d: %s", watcher.next_version, exc)
                        break
                probe = False
                if events:
                    quiet_s = 0.0
                    yield _messages(watcher, events, last_revision)
                    continue
                wait_s = min(watcher.wait_s, KEEPALIVE_S - quiet_s)
                try:
                    await asyncio.wait_for(wake.wait(), timeout=max(wait_s, 0.0))
                except TimeoutError:
                    probe = True
                    quiet_s += wait_s
                    if quiet_s >= KEEPALIVE_S:
                        quiet_s = 0.0
                        yield ": keepalive\n\n"
            # Past ``end`` (or stopped by a storage error): say where the stream
            # is, or a client whose last versions had no event under its prefix
            # would reconnect from where its last event left it.
            yield _next(watcher)
        finally:
            unsubscribe()
            watcher.close()

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )


ROUTES = [route("/kv/v1/watch", watch, "GET", params=("prefix", "start_revision", "end_revision", "start", "end"))]
