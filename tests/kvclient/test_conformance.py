"""The client's handles satisfy the engine's protocols (kvstore.api), as the
embedded ones do: checked statically by mypy here; tests/service/test_remote_api.py
checks live handles of both at run time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent(
    """
    from __future__ import annotations

    from kvclient import RemoteLease, RemoteStore, RemoteTransaction, RemoteWatch, open_remote
    from kvstore import Store, Transaction
    from kvstore.api import KeyValueLease, KeyValueStore, KeyValueTransaction, KeyValueWatch, StoreOpener
    from kvstore.leases import Lease
    from kvstore.watch import Watch


    def stores(embedded: Store, remote: RemoteStore) -> list[KeyValueStore]:
        return [embedded, remote]


    def transactions(embedded: Transaction, remote: RemoteTransaction) -> list[KeyValueTransaction]:
        return [embedded, remote]


    def leases(embedded: Lease, remote: RemoteLease) -> list[KeyValueLease]:
        return [embedded, remote]


    def watches(embedded: Watch, remote: RemoteWatch) -> list[KeyValueWatch]:
        return [embedded, remote]


    OPENER: StoreOpener = open_remote


    def control(txn: RemoteTransaction) -> KeyValueStore:
        return txn  # the one error expected: proves the checker sees the real types
    """
)


def test_both_stores_satisfy_the_protocols_for_mypy(tmp_path: Path) -> None:
    probe = tmp_path / "conformance_probe.py"
    probe.write_text(PROBE)
    # From the project root: pyproject's [tool.mypy] applies and the packages resolve.
    result = subprocess.run(
        [sys.executable, "-m", "mypy", str(probe)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    control_line = PROBE.splitlines().index("    return txn  # the one error expected: proves the checker sees the real types") + 1
    assert len(errors) == 1, result.stdout + result.stderr
    assert f"conformance_probe.py:{control_line}: error: Incompatible return value type" in errors[0], errors
