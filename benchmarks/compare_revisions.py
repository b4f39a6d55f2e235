"""Before/after a change, in one run: lakekv at two git revisions, taking turns.

Run: ``.venv/bin/python benchmarks/compare_revisions.py --base REV [--head REV]
[--rounds N] [--full | --appends N]``. Each round runs, for the base and then
the head (the order alternates every round, so drift of a shared machine falls
on both):

* the catalog bench, lakekv only (``catalog_bench.py --systems lakekv``);
* the engine bench's W1 (the load W4 reads), W2 and W4, lakekv only
  (``bench.py --engines lakekv --workloads W1,W2,W4``).

Both are ``--quick`` unless ``--full``. Each revision runs its own benchmark
code against its own packages (a ``git worktree``, on ``PYTHONPATH``), with
this checkout's compiled extensions copied in: the script refuses when the
extensions' sources differ between the revisions.

``--appends N`` measures native appends alone, at sizes where a 5% change
shows (quick mode's 4 appends are too few): the catalog bench's
``single_writer`` (N appends), ``many_writers`` (4 processes, N/4 appends
each) and ``build_files`` (N files, 10 commits) phases, with this checkout's
benchmark code (``benchmarks/lakehouse``, the same for both sides) against
each revision's packages, each phase's rate and, for the phases in the
benchmark's own process, its CPU time per commit; no engine bench. It prints, per measurement,
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


def append_metrics(tree: Path, appends: int, scratch: Path) -> dict[str, float]:
    """The catalog bench's append phases, this checkout's benchmark code on ``tree``'s packages (a process of its own)."""
    out = scratch / "appends.json"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, str(Path(__file__).resolve()), "--measure-appends", str(appends), str(scratch / "lake"), str(out)]
    subprocess.run(command, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    data: dict[str, float] = json.loads(out.read_text())
    out.unlink()
    shutil.rmtree(scratch / "lake", ignore_errors=True)
    return data


def measure_appends(appends: int, root: Path, out: Path) -> None:
    """Run in the revision's process: setup, single_writer, many_writers, build_files of lakekv at ``appends``."""
    from dataclasses import replace

    # This checkout's benchmark code (sys.path[0] is this file's folder); catalog comes from PYTHONPATH.
    from lakehouse import workloads
    from lakehouse.config import CatalogBenchConfig
    from lakehouse.run import Run

    files_per_commit = max(1, appends // 10)
    config = replace(
        CatalogBenchConfig.quick(), single_writer_appends=appends, appends_per_writer=max(1, appends // 4),
        files=files_per_commit * 10, files_per_commit=files_per_commit,
    )
    run = Run(config, root, ["lakekv"], None)
    run.setup("lakekv")
    system = run.systems["lakekv"]
    phases = {
        "single_writer": (lambda: workloads.single_writer(system, config), "committed"),
        "many_writers": (lambda: workloads.many_writers(system, root / "lakekv", config), "committed"),
        "build_files": (lambda: run.build("lakekv"), "commits"),
    }
    metrics: dict[str, float] = {}
    for step, (phase, commits) in phases.items():
        cpu0 = _cpu_s()
        result = phase()
        cpu = _cpu_s() - cpu0
        failed = workloads.failed_checks(result)
        if failed or result["metrics"].get("gave_up"):
            raise SystemExit(f"{step}: failed checks {failed} or appends given up: {result['metrics']}")
        for key in RATE_KEYS:
            if key in result["metrics"]:
                metrics[f"catalog {step}: {key}"] = float(result["metrics"][key])
        if step != "many_writers":
            # CPU per commit: on a loaded machine it moves less than a rate. Not for the writer processes,
            # whose CPU would include their start (imports), which their rate leaves out.
            metrics[f"catalog {step}: cpu_ms_per_commit"] = cpu * 1000 / max(1, int(result["metrics"][commits]))
    system.close()
    out.write_text(json.dumps(metrics))


def _cpu_s() -> float:
    """CPU time (user + system) of this process so far."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def measure(tree: Path, full: bool, scratch: Path, appends: int | None = None) -> dict[str, float]:
    if appends is not None:
        return append_metrics(tree, appends, scratch)
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
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--full", action="store_true", help="full benchmark sizes instead of --quick")
    sizes.add_argument("--appends", type=int, default=None, metavar="N",
                       help="native appends alone: the catalog bench's append phases at N appends (see above)")
    if len(sys.argv) == 5 and sys.argv[1] == "--measure-appends":  # the per-revision process of --appends
        measure_appends(int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
        return 0
    args = parser.parse_args()
    if args.appends is not None and args.appends < 4:
        parser.error(f"--appends must be at least 4 (one per writer process), got {args.appends}")
    scratch = Path(tempfile.mkdtemp(prefix="lakekv-compare-"))
    trees: dict[str, Path] = {}
    try:
        trees = {"base": worktree(args.base, scratch), "head": worktree(args.head, scratch)}
        results: dict[str, list[dict[str, float]]] = {"base": [], "head": []}
        for round_ in range(args.rounds):
            order = ["base", "head"] if round_ % 2 == 0 else ["head", "base"]
            for side in order:
                print(f"round {round_ + 1}/{args.rounds}: {side}", file=sys.stderr, flush=True)
                results[side].append(measure(trees[side], args.full, scratch, args.appends))
        report(args, results)
    finally:
        for tree in trees.values():
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def report(args: argparse.Namespace, results: dict[str, list[dict[str, float]]]) -> None:
    load = os.getloadavg()
    print(f"base {git('rev-parse', '--short', args.base)}, head {git('rev-parse', '--short', args.head)}; "
          f"{args.rounds} rounds each, {sizes(args)}; load average now {load[0]:.1f}")
    print("| measurement | base (median) | head (median) | head ÷ base | base spread | head spread |")
    print("|---|---:|---:|---:|---:|---:|")
    keys = [k for k in results["base"][0] if all(k in r for side in results.values() for r in side)]
    for key in keys:
        base = [r[key] for r in results["base"]]
        head = [r[key] for r in results["head"]]
        b, h = statistics.median(base), statistics.median(head)
        better = "faster" if (h > b) == (key.split(": ")[-1] in RATE_KEYS) else "slower"
        print(f"| {key} | {b:,.4g} | {h:,.4g} | {h / b:.2f} ({better}) | {spread(base):.2f} | {spread(head):.2f} |")


def sizes(args: argparse.Namespace) -> str:
    if args.appends is not None:
        return f"append phases only, {args.appends} appends (this checkout's benchmark code)"
    return "full sizes" if args.full else "quick sizes"


def spread(values: list[float]) -> float:
    return max(values) / min(values) if min(values) > 0 else float("inf")


if __name__ == "__main__":
    sys.exit(main())
