"""Write one run's results as JSON, a Markdown table and a PNG plot.

The JSON is the record (every measurement, setting and check); the Markdown
and the plot are views of it, and can be rebuilt from it with
:func:`write_all`.

Ratios are lakekv ÷ peer, taken within the run, always against the lakekv
configuration with the peer's durability class (see
:mod:`harness.engine`): SlateDB's unsynced local writes are set against
lakekv without fsync, LMDB/RocksDB/SQLite against lakekv with fsync. A ratio
above 1 means lakekv is ahead for "higher is better" metrics (↑) and behind
for "lower is better" ones (↓).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.workloads import HIGHER, METRICS

Results = dict[str, Any]


def write_json(results: Results, path: Path) -> None:
    path.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")


# -- ratios ----------------------------------------------------------------------


def _lakekv_for(engines: dict[str, Any], present: Iterable[str], peer: str) -> str | None:
    """The lakekv engine to compare ``peer`` with: same durability class if one
    ran in this workload, else the plain (fsync) configuration."""
    present = list(present)
    lakekv = [e for e in present if engines[e]["family"] == "lakekv"]
    same = [e for e in lakekv if engines[e]["durability"] == engines[peer]["durability"]]
    if same:
        return same[0]
    return "lakekv" if "lakekv" in lakekv else (lakekv[0] if lakekv else None)


def ratio_pairs(results: Results, workload: str) -> list[tuple[str, str]]:
    """``(lakekv engine, peer)`` pairs whose ratio the workload's table shows."""
    engines = results["engines"]
    present = _engines_in(results, workload)
    pairs = []
    for peer in present:
        if engines[peer]["family"] == "lakekv":
            continue
        mine = _lakekv_for(engines, present, peer)
        if mine is not None:
            pairs.append((mine, peer))
    return pairs


def _engines_in(results: Results, workload: str) -> list[str]:
    """Engines with figures in ``workload``: lakekv configurations first, then peers in run order."""
    engines = results["engines"]
    seen = {m["engine"] for m in results["measurements"] if m["workload"] == workload}
    present = [e for e in engines if e in seen]
    return sorted(present, key=lambda e: engines[e]["family"] != "lakekv")


def _value(results: Results, workload: str, case: str, engine: str, metric: str) -> float | None:
    for m in results["measurements"]:
        if m["workload"] == workload and m["case"] == case and m["engine"] == engine and "error" not in m:
            value = m.get("metrics", {}).get(metric)
            return None if value is None else float(value)
    return None


def ratio(results: Results, workload: str, case: str, metric: str, mine: str, peer: str) -> float | None:
    """lakekv ÷ peer for one metric, or None when either side has no figure.

    A lakekv-only case (one with ``compare_case``) takes the peer's figure
    from that case instead.
    """
    numerator = _value(results, workload, case, mine, metric)
    denominator = _value(results, workload, case, peer, metric)
    if denominator is None:
        for m in results["measurements"]:
            if m["workload"] == workload and m["case"] == case and m["engine"] == mine and m.get("compare_case"):
                denominator = _value(results, workload, m["compare_case"], peer, metric)
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


# -- Markdown ----------------------------------------------------------------------


def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "–"
    return format(value, METRICS[metric].fmt)


def _cases(results: Results, workload: str) -> list[str]:
    cases: list[str] = []
    for m in results["measurements"]:
        if m["workload"] == workload and m["case"] not in cases:
            cases.append(m["case"])
    return cases


def workload_table(results: Results, workload: str) -> str:
    """The Markdown table of one workload: a row per (case, metric), a column
    per engine, then a ratio column per peer."""
    engines = results["engines"]
    present = _engines_in(results, workload)
    pairs = ratio_pairs(results, workload)
    header = ["case", "metric", "better"] + [engines[e]["label"] for e in present]
    header += [f"{engines[mine]['label']} ÷ {engines[peer]['label']}" for mine, peer in pairs]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * 3 + "---:|" * (len(header) - 3)]
    for case in _cases(results, workload):
        used = [
            metric for metric in METRICS
            if any(_value(results, workload, case, e, metric) is not None for e in present)
        ]
        for index, metric in enumerate(used):
            spec = METRICS[metric]
            arrow = "" if spec.better is None else ("↑" if spec.better == HIGHER else "↓")
            # The case is named on its first row only, so cases read as blocks.
            row = [case if index == 0 else "", spec.label, arrow]
            row += [_fmt(metric, _value(results, workload, case, e, metric)) for e in present]
            for mine, peer in pairs:
                r = ratio(results, workload, case, metric, mine, peer) if spec.better else None
                row.append("–" if r is None else f"{r:.2f}×")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


WORKLOAD_TITLES = {
    "W1": "W1 — bulk load",
    "W2": "W2 — sequential durable single-key commits",
    "W3": "W3 — concurrent durable single-key commits",
    "W4": "W4 — random point gets, hot cache",
    "W5": "W5 — range scans",
    "W6": "W6 — SERIALIZABLE read-modify-write transactions (aborts not retried)",
    "W7": "W7 — durable commits on S3 (SeaweedFS on 127.0.0.1)",
}


def render_markdown(results: Results) -> str:
    """The whole report: header, settings, one table per workload, notes."""
    meta = results["meta"]
    machine = meta["machine"]
    git = meta["git"]
    dirty = f" plus uncommitted changes in {len(git['dirty_paths'])} path(s)" if git["dirty_paths"] else ""
    config = results["config"]
    out = [
        f"# lakekv benchmark results ({config['mode']} run)",
        "",
        f"* **Date**: {meta['date']}; run took {meta['duration_s']:.0f} s",
        f"* **Commit**: `{git['commit'][:12]}` ({git['subject']}){dirty}",
        f"* **Machine**: {machine['cores']} cores ({machine['cpu']}), "
        f"{machine['memory_bytes'] / 2**30:.1f} GiB RAM, {machine['platform']}, Python {machine['python']}",
        f"* **Storage**: {machine['data_filesystem']} (data dir `{machine['data_dir']}`)",
        f"* **Load average** (1/5/15 min): {meta['load_average_start']} at start, {meta['load_average_end']} at end "
        "— a shared machine: compare ratios within this run, not absolute numbers across runs",
        "* **Packages**: " + ", ".join(f"{k} {v}" for k, v in meta["packages"].items()),
        "",
        "Ratios are lakekv ÷ peer from this run. ↑ = higher is better (a ratio > 1 means lakekv is ahead);",
        "↓ = lower is better (a ratio > 1 means lakekv is behind). Each peer is compared with the lakekv",
        "configuration of the same durability class:",
        "",
    ]
    for key, engine in results["engines"].items():
        out.append(f"* **{engine['label']}** (`{key}`): durability = {engine['durability']}")
    out += ["", "## Results", ""]
    for workload in config["workloads"]:
        if not any(m["workload"] == workload for m in results["measurements"]):
            continue
        out += [f"### {WORKLOAD_TITLES[workload]}", "", workload_table(results, workload), ""]
        notes = _workload_notes(results, workload)
        if notes:
            out += notes + [""]
    if results["left_out"]:
        out += ["## Left out", ""]
        out += [f"* **{what}**: {why}" for what, why in results["left_out"].items()]
        out.append("")
    out += ["## Notes", ""] + [f"* {note}" for note in results["notes"]] + [""]
    out += ["## Settings", "", "Sizes (`BenchConfig`):", "", "```json", json.dumps(config, indent=1), "```", ""]
    for key, engine in results["engines"].items():
        out += [f"`{key}`:", "", "```json", json.dumps(engine["settings"], indent=1, default=str), "```", ""]
    return "\n".join(out)


def _workload_notes(results: Results, workload: str) -> list[str]:
    labels = {k: v["label"] for k, v in results["engines"].items()}
    notes = []
    for m in results["measurements"]:
        if m["workload"] != workload:
            continue
        where = f"{labels[m['engine']]}, {m['case']}"
        if "error" in m:
            notes.append(f"* **FAILED** {where}: {m['error']}")
        bad = {k: v for k, v in m.get("checks", {}).items() if v}
        if bad:
            notes.append(f"* **CHECK FAILED** {where}: {bad} — these figures are not valid")
        notes += [f"* {where}: {note}" for note in m.get("notes", [])]
    return notes


# -- plot ------------------------------------------------------------------------


def throughput_ratios(results: Results) -> list[tuple[str, str, float]]:
    """``(row label, peer label, lakekv ÷ peer)`` for every "higher is better" metric."""
    engines = results["engines"]
    rows = []
    for workload in results["config"]["workloads"]:
        pairs = ratio_pairs(results, workload)
        for case in _cases(results, workload):
            for metric, spec in METRICS.items():
                if spec.better != HIGHER:
                    continue
                for mine, peer in pairs:
                    r = ratio(results, workload, case, metric, mine, peer)
                    if r is not None:
                        rows.append((f"{workload} {case}", engines[peer]["label"], r))
    return rows


def write_plot(results: Results, path: Path) -> None:
    """Horizontal bars of lakekv ÷ peer throughput, log scale, one colour per peer."""
    import matplotlib

    matplotlib.use("Agg")  # no display: render straight to a file
    import matplotlib.pyplot as plt

    rows = throughput_ratios(results)
    labels = list(dict.fromkeys(label for label, _, _ in rows))
    peers = list(dict.fromkeys(peer for _, peer, _ in rows))
    colours = {peer: plt.get_cmap("tab10")(index % 10) for index, peer in enumerate(peers)}
    fig, ax = plt.subplots(figsize=(11, 1.5 + 0.75 * len(labels)))
    legend_done: set[str] = set()
    for row_index, label in enumerate(labels):
        # Bars share each row's band only among the peers that row has, so
        # W7's two comparisons do not sit in slots left empty for others.
        bars = [(peer, value) for who, peer, value in rows if who == label]
        height = 0.8 / len(bars)
        for slot, (peer, value) in enumerate(bars):
            y = row_index - 0.4 + height * (slot + 0.5)
            ax.barh(y, value, height=height, color=colours[peer],
                    label=None if peer in legend_done else f"lakekv ÷ {peer}")
            legend_done.add(peer)
            text = f"{value:.2f}×" if value < 10 else f"{value:,.0f}×"
            ax.annotate(text, (value, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=6)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("lakekv ÷ peer throughput, log scale (> 1: lakekv ahead); each peer against the lakekv "
                  "configuration of its durability class")
    meta = results["meta"]
    ax.set_title(
        f"lakekv vs peers, {results['config']['mode']} run, {meta['date']}, commit {meta['git']['commit'][:10]}, "
        f"{meta['machine']['cores']} cores", fontsize=10,
    )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(results: Results, out_dir: Path, stem: str) -> dict[str, Path]:
    """Write ``<stem>.json``, ``<stem>.md`` and ``<stem>.png`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {kind: out_dir / f"{stem}.{kind}" for kind in ("json", "md", "png")}
    write_json(results, paths["json"])
    paths["md"].write_text(render_markdown(results))
    write_plot(results, paths["png"])
    return paths
