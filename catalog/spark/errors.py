"""The Spark adapter's errors: :class:`ProtocolError`, and catalog conflicts
back as catalog exceptions in the PySpark driver.

A write's commit runs in a Python worker that Spark starts for it; when the
catalog refuses the commit there (``RetryableConflictError`` /
``IncompatibleConflictError``), the driver gets a *Spark* exception
(``PythonException``, ``Py4JJavaError`` or ``AnalysisException``, depending
on the step) whose text carries the worker's Python traceback. This module
turns that back into the catalog's own exception:

>>> from catalog.spark import catalog_errors                 # doctest: +SKIP
>>> with catalog_errors():                                   # doctest: +SKIP
...     df.write.format("lakehouse").option("lakehouse", url).mode("append").save("sales.orders")

How the error travels: the worker side (:func:`annotated_conflicts`, around
every catalog call of the data source) adds one note to the conflict, a line
``[lakehouse conflict] {json}`` with the exception's attributes
(``ours``, ``theirs``, ``object``, ``version``); Python prints notes right
after the ``module.Class: message`` lines of the traceback, and Spark passes
the traceback text on verbatim. The driver side (:func:`conflict_from`)
finds the *last* such class line in the text (the outermost failure) and
rebuilds the exception: same class, same message (up to the note), same
attributes, chained ``from`` the Spark exception. A class line without the
note (e.g. an older worker) still gives the class and the message's first
line, with ``ours="unknown"``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from catalog.errors import CatalogConflictError, IncompatibleConflictError, NoSuchTableError, RetryableConflictError

__all__ = ["NotAtVersionError", "ProtocolError", "annotated_conflicts", "catalog_errors", "conflict_from"]


class ProtocolError(ValueError):
    """A request the control plane (:mod:`catalog.spark.control`) cannot understand:
    unknown op, missing or mistyped argument."""


class NotAtVersionError(NoSuchTableError):
    """Time travel to a version before a table (that exists now) was created; the message names both versions."""


# The classes we rebuild, by the qualified name a traceback prints for them.
_CLASSES: Final[dict[str, type[CatalogConflictError]]] = {
    f"{cls.__module__}.{cls.__qualname__}": cls for cls in (RetryableConflictError, IncompatibleConflictError)
}
_NOTE_PREFIX: Final = "[lakehouse conflict] "
# ``catalog.errors.RetryableConflictError: <message>`` at the start of a line
# (Python's traceback format); a message may span lines, up to our note.
_LINE: Final = re.compile(
    r"^(?P<cls>" + "|".join(re.escape(name) for name in _CLASSES) + r"): (?P<first>.*)$", re.MULTILINE
)
_MAX_MESSAGE_LINES: Final = 20
_NOTE: Final = re.compile(r"^" + re.escape(_NOTE_PREFIX) + r"(?P<note>\{.*\})$", re.MULTILINE)


def _note(exc: CatalogConflictError) -> str:
    return _NOTE_PREFIX + json.dumps(
        {"ours": exc.ours, "theirs": exc.theirs, "object": exc.object, "version": exc.version},
        separators=(",", ":"),
    )


@contextmanager
def annotated_conflicts() -> Iterator[None]:
    """Worker side: give a catalog conflict raised inside the note :func:`conflict_from` reads.

    Raises:
        RetryableConflictError, IncompatibleConflictError: raised inside, re-raised
            with the note added (once: a conflict that has it is re-raised as is).
            Every other exception passes through unchanged.
    """
    try:
        yield
    except CatalogConflictError as exc:
        if not any(note.startswith(_NOTE_PREFIX) for note in getattr(exc, "__notes__", ())):
            exc.add_note(_note(exc))
        raise


def _texts(exc: BaseException) -> Iterator[str]:
    """Every text Spark may have put the worker's traceback in, outermost first."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield str(current)
        java = getattr(current, "java_exception", None)  # Py4JJavaError
        if java is not None:
            yield str(java)
        current = current.__cause__ or current.__context__


def _attributes(note: str | None) -> dict[str, Any]:
    if note is None:
        return {"ours": "unknown"}
    try:
        fields = json.loads(note)
    except ValueError:
        return {"ours": "unknown"}
    if not isinstance(fields, dict):
        return {"ours": "unknown"}
    version = fields.get("version")
    return {
        "ours": str(fields.get("ours") or "unknown"),
        "theirs": None if fields.get("theirs") is None else str(fields["theirs"]),
        "object": None if fields.get("object") is None else str(fields["object"]),
        "version": version if isinstance(version, int) else None,
    }


def conflict_from(exc: BaseException) -> CatalogConflictError | None:
    """The catalog conflict a Spark exception reports, rebuilt; None if it reports none.

    ``exc`` itself is returned when it already is a catalog conflict.

    >>> conflict_from(ValueError("catalog.errors.RetryableConflictError: overwrite of 't': files were added"))
    RetryableConflictError("overwrite of 't': files were added")
    >>> conflict_from(ValueError("RetryableConflictError is a class name, not a traceback line")) is None
    True
    """
    if isinstance(exc, CatalogConflictError):
        return exc
    for text in _texts(exc):
        found = list(_LINE.finditer(text))
        if not found:
            continue
        last = found[-1]
        cls = _CLASSES[last.group("cls")]
        note = _NOTE.search(text, last.end())
        # Python prints the notes right after the whole message, so what lies
        # between is the message (several lines if it has them); a note
        # further away is not this exception's. No note: the first line.
        if note is not None and text.count("\n", last.end(), note.start()) <= _MAX_MESSAGE_LINES:
            message = text[last.start("first") : note.start()].rstrip("\n")
            return cls(message, **_attributes(note.group("note")))
        return cls(last.group("first"), **_attributes(None))
    return None


@contextmanager
def catalog_errors() -> Iterator[None]:
    """Driver side: re-raise a Spark exception caused by a catalog conflict as that conflict.

    The rebuilt ``RetryableConflictError`` / ``IncompatibleConflictError``
    is chained ``from`` the Spark exception (its traceback stays available);
    every other exception passes through unchanged.

    Raises:
        RetryableConflictError, IncompatibleConflictError: an exception raised
            inside is, or reports, one (see :func:`conflict_from`).
        Any other exception raised inside, unchanged.
    """
    try:
        yield
    except Exception as exc:
        conflict = conflict_from(exc)
        if conflict is None or conflict is exc:
            raise
        raise conflict from exc
