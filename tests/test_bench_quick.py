"""The benchmark harness (benchmarks/harness): its pure helpers, and one
``--quick`` run end to end.

The quick run checks that every workload ran on every engine (or that the
engine was left out with a stated reason), that every figure is a sane
number and that the report files were written. It never asserts speed: the
machine is shared, and a benchmark's numbers are its output, not its test.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from harness import data, report  # noqa: E402 - needs the path above
from harness.config import WORKLOADS  # noqa: E402
from harness.workloads import Measurement, median_round, percentile  # noqa: E402

PEERS = ("lmdb", "rocksdb", "sqlite", "slatedb")


# -- helpers ---------------------------------------------------------------------


def test_keys_sort_numerically_and_scan_ranges_hold_exactly_span_rows() -> None:
    assert sorted([data.key(10), data.key(9), data.key(100)]) == [data.key(9), data.key(10), data.key(100)]
    assert all(len(data.key(i)) == data.KEY_BYTES for i in (0, 999_999))
    for start, end in data.scan_ranges(5000, 50, 1000, seed=3):
        assert int(end) - int(start) == 1000 and int(end) <= 5000


def test_load_batches_cover_every_row_once_with_fixed_size_values() -> None:
    batches = data.load_batches(2500, 1000, seed=1, values=data.Values(1))
    assert [len(b) for b in batches] == [1000, 1000, 500]
    keys = [k for batch in batches for k, _ in batch]
    assert sorted(keys) == [data.key(i) for i in range(2500)]
    assert {len(v) for batch in batches for _, v in batch} == {data.VALUE_BYTES}


def test_zipfian_is_skewed_and_in_range() -> None:
    chooser = data.Zipfian(10_000, theta=0.99, seed=7)
    draws = [chooser.next() for _ in range(50_000)]
    assert all(0 <= d < 10_000 for d in draws)
    counts = sorted((draws.count(d) for d in set(draws[:2000])), reverse=True)
    # The hottest key takes a large share; a uniform draw would give ~5 each.
    assert counts[0] > 50 * 5


def test_percentile_nearest_rank() -> None:
    samples = [float(i) for i in range(1, 101)]
    assert percentile(samples, 0.5) == 51.0
    assert percentile(samples, 0.99) == 100.0
    with pytest.raises(ValueError):
        percentile([], 0.5)


@pytest.mark.parametrize(("option", "message"), [
    ("--rounds=0", "rounds must be >= 1"), ("--rows=0", "rows (0) must be at least"), ("--workloads=W9", "unknown workload"),
])
def test_a_bad_option_is_a_usage_error_naming_it(option: str, message: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "bench.py"), option, "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())  # nothing ran, nothing written


def test_median_round_stands_for_its_case_and_keeps_every_rounds_checks() -> None:
    def measured(rate: float, lost: int, p50: float) -> Measurement:
        return Measurement("W6", "hot", "lakekv", metrics={"commits_per_s": rate, "p50_ms": p50, "n": 7},
                           checks={"lost_updates": lost}, notes=[f"p50 {p50}"])

    combined = median_round([measured(900.0, 0, 1.0), measured(300.0, 2, 3.0), measured(600.0, 0, 2.0)],
                            "commits_per_s")
    # The median round's figures travel together; n and checks cover all rounds.
    assert combined.metrics == {"commits_per_s": 600.0, "p50_ms": 2.0, "n": 21}
    assert combined.checks == {"lost_updates": 2}
    assert combined.notes[0] == "p50 2.0" and "900, 300, 600" in combined.notes[1]
    # An even count takes the lower middle round, never an average of two.
    assert median_round([measured(900.0, 0, 1.0), measured(300.0, 0, 3.0)], "commits_per_s").metrics["p50_ms"] == 3.0
    with pytest.raises(ValueError, match="no rounds"):
        median_round([], "commits_per_s")
    other = Measurement("W6", "cold", "lakekv", metrics={"commits_per_s": 1.0, "n": 1})
    with pytest.raises(ValueError, match="different cases"):
        median_round([measured(1.0, 0, 1.0), other], "commits_per_s")


def test_ratios_pair_each_peer_with_lakekv_of_the_same_durability() -> None:
    results: dict[str, Any] = {
        "engines": {
            "lakekv": {"label": "lakekv", "family": "lakekv", "durability": "fsync"},
            "lakekv-nofsync": {"label": "lakekv (no fsync)", "family": "lakekv", "durability": "buffered"},
            "lmdb": {"label": "LMDB", "family": "lmdb", "durability": "fsync"},
            "slatedb": {"label": "SlateDB", "family": "slatedb", "durability": "buffered"},
        },
        "measurements": [
            {"workload": "W2", "case": "c", "engine": "lakekv", "metrics": {"commits_per_s": 100.0}},
            {"workload": "W2", "case": "c", "engine": "lakekv-nofsync", "metrics": {"commits_per_s": 400.0}},
            {"workload": "W2", "case": "c", "engine": "lmdb", "metrics": {"commits_per_s": 50.0}},
            {"workload": "W2", "case": "c", "engine": "slatedb", "metrics": {"commits_per_s": 200.0}},
        ],
    }
    assert report.ratio_pairs(results, "W2") == [("lakekv", "lmdb"), ("lakekv-nofsync", "slatedb")]
    assert report.ratio(results, "W2", "c", "commits_per_s", "lakekv", "lmdb") == 2.0
    assert report.ratio(results, "W2", "c", "commits_per_s", "lakekv-nofsync", "slatedb") == 2.0


# -- the quick run ----------------------------------------------------------------


def _finite_positive(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.timeout(600)  # a hang guard only; the run itself takes well under 2 minutes
def test_quick_run_produces_every_workload_and_sane_numbers(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench.py"), "--quick", "--out", str(out), "--data-dir", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=590,
    )
    assert proc.returncode == 0, f"bench.py --quick failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"

    paths = {kind: out / f"bench-quick.{kind}" for kind in ("json", "md", "png")}
    for path in paths.values():
        assert path.is_file() and path.stat().st_size > 0, path
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = json.loads(paths["json"].read_text())

    meta = results["meta"]
    assert meta["machine"]["cores"] >= 1 and meta["machine"]["memory_bytes"] > 0
    assert meta["git"]["commit"] and meta["date"] and len(meta["load_average_end"]) == 3
    measurements = results["measurements"]
    assert not [m for m in measurements if "error" in m]

    # Every workload ran, and every peer either ran or was left out with a reason.
    assert {m["workload"] for m in measurements} == set(WORKLOADS)
    for peer in PEERS:
        ran = {m["workload"] for m in measurements if m["engine"] == peer}
        if peer in results["left_out"]:
            assert results["left_out"][peer].strip()
            continue
        expected = {"W1", "W2", "W3", "W4", "W5"} | ({"W6"} if peer != "rocksdb" else set())
        assert expected <= ran, (peer, ran)
    assert {m["engine"] for m in measurements if m["workload"] == "W7"} >= {"lakekv-s3", "raw-put-s3"}

    for m in measurements:
        metrics, where = m.get("metrics", {}), f"{m['workload']} {m['engine']} {m['case']}"
        assert metrics, where
        for name in ("rows_per_s", "commits_per_s", "gets_per_s", "n"):
            if name in metrics:
                assert _finite_positive(metrics[name]), (where, name, metrics[name])
        if "p50_ms" in metrics:
            assert 0 < metrics["p50_ms"] <= metrics["p99_ms"], where
        if "p50_us" in metrics:
            assert 0 < metrics["p50_us"] <= metrics["p99_us"], where
        if "abort_rate" in metrics:
            assert 0 <= metrics["abort_rate"] < 1, where
        assert all(v == 0 for v in m.get("checks", {}).values()), (where, m["checks"])

    # W2: lakekv and the new-file floor were measured taking turns, as many commits each.
    turns = {
        m["engine"]: m for m in measurements
        if m["workload"] == "W2" and m["case"] == "1 writer" and m["engine"] in ("lakekv", "fs-floor")
    }
    assert set(turns) == {"lakekv", "fs-floor"}
    assert turns["lakekv"]["metrics"]["n"] == turns["fs-floor"]["metrics"]["n"] == results["config"]["seq_commits"]
    assert all("taking turns" in " ".join(m["notes"]) for m in turns.values())

    # Pessimistic engines never abort; all W1 rows landed and take disk space.
    for m in measurements:
        if m["workload"] == "W6" and m["engine"] in ("lmdb", "sqlite"):
            assert m["metrics"]["abort_rate"] == 0
        if m["workload"] == "W1":
            assert m["metrics"]["n"] == results["config"]["rows"] and m["metrics"]["disk_mb"] > 0
            if Path("/proc/self/io").is_file():  # this process's own writes, beside the device's
                assert m["metrics"]["process_write_amplification"] > 0
        if m["workload"] == "W4":  # the rate is the median of the timed passes it names
            [note] = [n for n in m["notes"] if n.startswith("median of ")]
            assert 1 <= int(note.split()[2]) <= 5
        if m["workload"] in ("W3", "W6", "W7"):  # measured in rounds; the note names each round's rate
            [note] = [n for n in m["notes"] if n.startswith("median of ")]
            assert note.startswith(f"median of {results['config']['rounds']} rounds")

    markdown = paths["md"].read_text()
    for title in report.WORKLOAD_TITLES.values():
        assert f"### {title}" in markdown
    assert "lakekv ÷ LMDB" in markdown and meta["git"]["commit"][:12] in markdown
