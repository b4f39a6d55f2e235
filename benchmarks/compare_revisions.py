"""Before/after a change, in one run: lakekv at two git revisions, taking turns.

Run: ``.venv/bin/python benchmarks/compare_revisions.py --base REV [--head REV]
[--rounds N] [--full]``. Each round runs, for the base and then the head (the
order alternates every round, so drift of a shared machine falls on both):

* the catalog bench, lakekv only (``catalog_bench.py --systems lakekv``);
* the engine bench's W1 (the load W4 reads), W2 and W4, lakekv only
  (``bench.py --engines lakekv --workloads W1,W2,W4``).

Both are ``--quick`` unless ``--full``. Each revision runs its own benchmark
code against its own packages (a ``git worktree``, on ``PYTHONPATH``), with
this checkout's compiled extensions copied in: the script refuses when the
extensions' sources differ between the revisions. It prints, per measurement,
the median of the rounds for each revision and head ÷ base (for a rate,
above 1 is faster; for a time, below 1 is faster), with each side's spread
(max ÷ min over the rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The compiled extensions; a revision must build them from the same sources to borrow ours.
EXTENSION_SOURCES = ["cython_ext", "setup.py"]
# Rates (higher is better); every other metric compared is a time (lower is better).
RATE_KEYS = ("commits_per_s", "gets_per_s", "rows_per_s", "files_per_s")


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def worktree(rev: str, scratch: Path) -> Path:
    """A checkout of ``rev`` with this checkout's built extensions copied in."""
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    changed = subprocess.run(["git", "diff", "--quiet", sha, "HEAD", "--", *EXTENSION_SOURCES], cwd=ROOT).returncode
    if changed:
        raise SystemExit(f"{rev}: the compiled extensions' sources differ from this checkout's; build that revision first")
    path = scratch / sha[:12]
    git("worktree", "add", "--detach", str(path), sha)
    for built in ROOT.rglob("*.so"):
        relative = built.relative_to(ROOT)
        if relative.parts[0] == ".venv":
            continue
        (path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, path / relative)
    return path


def run(tree: Path, script: str, args: list[str], out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, str(tree / "benchmarks" / script), *args, "--out", str(out)]
    subprocess.run(command, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    (result,) = out.glob("*.json")
    data: dict = json.loads(result.read_text())
    shutil.rmtree(out)
    return data


def catalog_metrics(data: dict) -> dict[str, float]:
    out = {}
    for step, entry in data["measurements"]["lakekv"].items():
        for key, value in (entry.get("metrics") or {}).items():
            if key in RATE_KEYS or key == "median_ms" or (key == "seconds" and step not in ("setup", "single_writer", "many_writers")):
                out[f"catalog {step}: {key}"] = float(value)
    return out


def engine_metrics(data: dict) -> dict[str, float]:
    out = {}
    for entry in data["measurements"]:
        if entry["engine"] != "lakekv" or entry["workload"] not in ("W2", "W4"):
            continue
        for key, value in entry["metrics"].items():
            if key in RATE_KEYS or key in ("p50_ms", "p99_ms", "p50_us", "p99_us"):
                out[f"{entry['workload']} {entry['case']}: {key}"] = float(value)
    return out


def measure(tree: Path, full: bool, scratch: Path) -> dict[str, float]:
    quick = [] if full else ["--quick"]
    metrics = catalog_metrics(run(tree, "catalog_bench.py", ["--systems", "lakekv", *quick], scratch / "catalog"))
    engine = run(tree, "bench.py", ["--engines", "lakekv", "--workloads", "W1,W2,W4", *quick], scratch / "engine")
    metrics.update(engine_metrics(engine))
    return metrics


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the revision before the change")
    parser.add_argument("--head", default="HEAD", help="the revision after it (default HEAD)")
    parser.add_argument("--rounds", type=int, default=3, help="turns per revision (default 3)")
    parser.add_argument("--full", action="store_true", help="full benchmark sizes instead of --quick")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="lakekv-compare-"))
    trees: dict[str, Path] = {}
    try:
        trees = {"base": worktree(args.base, scratch), "head": worktree(args.head, scratch)}
        results: dict[str, list[dict[str, float]]] = {"base": [], "head": []}
        for round_ in range(args.rounds):
            order = ["base", "head"] if round_ % 2 == 0 else ["head", "base"]
            for side in order:
                print(f"round {round_ + 1}/{args.rounds}: {side}", file=sys.stderr, flush=True)
                results[side].append(measure(trees[side], args.full, scratch))
        report(args, results)
    finally:
        for tree in trees.values():
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def report(args: argparse.Namespace, results: dict[str, list[dict[str, float]]]) -> None:
    load = os.getloadavg()
    print(f"base {git('rev-parse', '--short', args.base)}, head {git('rev-parse', '--short', args.head)}; "
          f"{args.rounds} rounds each, {'full' if args.full else 'quick'} sizes; load average now {load[0]:.1f}")
    print("| measurement | base (median) | head (median) | head ÷ base | base spread | head spread |")
    print("|---|---:|---:|---:|---:|---:|")
    keys = [k for k in results["base"][0] if all(k in r for side in results.values() for r in side)]
    for key in keys:
        base = [r[key] for r in results["base"]]
        head = [r[key] for r in results["head"]]
        b, h = statistics.median(base), statistics.median(head)
        better = "faster" if (h > b) == (key.split(": ")[-1] in RATE_KEYS) else "slower"
        print(f"| {key} | {b:,.4g} | {h:,.4g} | {h / b:.2f} ({better}) | {spread(base):.2f} | {spread(head):.2f} |")


def spread(values: list[float]) -> float:
    return max(values) / min(values) if min(values) > 0 else float("inf")


if __name__ == "__main__":
    sys.exit(main())
