"""The catalog against a model: namespaces, tables, appends, overwrites, deletes,
renames, drops, compaction, time travel and reopen (hypothesis stateful test)."""

from __future__ import annotations

import itertools
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import catalog
from catalog import errors

SCHEMA = pa.schema([("id", pa.int64()), ("g", pa.string())])
_lakes = itertools.count()

ids = st.lists(st.integers(0, 30), min_size=0, max_size=6)
groups = st.sampled_from(["a", "b", "c"])
table_names = st.sampled_from(["n1.t1", "n1.t2", "n2.t1", "n2.sub.t3"])


def _data(values: list[int], g: str) -> pa.Table:
    return pa.table({"id": pa.array(values, pa.int64()), "g": [g] * len(values)}, schema=SCHEMA)


class CatalogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.url = f"memory://catalog-model-{next(_lakes)}"
        self.lake = catalog.open(self.url, poll_interval_s=0, background_maintenance=False)
        self.namespaces: set[str] = set()
        self.tables: dict[str, Counter] = {}  # name -> multiset of (id, g)
        self.versions: list[tuple[int, dict[str, Counter]]] = []

    def teardown(self) -> None:
        self.lake.close()

    def _remember(self, version: int | None) -> None:
        if version is not None:
            self.versions.append((version, {k: Counter(v) for k, v in self.tables.items()}))

    @rule(ns=st.sampled_from(["n1", "n2", "n2.sub"]))
    def create_namespace(self, ns: str) -> None:
        parent = ns.rsplit(".", 1)[0] if "." in ns else None
        if ns in self.namespaces:
            try:
                self.lake.create_namespace(ns)
                raise AssertionError("duplicate namespace accepted")
            except errors.NamespaceAlreadyExistsError:
                return
        if parent is not None and parent not in self.namespaces:
            try:
                self.lake.create_namespace(ns)
                raise AssertionError("namespace without parent accepted")
            except errors.NoSuchNamespaceError:
                return
        version = self.lake.create_namespace(ns)
        self.namespaces.add(ns)
        self._remember(version)

    @rule(name=table_names, partitioned=st.booleans())
    def create_table(self, name: str, partitioned: bool) -> None:
        ns = name.rsplit(".", 1)[0]
        expected: type[Exception] | None = None
        if ns not in self.namespaces:
            expected = errors.NoSuchNamespaceError
        elif name in self.tables:
            expected = errors.TableAlreadyExistsError
        try:
            self.lake.create_table(name, SCHEMA, partition_by=["g"] if partitioned else None)
        except Exception as exc:  # noqa: BLE001 - compared with the model's expectation
            assert expected is not None and isinstance(exc, expected), exc
            return
        assert expected is None
        self.tables[name] = Counter()
        self._remember(self.lake.version)

    @precondition(lambda self: self.tables)
    @rule(data=st.data(), values=ids, g=groups)
    def append(self, data: st.DataObject, values: list[int], g: str) -> None:
        name = data.draw(st.sampled_from(sorted(self.tables)))
        version = self.lake.load_table(name).append(_data(values, g))
        self.tables[name].update((v, g) for v in values)
        self._remember(version)

    @precondition(lambda self: self.tables)
    @rule(data=st.data(), values=ids, g=groups, filtered=st.booleans())
    def overwrite(self, data: st.DataObject, values: list[int], g: str, filtered: bool) -> None:
        name = data.draw(st.sampled_from(sorted(self.tables)))
        t = self.lake.load_table(name)
        if filtered:
            version = t.overwrite(_data(values, g), filter=pc.field("g") == g)
            self.tables[name] = Counter({k: n for k, n in self.tables[name].items() if k[1] != g})
        else:
            version = t.overwrite(_data(values, g))
            self.tables[name] = Counter()
        self.tables[name].update((v, g) for v in values)
        self._remember(version)

    @precondition(lambda self: self.tables)
    @rule(data=st.data(), below=st.integers(0, 30))
    def delete(self, data: st.DataObject, below: int) -> None:
        name = data.draw(st.sampled_from(sorted(self.tables)))
        version = self.lake.load_table(name).delete(pc.field("id") < below)
        self.tables[name] = Counter({k: n for k, n in self.tables[name].items() if k[0] >= below})
        self._remember(version)

    @precondition(lambda self: self.tables)
    @rule(data=st.data(), target_name=table_names)
    def rename(self, data: st.DataObject, target_name: str) -> None:
        name = data.draw(st.sampled_from(sorted(self.tables)))
        ns = target_name.rsplit(".", 1)[0]
        if ns not in self.namespaces or target_name in self.tables:
            try:
                self.lake.rename_table(name, target_name)
                raise AssertionError("impossible rename accepted")
            except (errors.NoSuchNamespaceError, errors.TableAlreadyExistsError):
                return
        version = self.lake.rename_table(name, target_name)
        self.tables[target_name] = self.tables.pop(name)
        self._remember(version)

    @precondition(lambda self: self.tables)
    @rule(data=st.data())
    def drop(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.tables)))
        version = self.lake.drop_table(name)
        del self.tables[name]
        self._remember(version)

    @precondition(lambda self: self.tables)
    @rule(data=st.data())
    def compact(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.tables)))
        before = len(self.lake.load_table(name).files())
        report = self.lake.compact_table(name, target_file_bytes=1 << 20)
        after = len(self.lake.load_table(name).files())
        assert after == before - report.files_removed + report.files_added
        self._remember(report.version)

    @rule()
    def reopen(self) -> None:
        self.lake.close()
        self.lake = catalog.open(self.url, poll_interval_s=0, background_maintenance=False)

    @precondition(lambda self: self.versions)
    @rule(data=st.data())
    def time_travel(self, data: st.DataObject) -> None:
        version, tables = data.draw(st.sampled_from(self.versions))
        past = self.lake.at(version=version)
        try:
            for name, rows in tables.items():
                got = past.load_table(name).scan().to_arrow()
                assert Counter(zip(got.column("id").to_pylist(), got.column("g").to_pylist())) == rows, (version, name)
        finally:
            past.close()

    @invariant()
    def content_matches(self) -> None:
        listed = set()
        for ns in self.namespaces:
            listed.update(self.lake.list_tables(ns))
        assert listed == set(self.tables)
        for name, rows in self.tables.items():
            got = self.lake.load_table(name).scan().to_arrow()
            assert Counter(zip(got.column("id").to_pylist(), got.column("g").to_pylist())) == rows, name


TestCatalogModel = CatalogModel.TestCase
TestCatalogModel.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
