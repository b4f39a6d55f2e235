"""docs/metadata-store.md: its Python examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "metadata-store.md"


def test_python_examples_run() -> None:
    every = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    # The HTTP example runs against a server: tests/service/test_docs_metadata_http.py; the etcd client
    # examples against an etcd endpoint: tests/service/test_docs_metadata_etcd.py.
    etcd_clients = [b for b in every if "import aetcd" in b or "etcd3gw" in b]
    blocks = [b for b in every if "http://" not in b and b not in etcd_clients]
    assert len(every) == len(blocks) + 1 + len(etcd_clients)
    assert blocks, "docs/metadata-store.md has no runnable example"
    for block in blocks:
        result = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-3000:]
    assert len(blocks) == 5  # revisions, reads and watches at a revision, the config watch, leases, the leader election
