"""Paging through a namespace's tables and views (catalog/paging.py, ``LakeTree.list_tables``).

* 100,000 real tables, made by one transaction, paged: every table exactly
  once, in order, no page over its size, and the same names as one full
  listing;
* a model of a namespace changed between pages (hypothesis): a table that
  existed for the whole listing appears exactly once and in order, none
  appears twice, and views never appear among tables;
* a page reads only its own keys, not the namespace's (a counting reader);
* bad sizes and tokens are ``TypeError``/``ValueError`` naming what was wrong.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import catalog
from catalog.access import CatalogReader
from catalog.paging import NamePage
from catalog.records import TABLE

INTS = pa.schema([("x", pa.int64())])
MANY = 100_000
_stores = itertools.count()


def _fresh() -> catalog.Lakehouse:
    return catalog.open(f"memory://tree-paging-{next(_stores)}", poll_interval_s=0)


def all_pages(session: Any, namespace: str, page_size: int, kind: str = "tables") -> Iterator[NamePage]:
    listing = getattr(session, f"list_{kind}")
    token = None
    while True:
        page = listing(namespace, page_size=page_size, page_token=token)
        yield page
        token = page.next_page_token
        if token is None:
            return


@pytest.fixture(scope="module")
def big() -> Iterator[tuple[catalog.Lakehouse, list[str]]]:
    """A namespace of 100,000 native tables (created in one transaction) and a view among them."""
    lake = _fresh()
    lake.create_namespace("big")
    lake.create_namespace("other")
    expected = [f"big.t{i:06d}" for i in range(MANY)]
    with lake.transaction() as tx:
        for name in expected:
            tx.create_table(name, INTS)
        tx.create_table("other.t000001", INTS)  # a neighbouring namespace's table never leaks in
        tx.create_view("big.t050000v", "select 1")  # a view between two tables
    try:
        yield lake, expected
    finally:
        lake.close()


def test_paging_over_a_hundred_thousand_tables_returns_each_once_in_order(big: tuple[catalog.Lakehouse, list[str]]) -> None:
    lake, expected = big
    seen: list[str] = []
    pages = 0
    for page in all_pages(lake, "big", 997):  # not a divisor: the last page is short
        assert isinstance(page, list) and 1 <= len(page) <= 997
        seen.extend(page)
        pages += 1
    assert seen == expected  # each exactly once, in order, the view and other.t000001 not among them
    assert pages == -(-MANY // 997)
    everything = lake.list_tables("big")
    assert everything == expected and everything.next_page_token is None
    assert lake.list_views("big") == ["big.t050000v"]


def test_a_token_without_a_size_lists_the_rest(big: tuple[catalog.Lakehouse, list[str]]) -> None:
    lake, expected = big
    first = lake.list_tables("big", page_size=MANY - 3)
    assert first == expected[:-3] and first.next_page_token is not None
    rest = lake.list_tables("big", page_token=first.next_page_token)
    assert rest == expected[-3:] and rest.next_page_token is None
    exact = lake.list_tables("big", page_size=MANY)
    assert exact == expected and exact.next_page_token is None  # no empty page after a full one


class CountingKV:
    """A read view that counts the rows its scans yield."""

    def __init__(self, kv: Any) -> None:
        self.kv = kv
        self.rows = 0

    def get(self, key: bytes) -> bytes | None:
        return self.kv.get(key)

    def scan(self, **bounds: Any) -> Iterator[tuple[bytes, bytes]]:
        for row in self.kv.scan(**bounds):
            self.rows += 1
            yield row


def test_a_page_reads_only_its_own_keys(big: tuple[catalog.Lakehouse, list[str]]) -> None:
    lake, expected = big
    with lake.context.store.snapshot() as snap:
        counting = CountingKV(snap)
        names, more = CatalogReader(counting).entry_names(("big",), TABLE, after="t049990", limit=20)
    assert more and names == [n.split(".")[1] for n in expected[49_991:50_011]]
    assert counting.rows == 22  # 20 tables, the view among them, and one more to know another follows


@pytest.mark.parametrize("kind", ["tables", "views"])
def test_pages_inside_a_transaction_and_at_a_past_version(kind: str) -> None:
    lake = _fresh()
    try:
        lake.create_namespace("ns")
        make = (lambda s, n: s.create_table(n, INTS)) if kind == "tables" else (lambda s, n: s.create_view(n, "select 1"))
        for i in range(5):
            make(lake, f"ns.a{i}")
        version = lake.version
        with lake.transaction() as tx:
            for i in range(5):
                make(tx, f"ns.b{i}")
            inside = [n for page in all_pages(tx, "ns", 3, kind) for n in page]
        assert inside == [f"ns.a{i}" for i in range(5)] + [f"ns.b{i}" for i in range(5)]
        with lake.at(version=version) as past:
            assert [n for page in all_pages(past, "ns", 2, kind) for n in page] == [f"ns.a{i}" for i in range(5)]
    finally:
        lake.close()


@settings(max_examples=40, deadline=None)
@given(
    initial=st.sets(st.integers(0, 60), max_size=40),
    views=st.sets(st.integers(0, 60), max_size=10),
    page_size=st.integers(1, 7),
    changes=st.lists(st.tuples(st.booleans(), st.integers(0, 60)), max_size=12),
)
def test_tables_changed_between_pages_never_repeat_and_survivors_are_never_skipped(
    initial: set[int], views: set[int], page_size: int, changes: list[tuple[bool, int]]
) -> None:
    lake = _fresh()
    try:
        lake.create_namespace("ns")
        with lake.transaction() as tx:
            for i in sorted(initial):
                tx.create_table(f"ns.t{i:02d}", INTS)
            for i in sorted(views - initial):
                tx.create_view(f"ns.t{i:02d}", "select 1")
        tables, ever, survivors = set(initial), set(initial), set(initial)
        pending = list(changes)
        seen: list[str] = []
        token = None
        while True:
            page = lake.list_tables("ns", page_size=page_size, page_token=token)
            assert len(page) <= page_size
            seen.extend(page)
            token = page.next_page_token
            if token is None:
                break
            if pending:  # between two pages: create or drop one table
                create, i = pending.pop(0)
                if create and i not in tables and (i in initial or i not in views):
                    lake.create_table(f"ns.t{i:02d}", INTS)
                    tables.add(i)
                    ever.add(i)
                elif not create and i in tables:
                    lake.drop_table(f"ns.t{i:02d}")
                    tables.discard(i)
                    survivors.discard(i)
        assert seen == sorted(seen) and len(seen) == len(set(seen))  # in order, none twice
        assert {f"ns.t{i:02d}" for i in survivors} <= set(seen)  # none that lived throughout is skipped
        assert set(seen) <= {f"ns.t{i:02d}" for i in ever}  # only tables, never a view
    finally:
        lake.close()


def test_bad_page_sizes_and_tokens_are_refused_naming_what_was_wrong(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("ns")
    lake.create_namespace("ms")
    for i in range(3):
        lake.create_table(f"ns.t{i}", INTS)
        lake.create_view(f"ns.v{i}", "select 1")
        lake.create_table(f"ms.t{i}", INTS)
    version = lake.version
    for size in (0, -1):
        with pytest.raises(ValueError, match="page_size must be at least 1"):
            lake.list_tables("ns", page_size=size)
    for size in ("2", 2.0, True):
        with pytest.raises(TypeError, match="page_size"):
            lake.list_tables("ns", page_size=size)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="page_token"):
        lake.list_tables("ns", page_size=2, page_token=5)  # type: ignore[arg-type]
    for garbage in ("%%%", "abc", "W10", "WyJ0YWJsZSIsWyJucyJdLCIuLiJd", "WyJ0YWJsZSIsWyJucyJdXQ"):
        with pytest.raises(ValueError, match="page_token"):
            lake.list_tables("ns", page_size=2, page_token=garbage)
    token = lake.list_tables("ns", page_size=1).next_page_token
    assert token is not None
    with pytest.raises(ValueError, match="namespace 'ns', not of the tables of 'ms'"):
        lake.list_tables("ms", page_size=1, page_token=token)
    with pytest.raises(ValueError, match="tables of namespace 'ns', not of the views"):
        lake.list_views("ns", page_size=1, page_token=token)
    with pytest.raises(catalog.NoSuchNamespaceError):
        lake.list_tables("none", page_size=1)
    assert lake.list_tables("ns", page_size=2, page_token="") == ["ns.t0", "ns.t1"]  # "": the first page
    assert lake.version == version  # nothing changed
