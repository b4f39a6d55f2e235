"""The shared retry loop and transaction scope (kvstore.retrying), on stand-in transactions."""

from __future__ import annotations

import pytest

from kvstore.errors import ConflictError, SnapshotTooOldError
from kvstore.retrying import run_with_retries, transaction_scope


class FakeTxn:
    def __init__(self, commit_error: BaseException | None = None) -> None:
        self.state = "active"
        self.commit_error = commit_error

    def commit(self) -> None:
        if self.commit_error is not None:
            self.state = "aborted" if isinstance(self.commit_error, (ConflictError, SnapshotTooOldError)) else "failed"
            raise self.commit_error
        self.state = "committed"

    def rollback(self) -> None:
        if self.state == "active":
            self.state = "rolled back"


def _begins(*commit_errors: BaseException | None) -> tuple[list[tuple[bool, FakeTxn]], object]:
    started: list[tuple[bool, FakeTxn]] = []
    errors = list(commit_errors)

    def begin(fresh: bool) -> FakeTxn:
        txn = FakeTxn(errors.pop(0) if errors else None)
        started.append((fresh, txn))
        return txn

    return started, begin


def test_conflicts_and_aborted_snapshot_errors_are_retried_with_fresh_transactions() -> None:
    started, begin = _begins(ConflictError("x"), SnapshotTooOldError("y"), None)
    assert run_with_retries(begin, lambda txn: "done", 5, 0, 0) == "done"
    assert [fresh for fresh, _ in started] == [False, True, True]
    assert [txn.state for _, txn in started] == ["aborted", "aborted", "committed"]


def test_the_last_conflict_is_raised_and_other_errors_are_not_retried() -> None:
    started, begin = _begins(ConflictError("a"), ConflictError("b"))
    with pytest.raises(ConflictError, match="b"):
        run_with_retries(begin, lambda txn: None, 1, 0, 0)
    assert len(started) == 2

    started, begin = _begins()

    def body(txn: FakeTxn) -> None:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        run_with_retries(begin, body, 5, 0, 0)
    assert [txn.state for _, txn in started] == ["rolled back"]


def test_a_snapshot_error_that_did_not_abort_the_commit_is_not_retried() -> None:
    started, begin = _begins()

    def body(txn: FakeTxn) -> None:
        raise SnapshotTooOldError("from a read, not from the commit")

    with pytest.raises(SnapshotTooOldError):
        run_with_retries(begin, body, 5, 0, 0)
    assert len(started) == 1


@pytest.mark.parametrize("retries", [-1, True, 1.5, "3"])
def test_bad_retries_are_refused(retries: object) -> None:
    with pytest.raises(ValueError, match="retries"):
        run_with_retries(lambda fresh: FakeTxn(), lambda txn: None, retries, 0, 0)  # type: ignore[arg-type]


def test_scope_commits_on_exit_and_rolls_back_on_an_exception() -> None:
    with transaction_scope(FakeTxn()) as txn:
        pass
    assert txn.state == "committed"
    with pytest.raises(RuntimeError):
        with transaction_scope(FakeTxn()) as txn:
            raise RuntimeError("boom")
    assert txn.state == "rolled back"
