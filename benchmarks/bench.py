"""Benchmarks against the peers, side by side in one run.

Run: ``.venv/bin/python benchmarks/bench.py [--quick] [--out DIR]`` (or
``make bench``, or ``lakekv bench``). Writes ``bench.json``, ``bench.md`` and
``bench.png`` (``bench-quick.*`` with ``--quick``) under ``--out``
(default ``benchmarks/results/``). ``--help`` lists the size options.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The harness is a package next to this file, not part of the installed lakekv.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.run import main  # noqa: E402 - needs the path set above

if __name__ == "__main__":
    sys.exit(main())
