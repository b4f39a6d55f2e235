"""Maintenance against writers and time travellers (issue 35, acceptance 3), and its worker processes.

Appenders, overwriters, a compactor, a garbage collector (lake GC plus the
engine's flush, compaction and GC) and time-travel readers run in separate
processes on one local-directory lakehouse for ``duration_s`` seconds. Some
open it with their own ``retention_window_s`` (which, by the lakehouse's
rule, records that window for everyone: catalog.retention); the others
follow the recorded one. Every write is logged with the version it
committed, so a client-side model knows every table at every version. Then:

* every version a reader read during the run matched the model, or was
  ``SnapshotTooOldError`` (no other error, never a missing file);
* every version ``history()`` lists afterwards reads exactly, or raises
  ``SnapshotTooOldError``; the current version equals the model;
* ``verify()`` is clean and its floor is at least the recorded data floor.

The test suite runs a short version (tests/catalog/test_lake_retention.py); the
whole run is a script::

    PYTHONPATH=$PWD .venv/bin/python tests/catalog/retention_soak.py --duration-s 300
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import catalog
from kvstore.errors import SnapshotTooOldError
from kvstore.store import open_embedded
from lake_peer import LOCAL, SCHEMA
from lake_workers import Logged, compactor, logged_write, run_processes

TABLES = ["db.a", "db.b"]
CREATED_WINDOW_S = 2.0  # the window the lakehouse is created with
# Handles that open with a window of their own (recording it for the lakehouse).
COLLECTOR_WINDOW_S = 1.0
COMPACTOR_WINDOW_S = 3.0
READER_WINDOW_S = 3.0


def digest(table_rows: list[tuple[int, str]]) -> str:
    """A short fingerprint of a table's rows (order does not matter)."""
    return hashlib.blake2b(json.dumps(sorted(table_rows)).encode(), digest_size=12).hexdigest()


def table_rows(lake: Any, table: str) -> list[tuple[int, str]]:
    data = lake.load_table(table).scan().to_arrow()
    return sorted(zip(data.column("id").to_pylist(), data.column("tag").to_pylist()))


# -- workers (module level: spawn-importable) ------------------------------------------------


def writer(url: str, options: dict[str, Any], worker: int, seed: int, mix: str, start: Any, stop: Any) -> list[Logged]:
    """Random writes until ``stop``: mostly appends (``mix="append"``) or mostly overwrites and deletes."""
    rng = random.Random(seed)
    start.wait(60)
    log: list[Logged] = []
    with catalog.open(url, **options) as lake:
        n = 0
        while not stop.is_set():
            table = rng.choice(TABLES)
            roll = rng.random() if mix == "overwrite" else rng.random() * 0.5
            tag = f"w{worker}-{n}"
            lo = rng.randrange(0, 90, 10)
            n += 1
            if roll < 0.5:
                kind, where, ids = "append", None, tuple(rng.randrange(100) for _ in range(rng.randint(1, 4)))
            elif roll < 0.7:
                kind, where, ids = "overwrite", None, tuple(rng.randrange(100) for _ in range(rng.randint(0, 3)))
            elif roll < 0.85:
                kind, where = "overwrite", (lo, lo + 20)
                ids = tuple(rng.randrange(lo, lo + 20) for _ in range(rng.randint(1, 3)))
            else:
                kind, where, ids = "delete", (lo, lo + 20), ()
            log.append(logged_write(lake, worker, table, kind, ids, tag, where))
    return log


def collector(url: str, options: dict[str, Any], start: Any, stop: Any) -> dict[str, int]:
    """Lake GC and the engine's flush, compaction and GC, over and over until ``stop``."""
    start.wait(60)
    stats = {"gc_runs": 0, "files_deleted": 0}
    with catalog.open(url, **options) as lake:
        while not stop.is_set():
            report = lake.gc()
            stats["gc_runs"] += 1
            stats["files_deleted"] += len(report.removed_files)
            lake.store.flush()
            lake.store.compact()
            lake.store.gc()
            stop.wait(0.1)
    return stats


@dataclass
class Observations:
    """What a reader saw: per version read, each table's digest; and versions that were too old."""

    read: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    too_old: list[int] = field(default_factory=list)
    gc_mid_read: int = 0  # of too_old: GC deleted a file while the version was being read
    errors: list[str] = field(default_factory=list)


def read_version(lake: catalog.Lakehouse, observations: Observations, version: int | None, timestamp: float | None = None) -> None:
    """Read every table at ``version`` (or ``timestamp``) and note what came back."""
    try:
        with lake.at(version=version, timestamp=timestamp) as past:
            seen = {t: digest(table_rows(past, t)) for t in TABLES}
            observations.read.append((past.version, seen))
    except SnapshotTooOldError as exc:
        observations.too_old.append(-1 if version is None else version)
        observations.gc_mid_read += "GC deleted its data file" in str(exc)
    except Exception:  # noqa: BLE001 - every other answer is a failure the test reports with its traceback
        observations.errors.append(f"version {version} / timestamp {timestamp}:\n{traceback.format_exc()}")


def traveller(url: str, options: dict[str, Any], first_version: int, seed: int, own_window: bool, start: Any, stop: Any) -> Observations:
    """Until ``stop``: list history, read random listed versions (by number and by timestamp)."""
    rng = random.Random(seed)
    start.wait(60)
    observations = Observations()
    if own_window:  # a handle built on a store with its own window (which it records)
        lake = catalog.Lakehouse(open_embedded(url, **options, retention_window_s=READER_WINDOW_S))
    else:
        lake = catalog.open(url, **options)
    with lake:
        while not stop.is_set():
            lake.refresh()
            listed = [e for e in lake.history(limit=None) if e.version >= first_version]
            for entry in rng.sample(listed, min(len(listed), 8)):
                if rng.random() < 0.25:
                    read_version(lake, observations, None, timestamp=entry.timestamp)
                else:
                    read_version(lake, observations, entry.version)
    return observations


# -- the run -----------------------------------------------------------------------------------


class Model:
    """Every table at every version, replayed from the writers' logs (one committed op per version)."""

    def __init__(self, first_version: int, logs: list[Logged]) -> None:
        committed = sorted((op for op in logs if op.version > op.seen and op.kind != "compact"), key=lambda op: op.version)
        versions = [op.version for op in committed]
        assert len(set(versions)) == len(versions), "two committed writes returned the same version"
        state: dict[str, list[tuple[int, str]]] = {t: [] for t in TABLES}
        self._versions = [first_version]
        self._digests = [{t: digest(state[t]) for t in TABLES}]
        for op in committed:
            state[op.table] = _apply(state[op.table], op)
            self._versions.append(op.version)
            self._digests.append({t: digest(state[t]) for t in TABLES})
        self.final = {t: sorted(r) for t, r in state.items()}

    def at(self, version: int) -> dict[str, str]:
        """Each table's digest at ``version`` (the state after the newest write at or before it)."""
        low, high = 0, len(self._versions) - 1
        while low < high:
            mid = (low + high + 1) // 2
            if self._versions[mid] <= version:
                low = mid
            else:
                high = mid - 1
        return self._digests[low]


def _apply(model: list[tuple[int, str]], op: Logged) -> list[tuple[int, str]]:
    new_rows = [(i, op.tag) for i in op.ids]
    if op.kind == "append":
        return model + new_rows
    if op.where is None:
        return new_rows
    lo, hi = op.where
    kept = [r for r in model if not lo <= r[0] < hi]
    return kept + new_rows if op.kind == "overwrite" else kept


def run_soak(root: Path, duration_s: float, seed: int = 35, check_at_most: int | None = None) -> dict[str, Any]:
    """The whole run on a new lakehouse under ``root``; returns its numbers.

    Afterwards every version ``history()`` lists is read, or with
    ``check_at_most`` that many of them: the oldest and the newest third and
    evenly spaced ones between (the suite's bound: a run on a busy machine
    can leave thousands of versions inside the window, each a full read).

    Raises:
        AssertionError: a worker failed, a read was neither exact nor SnapshotTooOldError,
            or the final state differs from the model.
    """
    url = str(root / "lake")
    with catalog.open(url, **LOCAL, retention_window_s=CREATED_WINDOW_S) as lake:
        lake.create_namespace("db")
        for t in TABLES:
            lake.create_table(t, SCHEMA)
        first_version = lake.version
    # The collector runs the engine's own flush, compaction and GC too.
    busy = dict(LOCAL, background_maintenance=True, retention_window_s=COLLECTOR_WINDOW_S)
    workers: list[tuple[Callable[..., Any], tuple[Any, ...]]] = [
        (writer, (url, LOCAL, 0, seed, "append")),
        (writer, (url, LOCAL, 1, seed + 1, "append")),
        (writer, (url, LOCAL, 2, seed + 2, "overwrite")),
        (compactor, (url, dict(LOCAL, retention_window_s=COMPACTOR_WINDOW_S), TABLES)),
        (collector, (url, busy)),
        (traveller, (url, LOCAL, first_version, seed + 3, False)),
        (traveller, (url, LOCAL, first_version, seed + 4, True)),
    ]
    started = time.monotonic()
    *writes, compacted, collected, reader_a, reader_b = run_processes(workers, timeout_s=120, duration_s=duration_s)
    elapsed = time.monotonic() - started
    logs = [op for per_worker in writes for op in per_worker] + list(compacted)
    model = Model(first_version, logs)

    during = _check_observations([reader_a, reader_b], model)
    with catalog.open(url) as lake:  # the default options: it follows the recorded window
        lake.refresh()
        listed = [e.version for e in lake.history(limit=None)]
        after = Observations()
        for version in _sample(listed, check_at_most):
            if version >= first_version:
                read_version(lake, after, version)
        final = _check_observations([after], model)
        data_floor = lake.retention_floor
        assert all(v >= data_floor for v in listed), "history() lists a version below the data floor"
        for t in TABLES:
            assert table_rows(lake, t) == model.final[t], f"the current {t} differs from the model"
        report = lake.verify()
        assert report.ok, [str(p) for p in report.problems]
        assert report.floor_version >= data_floor
        window = lake.retention_window_s
        head = lake.version
    return {
        "duration_s": round(elapsed, 1),
        "versions": head,
        "writes_committed": sum(op.version > op.seen for op in logs if op.kind != "compact"),
        "compactions": len(compacted),
        "gc_runs": collected["gc_runs"],
        "data_files_deleted": collected["files_deleted"],
        "recorded_window_s": window,
        "data_floor": data_floor,
        "verify_floor": report.floor_version,
        "listed_after": len(listed),
        "reads_during": during["exact"],
        "too_old_during": during["too_old"],
        "too_old_during_gc_mid_read": during["gc_mid_read"],
        "reads_after": final["exact"],
        "too_old_after": final["too_old"],
        "errors": 0,
    }


def _sample(versions: list[int], at_most: int | None) -> list[int]:
    """``versions`` (newest first), or ``at_most`` of them: the newest and oldest thirds and evenly spaced ones."""
    if at_most is None or len(versions) <= at_most:
        return versions
    edge = at_most // 3
    middle = versions[edge : len(versions) - edge]
    step = len(middle) / (at_most - 2 * edge)
    return versions[:edge] + [middle[int(i * step)] for i in range(at_most - 2 * edge)] + versions[len(versions) - edge :]


def _check_observations(observations: list[Observations], model: Model) -> dict[str, int]:
    exact = too_old = 0
    for seen in observations:
        assert not seen.errors, "a read failed other than with SnapshotTooOldError:\n" + "\n".join(seen.errors[:3])
        for version, digests in seen.read:
            assert digests == model.at(version), f"version {version} read differs from the model"
            exact += 1
        too_old += len(seen.too_old)
    return {"exact": exact, "too_old": too_old, "gc_mid_read": sum(seen.gc_mid_read for seen in observations)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration-s", type=float, default=300.0, help="how long the workers run (default 300)")
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--dir", type=Path, default=None, help="where to make the lakehouse (default: a temp dir)")
    args = parser.parse_args(argv)
    root = args.dir or Path(tempfile.mkdtemp(prefix="retention-soak-"))
    stats = run_soak(root, args.duration_s, args.seed)
    print(json.dumps(stats, indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
