"""The control plane (catalog.spark.control) without a JVM: requests in, answers out."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pytest

import catalog
from catalog.spark.control import ControlPlane, data_root, literal, serve_stdio
from tests.spark.lake_history import commits_after

LONG = {"name": "id", "type": "long", "nullable": True, "metadata": {}}
STRUCT = {"type": "struct", "fields": [LONG, {"name": "p", "type": "string", "nullable": True, "metadata": {}}]}


@pytest.fixture
def plane(tmp_path: Path):  # type: ignore[no-untyped-def]
    with catalog.open(str(tmp_path / "lake")) as lake:
        yield ControlPlane(lake, data_root(lake))


def ok(plane: ControlPlane, op: str, **args: object) -> object:
    answer = plane.handle({"op": op, "args": args})
    assert answer["ok"], answer
    return answer["result"]


def error(plane: ControlPlane, op: str, **args: object) -> dict[str, str]:
    answer = plane.handle({"op": op, "args": args})
    assert not answer["ok"], answer
    return answer["error"]  # type: ignore[no-any-return]


def test_table_lifecycle_and_schema_with_field_ids(plane: ControlPlane) -> None:
    ok(plane, "create_namespace", namespace=["s"], properties={"team": "x"})
    info = ok(plane, "create_table", name=["s", "t"], schema=STRUCT, partitioning=["p"], properties={"owner": "me", "k": "v"})
    assert info["partitioning"] == ["p"]
    assert [f["metadata"]["parquet.field.id"] for f in info["schema"]["fields"]] == [1, 2]
    assert info["properties"]["k"] == "v" and "owner" not in info["properties"]
    assert info["data_root"].startswith("file://")
    assert ok(plane, "list_tables", namespace=["s"]) == [["s", "t"]]
    assert ok(plane, "load_relation", name=["s", "t"])["table"]["id"] == info["id"]
    assert ok(plane, "drop_table", name=["s", "t"]) is True
    assert ok(plane, "drop_table", name=["s", "t"]) is False


def test_errors_name_their_kind_and_class(plane: ControlPlane) -> None:
    missing = error(plane, "load_table", name=["nope", "t"])
    assert missing["kind"] in ("no_such_table", "no_such_namespace")
    assert missing["text"].startswith("catalog.errors.")
    assert error(plane, "bogus")["kind"] == "bad_request"
    assert error(plane, "load_table", name="s.t")["kind"] == "bad_request"
    ok(plane, "create_namespace", namespace=["s"])
    refused = error(plane, "create_table", name=["s", "t"], schema=STRUCT, properties={"location": "/elsewhere"})
    assert refused["kind"] == "invalid_argument" and "LOCATION" in refused["message"]
    assert error(plane, "create_table", name=["s", "t"], schema=STRUCT, properties={"option.x": "1"})["kind"] == "invalid_argument"
    assert ok(plane, "list_tables", namespace=["s"]) == []  # nothing was created by a refused request


def test_plan_scan_prunes_with_encoded_filters(plane: ControlPlane, tmp_path: Path) -> None:
    ok(plane, "create_namespace", namespace=["s"])
    info = ok(plane, "create_table", name=["s", "t"], schema=STRUCT, partitioning=["p"])
    with catalog.open(str(tmp_path / "lake")) as writer:  # another handle commits
        table = writer.load_table("s.t")
        table.append(pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"]}).cast(table.schema))
    version = ok(plane, "hello")["version"]
    every = ok(plane, "plan_scan", name=["s", "t"], id=info["id"], version=version, filters=[])
    pruned = ok(plane, "plan_scan", name=["s", "t"], id=info["id"], version=version,
                filters=[{"type": "EqualTo", "attribute": ["p"], "value": "a"}])
    assert len(every["files"]) == 2 and len(pruned["files"]) == 1
    assert pruned["parquet_field_ids"] is True
    assert error(plane, "plan_scan", name=["s", "t"], id="other", version=version, filters=[])["kind"] == "no_such_table"


def test_plan_scan_carries_what_the_jvm_reader_checks(plane: ControlPlane, tmp_path: Path) -> None:
    """Each file's footer region checksum; the whole-file CRC32C only for an entry from before footer checksums."""
    import dataclasses

    ok(plane, "create_namespace", namespace=["s"])
    info = ok(plane, "create_table", name=["s", "t"], schema=STRUCT, partitioning=["p"])
    with catalog.open(str(tmp_path / "lake")) as lake:
        table = lake.load_table("s.t")
        (new,) = table.write_files(pa.table({"id": [1], "p": ["new"]}).cast(table.schema))
        (old,) = table.write_files(pa.table({"id": [2], "p": ["old"]}).cast(table.schema))
        (bare,) = table.write_files(pa.table({"id": [3], "p": ["bare"]}).cast(table.schema))
        old = dataclasses.replace(old, footer_size=None, footer_crc32c=None)
        bare = dataclasses.replace(bare, crc32c=None, footer_size=None, footer_crc32c=None)
        table.commit_files([new, old, bare])
        version = lake.version
    plan = ok(plane, "plan_scan", name=["s", "t"], id=info["id"], version=version, filters=[])["files"]
    with catalog.open(str(tmp_path / "lake")) as lake:
        assert [f["path"] for f in plan] == [f.path for f in lake.load_table("s.t").files()]  # files()'s order
    planned = {f["path"]: f for f in plan}
    assert planned[new.path] == {"path": new.path, "size": new.size, "rows": 1,
                                 "footer_size": new.footer_size, "footer_crc32c": new.footer_crc32c}
    assert planned[old.path] == {"path": old.path, "size": old.size, "rows": 1, "crc32c": old.crc32c}
    assert planned[bare.path] == {"path": bare.path, "size": bare.size, "rows": 1}


def test_a_written_files_entry_records_its_footer_region(plane: ControlPlane, tmp_path: Path) -> None:
    from kvstore.format.checksum import crc32c

    ok(plane, "create_namespace", namespace=["s"])
    info = ok(plane, "create_table", name=["s", "t"], schema=STRUCT)
    with catalog.open(str(tmp_path / "lake")) as lake:
        table = lake.load_table("s.t")
        written = _foreign_file(lake, table, pa.table({"id": [1, 2], "p": ["a", "b"]}))
        ok(plane, "commit_written", name=["s", "t"], id=info["id"], files=[written])
        lake.refresh()
        (entry,) = lake.load_table("s.t").files()
        body = lake.objects.get(entry.path)
    assert entry.footer_size == int.from_bytes(body[-8:-4], "little") + 8  # pyarrow wrote no page index
    assert entry.footer_crc32c == crc32c(body[-entry.footer_size :])


def _foreign_file(plane_lake: catalog.Lakehouse, table: catalog.Table, data: pa.Table) -> dict[str, object]:
    """``data`` written as Spark's writer would (Parquet field ids, no Arrow schema) under the table's location."""
    import pyarrow.parquet as pq

    from catalog.datafiles import with_parquet_field_ids
    from kvstore.format.checksum import crc32c

    ids = {f.name: f.metadata[b"field_id"].decode() for f in table.schema}
    sink = io.BytesIO()
    pq.write_table(with_parquet_field_ids(data.cast(pa.schema([f.remove_metadata() for f in table.schema])), ids),
                   sink, store_schema=False)
    path = f"{table.location}/{abs(hash(sink.getvalue())):x}.parquet"
    plane_lake.objects.put(path, sink.getvalue())
    return {"path": path, "crc32c": crc32c(sink.getvalue())}


def test_commit_written_replaces_exactly_the_files_read(plane: ControlPlane, tmp_path: Path) -> None:
    ok(plane, "create_namespace", namespace=["s"])
    info = ok(plane, "create_table", name=["s", "t"], schema=STRUCT, partitioning=["p"])
    with catalog.open(str(tmp_path / "lake")) as lake:
        table = lake.load_table("s.t")
        table.append(pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"]}).cast(table.schema))
        version = lake.version
        scanned = ok(plane, "plan_scan", name=["s", "t"], id=info["id"], version=version,
                     filters=[{"type": "EqualTo", "attribute": ["p"], "value": "a"}])
        new = _foreign_file(lake, table, pa.table({"id": [10, 30], "p": ["a", "a"]}))
        replace = {"version": version, "removed": [f["path"] for f in scanned["files"]],
                   "filters": [{"type": "EqualTo", "attribute": ["p"], "value": "a"}]}
        bad_path = {"path": "data/elsewhere/x.parquet", "crc32c": 0}
        assert error(plane, "commit_written", name=["s", "t"], id=info["id"], files=[bad_path], replace=replace)["kind"] == "bad_request"
        assert commits_after(lake, version) == []  # a refused request changes nothing
        committed = ok(plane, "commit_written", name=["s", "t"], id=info["id"], files=[new], replace=replace)
        assert [h.version for h in commits_after(lake, version)] == [committed["version"]]
        rows = lake.load_table("s.t").scan().to_arrow().sort_by("id")
        assert rows.column("id").to_pylist() == [2, 10, 30]
        (entry,) = [f for f in lake.load_table("s.t").files() if f.path == new["path"]]
        assert (entry.rows, entry.crc32c, entry.parquet_field_ids) == (2, new["crc32c"], True)
        # The same rewrite again: its files are gone, so it is a retryable conflict.
        again = error(plane, "commit_written", name=["s", "t"], id=info["id"],
                      files=[_foreign_file(lake, table, pa.table({"id": [9], "p": ["a"]}))], replace=replace)
        assert again["type"] == "catalog.errors.RetryableConflictError", again


def test_commit_written_checks_the_reads_of_its_query(plane: ControlPlane, tmp_path: Path) -> None:
    ok(plane, "create_namespace", namespace=["s"])
    source = ok(plane, "create_table", name=["s", "src"], schema=STRUCT, partitioning=["p"])
    target = ok(plane, "create_table", name=["s", "dst"], schema=STRUCT)
    with catalog.open(str(tmp_path / "lake")) as lake:
        src = lake.load_table("s.src")
        src.append(pa.table({"id": [1, 2], "p": ["a", "b"]}).cast(src.schema))
        read_at = lake.version
        src.append(pa.table({"id": [3], "p": ["b"]}).cast(src.schema))  # committed after the query read 'src'
        dst = lake.load_table("s.dst")

        def commit(filters: list[dict[str, object]]) -> dict[str, object]:
            reads = [{"name": ["s", "src"], "id": source["id"], "version": read_at, "filters": filters}]
            files = [_foreign_file(lake, dst, pa.table({"id": [7], "p": ["x"]}))]
            return plane.handle({"op": "commit_written", "args": {"name": ["s", "dst"], "id": target["id"], "files": files, "reads": reads}})

        refused = commit([])  # read every row of 'src': the new 'b' file may hold rows it selected
        assert not refused["ok"] and refused["error"]["type"] == "catalog.errors.RetryableConflictError", refused
        assert "read table 's.src'" in refused["error"]["message"]
        assert len(commits_after(lake, read_at)) == 1 and lake.load_table("s.dst").files() == []  # only the append
        only_a = commit([{"type": "EqualTo", "attribute": ["p"], "value": "a"}])  # the new file cannot hold p = 'a'
        assert only_a["ok"] and [h.version for h in commits_after(lake, read_at)][-1] == only_a["result"]["version"]
        assert len(commits_after(lake, read_at)) == 2


def test_can_delete_where_answers_whether_a_condition_has_an_exact_form(plane: ControlPlane) -> None:
    ok(plane, "create_namespace", namespace=["s"])
    schema = {"type": "struct", "fields": [LONG, {"name": "x", "type": "double", "nullable": True, "metadata": {}}]}
    info = ok(plane, "create_table", name=["s", "t"], schema=schema)
    on = {"name": ["s", "t"], "id": info["id"]}
    assert ok(plane, "can_delete_where", **on, filters=[{"type": "GreaterThan", "attribute": ["id"], "value": 1}]) is True
    assert ok(plane, "can_delete_where", **on, filters=[{"type": "GreaterThan", "attribute": ["x"], "value": 1.5}]) is False


def test_literals() -> None:
    assert literal(5) == 5 and literal("x") == "x" and literal(None) is None
    with pytest.raises(ValueError, match="unknown filter literal"):
        literal({"blob": "x"})
    with pytest.raises(ValueError, match="not a decimal number"):  # a bad argument, not an internal error
        literal({"decimal": "1.2.3"})


def test_stdio_protocol_opens_first_and_answers_line_by_line(tmp_path: Path) -> None:
    requests = [
        {"op": "hello"},
        {"op": "open", "args": {"url": str(tmp_path / "lake")}},
        {"op": "create_namespace", "args": {"namespace": ["a"]}},
        {"op": "list_namespaces", "args": {}},
    ]
    out = io.StringIO()
    serve_stdio(io.StringIO("\n".join(json.dumps(r) for r in requests) + "\nnot json\n"), out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert answers[0]["ok"] is False and "first request must be open" in answers[0]["error"]["message"]
    assert answers[1]["ok"] is True
    assert answers[3] == {"ok": True, "result": [["a"]]}
    assert answers[4]["error"]["kind"] == "bad_request"


def test_open_refuses_an_option_that_is_not_a_store_option(tmp_path: Path) -> None:
    request = {"op": "open", "args": {"url": str(tmp_path / "lake"), "options": {"create": "false"}}}
    out = io.StringIO()
    serve_stdio(io.StringIO(json.dumps(request) + "\n"), out)
    (answer,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert answer["ok"] is False and "catalog option create is not a store option" in answer["error"]["message"]
    assert not (tmp_path / "lake").exists()


def test_a_name_not_in_unicode_nfc_is_refused(plane: ControlPlane) -> None:
    """Spark identifiers reach the catalog's name rules: an NFD spelling is not a second namespace."""
    nfc, nfd = "caf\u00e9", "cafe\u0301"
    ok(plane, "create_namespace", namespace=[nfc])
    for op, args in (
        ("create_namespace", {"namespace": [nfd]}),
        ("load_namespace", {"namespace": [nfd]}),
        ("create_table", {"name": [nfc, nfd], "schema": STRUCT}),
    ):
        refused = error(plane, op, **args)
        assert refused["kind"] == "invalid_argument" and "not in Unicode NFC" in refused["message"], (op, refused)
    assert ok(plane, "list_namespaces") == [[nfc]]
    assert ok(plane, "list_tables", namespace=[nfc]) == []
