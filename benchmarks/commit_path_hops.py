"""How many calls a commit takes to reach its root file: the numbers in docs/architecture.md.

Run: ``.venv/bin/python benchmarks/commit_path_hops.py`` (from any directory;
``PYTHONPATH=<another checkout>`` measures that checkout's code instead). For
``table.append`` and for the Spark catalog plugin's commit request
(``ControlPlane.handle`` of ``commit_written``, what a Spark save sends), it
takes the stack at the moment the root file is published
(``VersionChain.publish``) and prints the project's frames from the entry
point to ``publish``, then their count and the number of files they are in.
Commits run on the caller's thread (``background=False``), so the stack is
the whole path.

``--whole-call`` also profiles one whole ``table.append`` (``sys.setprofile``,
every thread): the deepest chain of project frames, and how many project
files and functions it called.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

import pyarrow as pa

import catalog
from catalog.spark.control import ControlPlane, data_root
from kvstore.chain import VersionChain

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(catalog.__file__)))


def publish_stack(action: Callable[[], Any]) -> list[traceback.FrameSummary]:
    """The stack at the first root-file publish ``action`` makes."""
    stacks: list[traceback.StackSummary] = []
    publish = VersionChain.publish

    def spy(self: VersionChain, data: bytes, version: int) -> bool:
        stacks.append(traceback.extract_stack())
        return publish(self, data, version)

    VersionChain.publish = spy  # type: ignore[method-assign]
    try:
        action()
    finally:
        VersionChain.publish = publish  # type: ignore[method-assign]
    return list(stacks[0])


def report(label: str, stack: list[traceback.FrameSummary], entry: str) -> None:
    """Print the project's frames from the last call of ``entry`` to ``publish``, their count and files."""
    ours = [
        f for f in stack
        if f.filename.startswith(ROOT + os.sep)
        and os.sep + ".venv" + os.sep not in f.filename
        and os.path.abspath(f.filename) != os.path.abspath(__file__)  # the spy standing in for publish
    ]
    start = max(i for i, frame in enumerate(ours) if frame.name == entry)
    frames = [(os.path.relpath(f.filename, ROOT), f.name) for f in ours[start:]]
    frames.append((os.path.join("kvstore", "chain.py"), "publish"))
    print(f"{label}:")
    for path, name in frames:
        print(f"    {path} {name}")
    print(f"  {len(frames)} frames in {len({path for path, _ in frames})} files, entry to publish included")


def whole_call(action: Callable[[], Any]) -> tuple[int, int, int]:
    """(deepest chain of project frames, project files, project functions) of one call of ``action``."""
    files: set[str] = set()
    functions: set[tuple[str, str]] = set()
    deepest = 0

    def ours(filename: str) -> bool:
        return (
            filename.startswith(ROOT + os.sep)
            and os.sep + ".venv" + os.sep not in filename
            and os.path.abspath(filename) != os.path.abspath(__file__)
        )

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal deepest
        if event != "call" or not ours(frame.f_code.co_filename):
            return
        files.add(frame.f_code.co_filename)
        functions.add((frame.f_code.co_filename, frame.f_code.co_name))
        depth, outer = 0, frame
        while outer is not None:
            depth += ours(outer.f_code.co_filename)
            outer = outer.f_back
        deepest = max(deepest, depth)

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return deepest, len(files), len(functions)


def main() -> int:
    """Measure both paths on a fresh local lakehouse."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--whole-call", action="store_true", help="also profile one whole table.append")
    args = parser.parse_args()
    print(f"code under {ROOT}")
    with tempfile.TemporaryDirectory() as directory:
        lake = catalog.open(directory, background=False)
        try:
            lake.create_namespace("ns")
            table = lake.create_table("ns.t", pa.schema([("id", pa.int64())]))
            table.append(pa.table({"id": [0]}))
            report("table.append", publish_stack(lambda: table.append(pa.table({"id": [1, 2]}))), "append")
            if args.whole_call:
                deepest, files, functions = whole_call(lambda: table.append(pa.table({"id": [4]})))
                print(f"  whole call: deepest chain {deepest} frames; {files} files, {functions} functions called")
            plane = ControlPlane(lake, data_root(lake))
            written = table.write_files(pa.table({"id": [3]}))  # as Spark's writer leaves them
            request = {
                "op": "commit_written",
                "args": {"name": ["ns", "t"], "id": table.id, "files": [{"path": f.path, "crc32c": f.crc32c} for f in written]},
            }
            answers: list[dict[str, Any]] = []
            stack = publish_stack(lambda: answers.append(plane.handle(request)))
            if not answers[0]["ok"]:
                raise SystemExit(f"commit_written failed: {answers[0]}")
            report("Spark save (ControlPlane.handle of commit_written)", stack, "handle")
        finally:
            lake.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
