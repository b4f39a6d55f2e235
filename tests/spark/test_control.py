"""The control plane (catalog.spark.control) without a JVM: requests in, answers out."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pytest

import catalog
from catalog.spark.control import ControlPlane, data_root, literal, serve_stdio

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


def test_literals() -> None:
    assert literal(5) == 5 and literal("x") == "x" and literal(None) is None
    with pytest.raises(ValueError, match="unknown filter literal"):
        literal({"blob": "x"})


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
