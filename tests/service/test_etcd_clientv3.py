"""Go ``clientv3``'s ``concurrency`` package (go.etcd.io/etcd/client/v3 3.5, from the Go module proxy) against
``lakekv serve --etcd-listen``: its Mutex (TryLock refused while held, Lock waiting for Unlock) and its
Election (Campaign, Leader, Observe, Proclaim, a leader whose session ends, Resign).

The client is tests/service/clientv3_probe, built by ``make etcd-clientv3-probe`` into .cache (``make test``
builds it first).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.service.etcd_peers import LakekvEtcd

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / ".cache" / "etcd-clientv3" / "clientv3_probe"


def test_clientv3_mutex_and_election(tmp_path: Path) -> None:
    assert PROBE.exists(), f"{PROBE} is not built: run `make etcd-clientv3-probe` (make test does)"
    server = LakekvEtcd(str(tmp_path / "store"), tmp_path / "serve.log").start()
    try:
        run = subprocess.run([str(PROBE), server.endpoint], capture_output=True, text=True, timeout=600)
    finally:
        server.stop()
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["second_trylock_while_held"] == "mutex: Locked by another session"
    assert seen["second_holds"].startswith("/probe/lock/") and seen["first_key"] == "\x00"  # released
    assert (seen["leader_first"], seen["observed_first"], seen["observed_proclaim"]) == (
        "alice", "alice", "alice-again"
    )
    assert seen["leader_after"] == "bob"
    assert seen["after_resign"] == "election: no leader"
