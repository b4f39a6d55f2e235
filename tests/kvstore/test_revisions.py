"""One revision model (kvstore.revisions): reads, scans and watches at a revision, and the compaction floor."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvstore
from kvstore import SnapshotTooOldError, WriteBatch
from kvstore.objstore.memory import MemoryStore
from maintenance_util import QUIET

KEYS = [b"a", b"b", b"c"]
# Rounds of commits submitted together (so that several commits share one version), each a
# list of (key, value or None for a delete).
rounds = st.lists(
    st.lists(st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=3))),
                      min_size=1, max_size=2), min_size=1, max_size=4),
    min_size=1, max_size=5,
)


def apply_rounds(db: kvstore.Store, plan: list) -> dict[int, dict[bytes, tuple[bytes, int]]]:
    """Commit ``plan``; return the model: revision -> {key: (value, revision that wrote it)}."""
    model: dict[int, dict[bytes, tuple[bytes, int]]] = {0: {}}
    for batch_ops in plan:
        futures: list[tuple[Future[int] | int, list]] = []
        for ops in batch_ops:
            batch = WriteBatch()
            for key, value in ops:
                batch.delete(key) if value is None else batch.put(key, value)
            future = db.submit_write(batch)
            futures.append((future if future is not None else db.write(batch), ops))
        for future, ops in futures:
            seq = future.result() if isinstance(future, Future) else future
            view = dict(model[max(model)])
            for key, value in ops:
                if value is None:
                    view.pop(key, None)
                else:
                    view[key] = (value, seq)
            model[seq] = view
    return model


@settings(max_examples=25, deadline=None)
@given(plan=rounds)
def test_reads_and_watches_at_every_revision_match_the_model(plan: list) -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        model = apply_rounds(db, plan)
        assert sorted(model) == list(range(db.seq + 1))  # one revision per commit, dense
        for revision, view in model.items():
            with db.at(revision=revision) as snapshot:
                assert snapshot.seq == revision
                assert list(snapshot.scan_with_revision()) == [(k, v, r) for k, (v, r) in sorted(view.items())]
            replay = [(e.seq, e.key) for e in db.watch(start_revision=revision, end=db.version) if e.kind != "expire"]
            assert [seq for seq, _ in replay] == sorted(seq for seq, _ in replay)
            assert all(seq >= revision for seq, _ in replay)
            assert {seq for seq, _ in replay} == {seq for seq in model if seq >= revision and seq > 0}
        assert list(db.scan_with_revision()) == [(k, v, r) for k, (v, r) in sorted(model[db.seq].items())]


def test_a_revision_not_yet_committed_is_refused_for_reads_and_followed_by_watches() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        db.put(b"k", b"1")
        with pytest.raises(ValueError, match="does not exist yet"):
            db.at(revision=db.seq + 1)
        watch = db.watch(start_revision=db.seq + 1)
        assert watch.poll() == []
        seq = db.put(b"k", b"2")
        assert [(e.seq, e.value) for e in watch.poll()] == [(seq, b"2")]
        with pytest.raises(TypeError):
            db.at(revision="3")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="not both"):
            db.watch(start=1, start_revision=1)


def test_the_compaction_floor_is_shared_by_every_handle_and_only_rises(tmp_path: Path) -> None:
    with kvstore.open(str(tmp_path), **QUIET) as a, kvstore.open(str(tmp_path), **QUIET) as b:
        for value in (b"1", b"2", b"3"):
            a.put(b"k", value)
        assert b.compacted_revision() == 0
        assert a.compact_revisions(2) == 2
        assert b.compacted_revision() == 2  # no commit: the floor is not a revision
        assert a.seq == 3
        with pytest.raises(SnapshotTooOldError, match="compacted"):
            b.at(revision=1)
        with pytest.raises(SnapshotTooOldError, match="compacted"):
            b.watch(start_revision=1)
        with b.at(revision=2) as snapshot:
            assert snapshot.get(b"k") == b"2"
        with pytest.raises(SnapshotTooOldError, match="already compacted"):
            b.compact_revisions(2)
        with pytest.raises(ValueError, match="does not exist yet"):
            b.compact_revisions(4)
        with pytest.raises(TypeError):
            b.compact_revisions(2.5)  # type: ignore[arg-type]
        assert a.compacted_revision() == 2


def test_a_watch_from_a_version_below_the_compaction_floor_is_refused_and_knows_its_revision() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        first = db.put(b"k", b"1")
        old = db.version
        second = db.put(b"k", b"2")
        newer = db.version
        with db.watch(b"k", start=newer, end=newer) as watch:
            assert watch.next_revision == second  # a version start knows the revision it starts at
            assert [(e.seq, e.value) for e in watch] == [(second, b"2")]
            assert watch.next_revision == second + 1
        db.compact_revisions(second)
        with pytest.raises(SnapshotTooOldError, match="compacted"):
            db.watch(b"k", start=old)  # its changes (revision `first`) lie below the floor
        assert first < second
        with db.watch(b"k", start=newer, end=newer) as watch:  # at the floor: fine
            assert [e.seq for e in watch] == [second]
