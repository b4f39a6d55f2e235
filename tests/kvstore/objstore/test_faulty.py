"""FaultyStore: deterministic random faults, scripted before/after faults, crashes, latency."""

from __future__ import annotations

import threading
import time

import pytest

from kvstore.errors import ObjectStoreError
from kvstore.objstore import CrashedError, FaultRecord, FaultyStore, InjectedFaultError, MemoryStore


def workload(store: FaultyStore) -> list[str]:
    """A fixed call sequence; returns what each call did ("ok" or the error class)."""
    outcomes = []
    for i in range(200):
        path = f"k/{i % 17}"
        for call in (lambda: store.put(path, b"v"), lambda: store.get(path), lambda: store.put_if_absent(path + "x", b"v"),
                     lambda: list(store.list("k/")), lambda: store.head(path), lambda: store.delete(path + "x")):
            try:
                call()
                outcomes.append("ok")
            except (InjectedFaultError, FileNotFoundError) as exc:
                outcomes.append(type(exc).__name__)
    return outcomes


def make(seed: int, **kwargs: object) -> FaultyStore:
    return FaultyStore(MemoryStore(), seed=seed, **kwargs)  # type: ignore[arg-type]


def test_same_seed_same_fault_sequence() -> None:
    a, b = make(7, error_rate=0.1, after_rate=0.1), make(7, error_rate=0.1, after_rate=0.1)
    assert workload(a) == workload(b)
    assert a.log == b.log
    faults = [r.fault for r in a.log]
    assert faults.count("before") > 20 and faults.count("after") > 20  # the rates took effect


def test_different_seeds_differ() -> None:
    a, b = make(1, error_rate=0.2), make(2, error_rate=0.2)
    workload(a)
    workload(b)
    assert [r.fault for r in a.log] != [r.fault for r in b.log]


def test_sequence_does_not_depend_on_rates_of_other_kinds() -> None:
    # Three draws per call whatever the rates: "before" faults land on the same
    # calls with or without after-faults enabled.
    a, b = make(3, error_rate=0.1), make(3, error_rate=0.1, after_rate=0.3)
    workload(a)
    workload(b)
    assert [r.call_index for r in a.log if r.fault == "before"] == [r.call_index for r in b.log if r.fault == "before"]


def test_ops_restricts_random_faults() -> None:
    store = make(5, error_rate=1.0, ops=["put"])
    store.inner.put("x", b"1")
    assert store.get("x") == b"1"
    with pytest.raises(InjectedFaultError):
        store.put("x", b"2")
    assert store.inner.get("x") == b"1"


def test_before_fault_does_not_reach_storage() -> None:
    store = make(0)
    store.fail_next("put_if_absent", when="before")
    with pytest.raises(InjectedFaultError) as info:
        store.put_if_absent("_root", b"v")
    assert isinstance(info.value, ObjectStoreError)
    assert isinstance(info.value.__cause__, TimeoutError)
    with pytest.raises(FileNotFoundError):
        store.inner.get("_root")
    assert store.put_if_absent("_root", b"v") is True  # one-shot: the next call goes through


def test_after_fault_writes_then_raises() -> None:
    store = make(0)
    store.fail_next("put_if_absent", when="after")
    with pytest.raises(InjectedFaultError):
        store.put_if_absent("_root", b"mine")
    assert store.inner.get("_root") == b"mine"  # the ambiguous case: it landed
    assert store.put_if_absent("_root", b"again") is False


def test_fail_next_matches_prefix_and_count() -> None:
    store = make(0)
    store.fail_next("put", path_prefix="sst/", count=2)
    store.put("tree/a", b"1")
    for _ in range(2):
        with pytest.raises(InjectedFaultError):
            store.put("sst/a", b"1")
    store.put("sst/a", b"1")
    assert [r.fault for r in store.log] == [None, "before", "before", None]


def test_crash_after_lets_n_calls_through_then_fails_everything() -> None:
    store = make(0)
    store.crash_after(2)
    store.put("a", b"1")
    store.put("b", b"2")
    for call in (lambda: store.put("c", b"3"), lambda: store.get("a"), lambda: list(store.list())):
        with pytest.raises(CrashedError):
            call()
    assert store.crashed
    assert [m.path for m in store.inner.list()] == ["a", "b"]
    assert [r.fault for r in store.log] == [None, None, "crashed", "crashed", "crashed"]


def test_crash_now_and_crash_fault_after_write() -> None:
    store = make(0)
    store.fail_next("put_if_absent", when="after", crash=True)
    with pytest.raises(CrashedError):
        store.put_if_absent("_root", b"v")
    assert store.inner.get("_root") == b"v"  # died after the write landed
    with pytest.raises(CrashedError):
        store.get("_root")
    other = make(0)
    other.crash_now()
    with pytest.raises(CrashedError):
        other.head("x")


def test_log_records_every_call_in_order() -> None:
    store = make(0)
    store.put("a", b"1")
    store.get("a")
    list(store.list("a"))
    assert store.log == [FaultRecord(0, "put", "a", None), FaultRecord(1, "get", "a", None), FaultRecord(2, "list", "a", None)]


def test_latency_is_injected() -> None:
    store = make(0, latency=(0.05, 0.05))
    started = time.monotonic()
    store.put("a", b"1")
    store.get("a")
    # A lower bound only: sleeping can take longer on a loaded machine, never shorter.
    assert time.monotonic() - started >= 0.1


def test_thread_safe_call_counting() -> None:
    store = make(9, error_rate=0.3)

    def hammer(n: int) -> None:
        for i in range(200):
            try:
                store.put(f"t{n}/{i}", b"x")
            except InjectedFaultError:
                continue

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log = store.log
    assert [r.call_index for r in log] == list(range(1600))
    assert len(list(store.inner.list())) == sum(1 for r in log if r.fault is None)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"seed": "1"}, TypeError), ({"seed": 1, "error_rate": 1.5}, ValueError), ({"seed": 1, "after_rate": -0.1}, ValueError),
     ({"seed": 1, "latency": (0.2, 0.1)}, ValueError), ({"seed": 1, "latency": 0.1}, TypeError),
     ({"seed": 1, "ops": ["gett"]}, ValueError), ({"seed": 1, "ops": "get"}, TypeError)],
)
def test_bad_arguments(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        FaultyStore(MemoryStore(), **kwargs)  # type: ignore[arg-type]


def test_bad_script_arguments() -> None:
    store = make(0)
    with pytest.raises(ValueError, match="op"):
        store.fail_next("gett")
    with pytest.raises(ValueError, match="when"):
        store.fail_next("get", when="during")
    with pytest.raises(ValueError, match="count"):
        store.fail_next("get", count=0)
    with pytest.raises(ValueError, match="n_calls"):
        store.crash_after(-1)
