"""Read-ahead of the Spark read path (catalog/spark/readahead.py): order, errors, early close, overlap."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from catalog.spark.readahead import read_ahead


def test_items_come_in_order_and_all_of_them() -> None:
    assert list(read_ahead(iter(range(1000)))) == list(range(1000))
    assert list(read_ahead(iter([]))) == []


def test_the_next_item_is_computed_on_another_thread_while_the_caller_holds_one() -> None:
    caller = threading.get_ident()
    second_started = threading.Event()
    producers: list[int] = []

    def source() -> Iterator[int]:
        producers.append(threading.get_ident())
        yield 1
        second_started.set()
        producers.append(threading.get_ident())
        yield 2

    items = read_ahead(source())
    assert next(items) == 1
    # The caller has not asked for item 2, yet it is being produced.
    assert second_started.wait(timeout=10)
    assert next(items) == 2
    assert list(items) == []
    assert caller not in producers


def test_an_error_of_the_source_comes_out_at_its_position() -> None:
    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("bad file")

    seen = []
    with pytest.raises(ValueError, match="bad file"):
        for item in read_ahead(source()):
            seen.append(item)
    assert seen == [1, 2]


def test_closing_early_stops_the_source_after_at_most_one_item_ahead() -> None:
    produced: list[int] = []
    closed = threading.Event()

    def source() -> Iterator[int]:
        try:
            for i in range(100):
                produced.append(i)
                yield i
        finally:
            closed.set()

    items = read_ahead(source())
    assert next(items) == 0
    items.close()
    assert closed.is_set()  # closed before close() returned
    assert produced in ([0], [0, 1])
    assert not any(t.name.startswith("read-ahead") for t in threading.enumerate())
