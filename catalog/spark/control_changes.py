"""The control plane's ops for incremental and streaming reads and the changelog (:mod:`catalog.changes`).

* ``plan_appended``: the data files appended to a table in ``(start, end]``
  (``spark.read.option("start-version", a).option("end-version", b)``, and
  each micro-batch of ``spark.readStream``), in ``plan_scan``'s form;
* ``table_versions``: the versions after a given one that touched a table,
  and the latest version (a stream's next offsets);
* ``table_changes``: a table's changelog, as rows Spark's JSON reader takes
  (``CALL <catalog>.system.table_changes(...)``).

A mixin of :class:`catalog.spark.control.ControlPlane`: ``self._lake`` is its lakehouse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from catalog import changes
from catalog.errors import NoSuchTableError
from catalog.spark.errors import ProtocolError
from catalog.spark.planned_files import planned_file
from catalog.spark.types import spark_schema

if TYPE_CHECKING:
    import catalog

__all__ = ["ChangesOps"]


def _version(args: Mapping[str, Any], key: str) -> int:
    value = args.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(f"argument {key!r} must be an int, got {value!r}")
    return value


def _table(args: Mapping[str, Any]) -> str:
    name = args.get("name")
    if isinstance(name, list) and name and all(isinstance(p, str) for p in name):
        return ".".join(name)
    if isinstance(name, str) and name:
        return name
    raise ProtocolError(f"argument 'name' must be a table name or a list of its parts, got {name!r}")


def _strings(args: Mapping[str, Any], key: str) -> list[str]:
    value = args.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolError(f"argument {key!r} must be a list of strings, got {value!r}")
    return value


class ChangesOps:
    """``op_plan_appended``, ``op_table_versions`` and ``op_table_changes`` (see the module docstring)."""

    _lake: catalog.Lakehouse

    def _same_table(self, name: str, table_id: object, version: int) -> None:
        """Refuse a request planned on table ``table_id`` when ``name`` is another table at ``version``."""
        if table_id is None:
            return
        with self._lake.at(version=version) as past:
            found = past.load_table(name).id
        if found != table_id:
            raise NoSuchTableError(f"table {name!r} at version {version} is not the table the query was planned on")

    def op_plan_appended(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The files appended to table ``name`` in (``start``, ``end``], as ``plan_scan`` answers them.

        ``skip`` may hold ``"delete"`` and ``"overwrite"``: versions of that
        kind are skipped instead of refused. A ``start`` of -1 plans the whole
        table at ``end`` (a stream's first batch).

        Raises:
            ProtocolError: a malformed argument.
            NonAppendVersionError: a version in the range deleted or changed rows
                (its kind not in ``skip``); the message names the version.
            ValueError, NoSuchTableError, SnapshotTooOldError: as
                :func:`catalog.changes.appended_files` (a ``start`` past retention
                names it and the floor).
        """
        name, start, end = _table(args), _version(args, "start"), _version(args, "end")
        if start == -1:
            self._lake.refresh()
            with self._lake.at(version=end) as past:
                files = past.load_table(name).files()
            versions = [end]
        else:
            if start < -1:
                raise ValueError(f"start version must be >= 0, got {start}")
            _, per_version = changes.appended_files(self._lake, name, start, end, _strings(args, "skip"))
            files = [f for _, fs in per_version for f in fs]
            versions = [v for v, _ in per_version]
        self._same_table(name, args.get("id"), end)
        return {
            "files": [planned_file(f) for f in files],
            "parquet_field_ids": all(f.parquet_field_ids for f in files),
            "versions": versions,
        }

    def op_table_versions(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The latest lakehouse version and the versions in (``after``, latest] that touched table ``name``.

        Raises:
            ProtocolError: a malformed argument.
            ValueError, NoSuchTableError, SnapshotTooOldError: as
                :func:`catalog.changes.touching_versions` (``after`` past retention names it).
        """
        name, after = _table(args), _version(args, "after")
        latest = self._lake.refresh()
        if after >= latest:
            return {"latest": latest, "versions": []}
        self._same_table(name, args.get("id"), latest)
        found = changes.touching_versions(self._lake, name, max(after, 0), latest)
        return {"latest": latest, "versions": [v for v in found if v > after]}

    def op_table_changes(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Table ``table``'s changelog over (``start``, ``end``]: its Spark schema and rows as JSON lines.

        ``end`` None is the latest version; ``identifier_columns`` pairs update images.

        Raises:
            ProtocolError: a malformed argument.
            TypeError, ValueError, NoSuchTableError, SnapshotTooOldError: as
                :func:`catalog.changes.table_changes`.
        """
        name = _table({"name": args.get("table")})
        start = _version(args, "start")
        end = self._lake.refresh() if args.get("end") is None else _version(args, "end")
        ids = _strings(args, "identifier_columns") or None
        log = changes.table_changes(self._lake, name, start, end, ids)
        return {
            "schema": spark_schema(log.schema).jsonValue(),
            "rows": [json.dumps(row, separators=(",", ":")) for row in changes.json_rows(log)],
        }
