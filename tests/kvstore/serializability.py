"""A serializability checker for recorded transaction histories.

Every committed transaction is recorded with what it read (point reads and
scan results, from its snapshot), what it wrote, and its position in the
serial order the store claims: the commit seq for writers, and the start seq
for read-only transactions (their snapshot). Replaying the writers in seq
order against a plain dict must reproduce every recorded read at that point;
any mismatch is a serializability violation (e.g. write skew, a lost update,
a phantom).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TxnRecord:
    """One committed transaction as the workload saw it."""

    seq: int  # commit seq, or start seq for a read-only transaction
    read_only: bool
    reads: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    scans: list[tuple[bytes | None, bytes | None, list[tuple[bytes, bytes]]]] = field(default_factory=list)
    writes: dict[bytes, bytes | None] = field(default_factory=dict)
    label: str = ""


@dataclass(frozen=True)
class Violation:
    label: str
    seq: int
    what: str


def check(records: list[TxnRecord], initial: dict[bytes, bytes] | None = None) -> list[Violation]:
    """Replay ``records`` in their claimed serial order; return every mismatch.

    Writers must have unique seqs; a read-only transaction at seq ``s`` is
    placed after the writer of ``s``.
    """
    writer_seqs = [r.seq for r in records if not r.read_only]
    if len(writer_seqs) != len(set(writer_seqs)):
        raise ValueError("two committed writers claim the same seq")
    order = sorted(records, key=lambda r: (r.seq, r.read_only))
    model: dict[bytes, bytes] = dict(initial or {})
    violations: list[Violation] = []
    for record in order:
        if record.read_only:
            # Place it after the writer of its snapshot seq: nothing to do, the
            # sort already did. Fall through to the read checks.
            pass
        for key, seen in record.reads:
            if model.get(key) != seen:
                violations.append(Violation(record.label, record.seq, f"read {key!r}={seen!r}, serial state has {model.get(key)!r}"))
        for start, end, seen_rows in record.scans:
            expected = sorted(
                (k, v) for k, v in model.items() if (start is None or k >= start) and (end is None or k < end)
            )
            if expected != seen_rows:
                violations.append(Violation(record.label, record.seq, f"scan [{start!r}, {end!r}) differs from serial state"))
        for key, value in record.writes.items():
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value
    return violations


def test_checker_finds_write_skew() -> None:
    # Both read x=1,y=1 at seq 0 and each wrote one of them: not serializable.
    t1 = TxnRecord(1, False, reads=[(b"x", b"1"), (b"y", b"1")], writes={b"x": b"0"}, label="t1")
    t2 = TxnRecord(2, False, reads=[(b"x", b"1"), (b"y", b"1")], writes={b"y": b"0"}, label="t2")
    violations = check([t1, t2], {b"x": b"1", b"y": b"1"})
    assert [v.label for v in violations] == ["t2"]


def test_checker_accepts_a_serial_history() -> None:
    t1 = TxnRecord(1, False, reads=[(b"x", None)], writes={b"x": b"a"})
    ro = TxnRecord(1, True, reads=[(b"x", b"a")], scans=[(None, None, [(b"x", b"a")])])
    t2 = TxnRecord(2, False, reads=[(b"x", b"a")], writes={b"x": None})
    assert check([t2, ro, t1]) == []
