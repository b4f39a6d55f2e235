"""The results table: one row per measurement, one column per system, and the
ratio lakekv ÷ best peer, with the date, machine and versions above it.

For rates (commits/s) the best peer is the fastest and a ratio above 1 means
lakekv is faster; for times (ms, s) the best peer is the quickest and a ratio
below 1 means lakekv is faster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakehouse.system import PEERS


@dataclass(frozen=True)
class Row:
    title: str
    phase: str
    metric: str
    unit: str
    higher_is_better: bool
    goal: str = ""  # how the goal reads for this row, if it has one


def rows(config: dict[str, Any]) -> list[Row]:
    files, tables, writers = config["files"], config["tables"], config["writers"]
    old = (files // config["files_per_commit"] // 2) * config["files_per_commit"]
    return [
        Row(f"small appends ({config['append_rows']} rows), 1 writer", "single_writer", "commits_per_s", "commits/s", True),
        Row(f"small appends, {writers} writer processes, one table", "many_writers", "commits_per_s", "commits/s", True,
            "≥ 2× best peer"),
        Row(f"plan scan of {files:,} files, no filter", "plan", "median_ms", "ms", False, "≤ 50 ms"),
        Row(f"plan scan of {files:,} files, selective filter (1 file)", "plan_filtered", "median_ms", "ms", False,
            "≤ 50 ms"),
        Row(f"plan at old version ({old:,} files), no filter", "plan_old", "median_ms", "ms", False),
        Row("plan at old version, selective filter (1 file)", "plan_old_filtered", "median_ms", "ms", False),
        Row(f"list {tables:,} tables", "list_tables", "median_ms", "ms", False),
        Row(f"build the {files:,}-file table ({config['files_per_commit']:,} files/commit)", "build_files",
            "seconds", "s", False),
        Row(f"create {tables:,} tables", "create_tables", "seconds", "s", False),
    ]


def value(results: dict[str, Any], system: str, phase: str, metric: str) -> float | None:
    entry = results["measurements"].get(system, {}).get(phase)
    if not entry or "error" in entry:
        return None
    found = entry["metrics"].get(metric)
    return float(found) if isinstance(found, (int, float)) else None


def best_peer(results: dict[str, Any], row: Row) -> tuple[str, float] | None:
    found = [(peer, v) for peer in PEERS if (v := value(results, peer, row.phase, row.metric)) is not None]
    if not found:
        return None
    return (max if row.higher_is_better else min)(found, key=lambda pair: pair[1])


def ratio(results: dict[str, Any], row: Row) -> float | None:
    """lakekv ÷ best peer for ``row`` (None if either side is missing)."""
    ours, best = value(results, "lakekv", row.phase, row.metric), best_peer(results, row)
    if ours is None or best is None or best[1] == 0:
        return None
    return ours / best[1]


def goal_met(results: dict[str, Any], row: Row) -> bool | None:
    if row.goal.startswith("≥ 2×"):
        r = ratio(results, row)
        return None if r is None else r >= 2.0
    if row.goal.startswith("≤ 50 ms"):
        ours = value(results, "lakekv", row.phase, row.metric)
        return None if ours is None else ours <= 50.0
    return None


def _cell(results: dict[str, Any], system: str, row: Row) -> str:
    entry = results["measurements"].get(system, {}).get(row.phase)
    if entry is None:
        return "not run"
    if "error" in entry:
        return "error"
    v = value(results, system, row.phase, row.metric)
    if v is None:
        return "—"
    return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"


def _concurrency_cell(results: dict[str, Any], system: str, phase: str) -> str:
    entry = results["measurements"].get(system, {}).get(phase)
    if not entry or "error" in entry:
        return "—"
    m = entry["metrics"]
    internal = "n/a" if m["internal_retries"] is None else str(m["internal_retries"])
    return (f"{m['conflicts']} / {m['other_errors']} / {m['gave_up']} "
            f"({m['error_rate']:.0%} of {m['attempts']}); internal {internal}")


def markdown(results: dict[str, Any]) -> str:
    meta, config = results["meta"], results["config"]
    systems = list(results["systems"])
    labels = [results["systems"][key]["label"] for key in systems]
    machine = meta["machine"]
    lines = [
        f"Catalog benchmark ({config['mode']} run), {meta['date']}, commit `{meta['git']['commit'][:12]}`"
        + (" (working tree had changes)" if meta["git"]["dirty_paths"] else ""),
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_bytes'] / 2**30:.0f} GiB, "
        f"{machine['platform']}, Python {machine['python']}; data on {machine['data_filesystem']}. "
        f"Load average {meta['load_average_start']} at start, {meta.get('load_average_end')} at end "
        "(the machine is shared: compare within the run only).",
        "",
        "Versions: " + ", ".join(f"{name} {version}" for name, version in meta["packages"].items()) + ".",
        "",
        "| measurement | " + " | ".join(labels) + " | lakekv ÷ best peer | goal |",
        "|---|" + "---:|" * len(labels) + "---:|---|",
    ]
    for row in rows(config):
        r = ratio(results, row)
        met = goal_met(results, row)
        goal = row.goal + ("" if met is None else (" ✅" if met else " ❌ missed"))
        cells = [_cell(results, key, row) for key in systems]
        lines.append(f"| {row.title} ({row.unit}) | " + " | ".join(cells) + f" | {'—' if r is None else f'{r:.2f}'} | {goal} |")
        if row.phase in ("single_writer", "many_writers"):
            cells = [_concurrency_cell(results, key, row.phase) for key in systems]
            lines.append("| ↳ conflicts / other errors / gave up (error rate); own retries | "
                         + " | ".join(cells) + " | | |")
    lines += [
        "",
        "Ratios: for commits/s above 1 means lakekv is faster; for ms and s below 1 means lakekv is faster. "
        "Plan and list times are the median of warm repeats (one untimed warm-up first) and include looking "
        "the table up. Conflicts and other errors are failures that reached the caller (it backs off and "
        "retries the same append, up to "
        f"{config['max_attempts']} attempts); own retries are those the catalog made by itself, where it "
        "exposes them.",
        "",
        "How each system does each step:",
    ]
    for key in systems:
        notes = results["systems"][key].get("notes", {})
        if notes:
            lines.append(f"- {results['systems'][key]['label']}: " + "; ".join(f"{k}: {v}" for k, v in notes.items()))
    if results["failures"]:
        lines += ["", "Failures:"] + [f"- {failure}" for failure in results["failures"]]
    return "\n".join(lines) + "\n"
