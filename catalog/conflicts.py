"""How the catalog classifies a conflict between two operations (Lance-style).

The KV layer *detects* conflicts exactly (SERIALIZABLE reads and scanned
ranges against writes, across processes). When a catalog commit loses, this
module decides what the loser does, by the pair (our operation, the winning
operation on the same object):

* ``REBASE`` — re-apply our operation against the new version automatically
  (bounded retries with jitter). Re-applying re-checks the operation's own
  preconditions, which may still turn the outcome into one of the two below
  (e.g. a delete whose file was rewritten meanwhile becomes retryable).
* ``RETRY`` — raise :class:`~catalog.errors.RetryableConflictError`: the
  caller must redo its work on fresh data (its inputs changed).
* ``FAIL`` — raise :class:`~catalog.errors.IncompatibleConflictError`: the
  operation no longer makes sense (its table was dropped, ...).

The matrix (rows: our operation; columns: the winning one; ``-`` = the two
never touch a common key, so they never conflict and both commit):

==============  ======  =========  ======  =======  ======  ======  ======  ======  =====
ours \\ theirs   append  overwrite  delete  compact  schema  props   create  rename  drop
==============  ======  =========  ======  =======  ======  ======  ======  ======  =====
append          \\-      \\-         \\-      \\-       REBASE  \\-      \\-      \\-      FAIL
overwrite       RETRY   RETRY      RETRY   RETRY    REBASE  \\-      \\-      \\-      FAIL
delete          REBASE  RETRY      REBASE  REBASE   REBASE  \\-      \\-      \\-      FAIL
compact         REBASE  RETRY      REBASE  REBASE   REBASE  \\-      \\-      \\-      FAIL
schema          \\-      \\-         \\-      \\-       RETRY   \\-      \\-      \\-      FAIL
props           \\-      \\-         \\-      \\-       \\-      RETRY   \\-      \\-      FAIL
create          \\-      \\-         \\-      \\-       \\-      \\-      FAIL    FAIL    REBASE
rename          \\-      \\-         \\-      \\-       \\-      \\-      FAIL    FAIL    FAIL
drop            REBASE  REBASE     REBASE  REBASE   REBASE  REBASE  FAIL    FAIL    FAIL
==============  ======  =========  ======  =======  ======  ======  ======  ======  =====

Notes on the cells, each tested pair by pair in tests/catalog/test_conflicts.py:

* append × append never conflict: an append only creates ``file/`` keys with
  fresh ids and reads the table definition.
* append × overwrite / delete / compact: no conflict for the append, which
  commits after the winner (serial order: their rewrite, then our rows).
  overwrite × append is RETRY: the overwrite was computed without the
  appended rows, so re-applying it would silently drop them.
* A read-modify-write overwrite (``commit_files(..., read_files=...)``:
  the files its input was read from) checks more than the matrix: any
  file committed after that read (by an append, overwrite or compaction,
  even one that landed before the overwrite's own commit began) is RETRY,
  as overwrite × append is. A blind overwrite (no ``read_files``) replaces
  what is live at its commit, so an append that landed before it is
  replaced (serial order: append, then overwrite).
* delete × append is REBASE only if the statistics of every file added
  meanwhile prove it holds no row matching the delete's filter; otherwise
  re-applying would leave matching rows, so it is RETRY. delete × delete and
  compact × delete: REBASE when the two touched different files, RETRY when
  a file we rewrite was already removed (Lance: same fragment).
* schema × append: our schema change reads only the definition; an append
  that landed first is still readable (field ids). append × schema: REBASE
  if our files still fit the new schema (added / renamed / widened / dropped
  columns), FAIL if they do not.
* props × props: different keys never conflict (one key each); the same key
  is RETRY (the caller may have decided on the old value).
* create × create of one name: FAIL (the name is taken). Creating inside a
  namespace that was dropped meanwhile: FAIL. rename × write: writes address
  tables by id, so a rename and a write both commit.
* any write × drop: FAIL. drop × write: REBASE (the drop removes whatever is
  there now).
* A transaction that *read* a table (a scan, a listing) and wrote elsewhere
  conflicts with any concurrent write to what it read: RETRY, always, since
  its writes were computed from what it read. This is the case TrinityLake's
  own spec admits it gets wrong.
"""

from __future__ import annotations

from typing import Final

REBASE: Final = "rebase"
RETRY: Final = "retry"
FAIL: Final = "fail"

# Operation kinds grouped by how they conflict (the matrix's rows/columns).
_GROUP: Final = {
    "append": "append",
    "overwrite": "overwrite",
    "delete": "delete",
    "compact": "compact",
    "update_schema": "schema",
    "update_properties": "props",
    "update_namespace_properties": "props",
    "create_table": "create",
    "create_view": "create",
    "create_namespace": "create",
    "replace_view": "schema",
    "commit_metadata": "overwrite",
    "rename_table": "rename",
    "drop_table": "drop",
    "drop_view": "drop",
    "drop_namespace": "drop",
    # A staged read check (ops.CheckRead) writes nothing: it never makes another commit conflict,
    # and losing to one just means checking again on the new version.
    "check_read": "read",
}

_COLUMNS: Final = ("append", "overwrite", "delete", "compact", "schema", "props", "create", "rename", "drop", "read")
_ROWS: Final = {
    "append": (None, None, None, None, REBASE, None, None, None, FAIL, None),
    "overwrite": (RETRY, RETRY, RETRY, RETRY, REBASE, None, None, None, FAIL, None),
    "delete": (REBASE, RETRY, REBASE, REBASE, REBASE, None, None, None, FAIL, None),
    "compact": (REBASE, RETRY, REBASE, REBASE, REBASE, None, None, None, FAIL, None),
    "schema": (None, None, None, None, RETRY, None, None, None, FAIL, None),
    "props": (None, None, None, None, None, RETRY, None, None, FAIL, None),
    "create": (None, None, None, None, None, None, FAIL, FAIL, REBASE, None),
    "rename": (None, None, None, None, None, None, FAIL, FAIL, FAIL, None),
    "drop": (REBASE, REBASE, REBASE, REBASE, REBASE, REBASE, FAIL, FAIL, FAIL, None),
    "read": (REBASE, REBASE, REBASE, REBASE, REBASE, REBASE, REBASE, REBASE, REBASE, None),
}


def group(kind: str) -> str:
    """The matrix row/column of an operation kind (``ValueError`` if unknown).

    Raises:
        ValueError: ``kind`` is not a catalog operation kind.
    """
    try:
        return _GROUP[kind]
    except KeyError:
        raise ValueError(f"unknown catalog operation kind {kind!r}") from None


def classify(ours: str, theirs: str | None) -> str:
    """The outcome for our operation ``ours`` losing to ``theirs``.

    ``theirs=None`` (the winner is not known, e.g. a commit by an older
    writer without a summary) and pairs the matrix marks ``-`` (which the KV
    layer reports only when both touched keys beyond their own object, e.g.
    through a namespace listing) are REBASE: re-applying re-checks every
    precondition, so it is only ever as permissive as the checks.
    """
    row = _ROWS[group(ours)]
    if theirs is None:
        return REBASE
    outcome = row[_COLUMNS.index(group(theirs))]
    return REBASE if outcome is None else outcome


def matrix() -> dict[tuple[str, str], str | None]:
    """The whole table, ``(ours, theirs) -> outcome`` (None: never conflict)."""
    return {(r, c): _ROWS[r][i] for r in _ROWS for i, c in enumerate(_COLUMNS)}
