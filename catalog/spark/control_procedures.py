"""The control plane's maintenance and recovery ops: what ``CALL lake.system.<procedure>(...)`` runs.

``io.lakekv.spark.MaintenanceProcedures`` (the JVM side) checks the named
arguments Spark bound, sends one request per ``CALL`` and turns the answer
into the procedure's result row. Each op here calls the Python API the
docs show for the same thing, so SQL and Python answer alike:

=====================  ===================================================
procedure              Python API
=====================  ===================================================
rewrite_data_files     ``lake.rewrite_data_files`` (:mod:`catalog.rewrite`)
rollback_to_version    ``lake.rollback_table(version=)`` (:mod:`catalog.rollback`)
rollback_to_timestamp  ``lake.rollback_table(timestamp=)``
expire_versions        ``lake.expire_versions`` (:mod:`catalog.expiry`)
remove_orphan_files    ``lake.remove_orphan_files``
add_files              ``lake.add_files`` (:mod:`catalog.import_files`)
verify                 ``lake.verify(table)``
=====================  ===================================================

They all act on the live lakehouse and commit on their own (the JVM refuses
them inside a session's transaction). Arguments arrive typed by Spark; each
op still checks what it reads, and a bad one is a ``ProtocolError`` or the
API's own ``TypeError``/``ValueError``, raised before anything changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import catalog
from catalog.spark.errors import ProtocolError


def _table(args: Mapping[str, Any]) -> str:
    parts = args.get("table")
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
        raise ProtocolError(f"argument 'table' must be a list of names, got {parts!r}")
    if len(parts) < 2:
        raise ValueError(f"table {'.'.join(parts)!r} needs a namespace: name it as 'namespace.table'")
    return ".".join(parts)


def _optional(args: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = args.get(key)
    if value is not None and (isinstance(value, bool) is not (kind is bool) or not isinstance(value, kind)):
        raise ProtocolError(f"argument {key!r} has the wrong type: {value!r}")
    return value


def _seconds(args: Mapping[str, Any], key: str) -> float | None:
    """A Spark TIMESTAMP (microseconds since the epoch) as seconds, or None."""
    value = _optional(args, key, int)
    return None if value is None else value / 1_000_000


def _gc_row(report: Any) -> dict[str, Any]:
    return {
        "deleted_data_files_count": len(report.removed_files),
        "deleted_orphan_files_count": len(report.orphan_files) + len(report.temp_files),
        "bytes_freed": report.bytes_freed,
        "floor_version": report.floor_version,
        "dry_run": report.dry_run,
        "files": sorted(report.removed_files + report.orphan_files + report.temp_files),
    }


class ProcedureOps:
    """The ``op_*`` methods of :class:`catalog.spark.control.ControlPlane` behind the maintenance procedures."""

    _lake: catalog.Lakehouse

    def op_rewrite_data_files(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Compact ``table``'s files (``where``, ``target_file_size_bytes``, ``strategy``, ``sort_order``).

        Raises:
            ProtocolError: an argument of the wrong type.
            ValueError, NoSuchTableError, RetryableConflictError: as ``lake.rewrite_data_files``.
        """
        name = _table(args)
        target = _optional(args, "target_file_size_bytes", int)
        if target is not None and target < 1024:
            raise ValueError(f"target_file_size_bytes must be at least 1024, got {target}")
        report = self._lake.rewrite_data_files(
            name,
            where=_optional(args, "where", str),
            target_file_bytes=self._lake.target_file_bytes if target is None else target,
            strategy=_optional(args, "strategy", str) or "binpack",
            sort_order=_optional(args, "sort_order", str),
        )
        return {
            "rewritten_data_files_count": report.rewritten_data_files_count,
            "added_data_files_count": report.added_data_files_count,
            "rewritten_bytes_count": report.rewritten_bytes_count,
            "added_bytes_count": report.added_bytes_count,
            "version": report.version,
            "attempts": report.attempts,
        }

    def _rollback(self, name: str, version: int | None, timestamp: float | None) -> dict[str, Any]:
        before = self._lake.refresh()
        report = self._lake.rollback_table(name, version=version, timestamp=timestamp)
        return {
            "previous_version": before,
            "target_version": report.target_version,
            "version": report.version,
            "files_restored": report.files_restored,
            "files_removed": report.files_removed,
            "schema_changed": report.schema_changed,
        }

    def op_rollback_to_version(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Commit ``table`` back to its state at lakehouse ``version``.

        Raises:
            ProtocolError: ``version`` is missing or not an int.
            ValueError, NoSuchTableError, SnapshotTooOldError, RetryableConflictError: as ``lake.rollback_table``.
        """
        version = _optional(args, "version", int)
        if version is None:
            raise ProtocolError("argument 'version' is required")
        return self._rollback(_table(args), version, None)

    def op_rollback_to_timestamp(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Commit ``table`` back to its state at ``timestamp_us`` (the version current then).

        Raises:
            ProtocolError: ``timestamp_us`` is missing or not an int.
            ValueError, NoSuchTableError, SnapshotTooOldError, RetryableConflictError: as ``lake.rollback_table``.
        """
        seconds = _seconds(args, "timestamp_us")
        if seconds is None:
            raise ProtocolError("argument 'timestamp_us' is required")
        return self._rollback(_table(args), None, seconds)

    def op_expire_versions(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Delete the files only versions before ``older_than_us`` read, keeping ``retain_last``.

        Raises:
            ProtocolError: an argument of the wrong type.
            ValueError: as ``lake.expire_versions``.
        """
        retain = _optional(args, "retain_last", int)
        report = self._lake.expire_versions(
            older_than=_seconds(args, "older_than_us"),
            retain_last=1 if retain is None else retain,
            dry_run=bool(_optional(args, "dry_run", bool)),
        )
        return _gc_row(report)

    def op_remove_orphan_files(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Delete unreferenced files older than ``older_than_us`` (default ``gc_grace_s`` ago).

        Raises:
            ProtocolError: an argument of the wrong type.
            ValueError: as ``lake.remove_orphan_files``.
        """
        report = self._lake.remove_orphan_files(
            older_than=_seconds(args, "older_than_us"), dry_run=bool(_optional(args, "dry_run", bool))
        )
        return _gc_row(report)

    def op_add_files(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Import the Parquet files at ``source`` into ``table`` in place.

        Raises:
            ProtocolError: ``source`` is missing or not a string.
            ValueError, NoSuchTableError: as ``lake.add_files``.
        """
        source = _optional(args, "source", str)
        if source is None:
            raise ProtocolError("argument 'source' is required")
        report = self._lake.add_files(_table(args), source)
        return {
            "added_files_count": report.added_files_count,
            "added_rows_count": report.added_rows_count,
            "added_bytes_count": report.added_bytes_count,
            "version": report.version,
        }

    def op_verify(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """``lake.verify(table)``: the store and every retained data file (with ``table``, that table's).

        Raises:
            ProtocolError: ``table`` is not a list of names.
            NoSuchTableError: ``table`` does not exist.
        """
        report = self._lake.verify(None if args.get("table") is None else _table(args))
        problems = [str(p) for p in report.problems]
        return {
            "ok": report.store.ok and not problems,
            "store_ok": report.store.ok,
            "floor_version": report.floor_version,
            "head_version": report.head_version,
            "files_checked": report.files_checked,
            "problems": problems,
        }
