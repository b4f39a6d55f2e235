"""Summarise a py-spy ``raw`` (collapsed stacks) profile: where the time goes.

Record a profile of one workload on lakekv, then summarise it:

    .venv/bin/py-spy record -f raw --idle -r 250 -o w2.txt -- \\
        .venv/bin/python benchmarks/bench.py --workloads W2 --engines lakekv --out /tmp/p
    .venv/bin/python benchmarks/harness/stacks.py w2.txt --within durable_commits --within committer.py

``--within`` keeps only samples whose stack contains one of the given
substrings (the workload function, or the committer thread's module), so
setup such as W1's load does not drown the workload being studied. The
output lists self time by function (the leaf frame) and inclusive time of
the functions that matter most, as shares of the kept samples.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

# "function (path/file.py:123)" -> ("function", "path/file.py")
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]+)(?::\d+)?\)$")


def parse(lines: Iterable[str]) -> list[tuple[list[str], int]]:
    """Collapsed lines ``frame;frame;... count`` -> (frames root first, count)."""
    stacks = []
    for line in lines:
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        stacks.append((stack.split(";"), int(count)))
    return stacks


def function_name(frame: str) -> str:
    """``"get (kvstore/store.py:201)"`` -> ``"kvstore/store.py:get"``, line numbers dropped.

    >>> function_name("get (kvstore/store.py:201)")
    'kvstore/store.py:get'
    >>> function_name("process 1234:\\"python bench.py\\"")
    'process 1234:"python bench.py"'
    """
    match = _FRAME.match(frame)
    if match is None:
        return frame
    return f"{match['file']}:{match['func']}"


def summarise(stacks: Sequence[tuple[list[str], int]], within: Sequence[str], top: int) -> str:
    """Self and inclusive shares of the samples whose stack contains any of ``within``."""
    kept = [(frames, n) for frames, n in stacks if not within or any(w in f for f in frames for w in within)]
    total = sum(n for _, n in kept)
    if not total:
        return "no samples matched"
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for frames, n in kept:
        self_time[function_name(frames[-1])] += n
        for name in {function_name(f) for f in frames}:
            inclusive[name] += n
    lines = [f"{total} samples kept", "", "self time (leaf frame):"]
    lines += [f"  {n / total:6.1%}  {name}" for name, n in self_time.most_common(top)]
    lines += ["", "inclusive time:"]
    lines += [f"  {n / total:6.1%}  {name}" for name, n in inclusive.most_common(top * 2)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path, help="py-spy record -f raw output")
    parser.add_argument("--within", action="append", default=[], help="keep stacks containing this (repeatable)")
    parser.add_argument("--top", type=int, default=15, help="rows per list (default 15)")
    args = parser.parse_args(argv)
    with args.profile.open() as lines:
        print(summarise(parse(lines), args.within, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
