"""What a test asks of a lakehouse's history (a helper module, no tests)."""

from __future__ import annotations

import catalog


def commits_after(lake: catalog.Lakehouse, version: int) -> list[catalog.HistoryEntry]:
    """The catalog commits after ``version``, oldest first.

    Not ``lake.version``: background flushes and compactions of the store
    make versions too, with no history entry, at any time.
    """
    lake.refresh()
    return sorted((h for h in lake.history(limit=None) if h.version > version), key=lambda h: h.version)
