"""LocalStore specifics: atomic publication, hidden temp files, fsync, directories."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from full_disk_util import WRITTEN_PATH, free_bytes, tmpfs, writer_killed_mid_write
from kvstore.errors import NotWrittenError, ObjectStoreError
from kvstore.objstore import LocalStore
from kvstore.objstore import local as local_module

try:
    from cython_ext import _newfile  # internals: the compiled publish, its unnamed and named temp files side by side
except ImportError:  # not built: the Python path is tested alone
    _newfile = None


def test_readers_never_see_a_partial_object(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, fsync=False)
    sizes = [1, 3 * 1024 * 1024]  # alternate tiny and big objects under one name
    store.put("obj", b"a" * sizes[0])
    stop = threading.Event()
    seen: set[tuple[int, bytes]] = set()

    def writer() -> None:
        for i in range(60):
            size = sizes[i % 2]
            store.put("obj", bytes([97 + i % 2]) * size)
        stop.set()

    thread = threading.Thread(target=writer)
    thread.start()
    while not stop.is_set():
        data = store.get("obj")
        seen.add((len(data), data[:1]))
    thread.join()
    assert seen <= {(1, b"a"), (3 * 1024 * 1024, b"b")}


def test_temp_files_are_hidden_and_cleaned_up(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("a", b"1")
    assert store.put_if_absent("b", b"2")
    assert not store.put_if_absent("b", b"3")
    (tmp_path / ".tmp" / "leftover.tmp").write_bytes(b"crashed writer")
    assert [m.path for m in store.list()] == ["a", "b"]
    assert list(store.list(".tmp/")) == list(store.list(".tm")) == []
    assert sorted(os.listdir(tmp_path / ".tmp")) == ["leftover.tmp"]


def test_reserved_temp_dir_cannot_be_addressed(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    with pytest.raises(ValueError, match="reserved"):
        store.put(".tmp/x", b"1")


def test_stray_files_with_invalid_names_are_not_listed(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("ok", b"1")
    (tmp_path / "has space~").write_bytes(b"editor backup")
    assert [m.path for m in store.list()] == ["ok"]


@pytest.mark.parametrize("fsync", [True, False])
def test_fsync_flag_controls_fsync_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: bool) -> None:
    calls: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(local_module.os, "fsync", counting_fsync)
    store = LocalStore(tmp_path / "s", fsync=fsync)
    store.compiled_publish = False  # the Python twin: its os calls are the ones counted
    store.put("new/dir/a", b"1")
    store.put_if_absent("new/dir/b", b"2")
    if fsync:
        # file + parent dir for each object, plus the two new directories' parents.
        assert len(calls) >= 6
    else:
        assert calls == []


def test_delete_prunes_empty_directories_but_not_the_root(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("_doctor/abc/x/y", b"1")
    store.put("_doctor/keep", b"2")
    store.delete("_doctor/abc/x/y")
    assert not (tmp_path / "_doctor" / "abc").exists()
    assert (tmp_path / "_doctor" / "keep").exists()
    store.delete("_doctor/keep")
    assert sorted(os.listdir(tmp_path)) == [".tmp"]


def test_writes_race_with_directory_pruning(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, fsync=False)
    errors: list[BaseException] = []

    def churn(n: int) -> None:
        try:
            for i in range(200):
                store.put(f"d/{n}-{i}", b"x")
                store.delete(f"d/{n}-{i}")
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert list(store.list()) == []


def test_conditional_create_disabled_refuses_put_if_absent(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, conditional_create=False)
    with pytest.raises(ObjectStoreError, match="conditional create"):
        store.put_if_absent("a", b"1")
    store.put("a", b"1")
    assert store.get("a") == b"1"


def test_os_errors_become_object_store_errors(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("file", b"1")
    with pytest.raises(ObjectStoreError) as info:
        store.put("file/child", b"2")  # a file stands where a directory must go
    assert isinstance(info.value.__cause__, OSError)
    with pytest.raises(FileNotFoundError):
        store.get("file/child")


@pytest.mark.parametrize("error", [PermissionError(13, "denied"), OSError(5, "I/O error")], ids=["EACCES", "EIO"])
def test_io_errors_are_not_reported_as_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: OSError) -> None:
    store = LocalStore(tmp_path)
    store.put("obj", b"1")

    def failing(*args: object, **kwargs: object) -> None:
        raise error

    # Module-level names shadow the builtins/os functions LocalStore calls.
    monkeypatch.setattr(local_module, "open", failing, raising=False)
    monkeypatch.setattr(local_module.os, "stat", failing)
    monkeypatch.setattr(local_module.os, "scandir", failing)
    for call in (lambda: store.get("obj"), lambda: store.get_range("obj", 0, 1), lambda: store.head("obj"),
                 lambda: list(store.list())):
        with pytest.raises(ObjectStoreError) as info:
            call()
        assert info.value.__cause__ is error


def test_data_must_be_bytes(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="bytes"):
        LocalStore(tmp_path).put("a", "text")  # type: ignore[arg-type]


def test_root_argument_type_is_checked() -> None:
    with pytest.raises(TypeError, match="root_dir"):
        LocalStore(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("fsync", [True, False])
def test_compiled_publish_matches_the_python_twin(tmp_path: Path, fsync: bool) -> None:
    """put_if_absent through cython_ext._newfile and through the Python path:
    same outcomes, same bytes, no temp files left, same errors."""
    outcomes = {}
    for compiled in (True, False):
        store = LocalStore(tmp_path / str(compiled), fsync=fsync)
        store.compiled_publish = compiled
        results = [
            store.put_if_absent("a", b"first"),
            store.put_if_absent("a", b"second"),  # lost race: False, the first bytes stay
            store.put_if_absent("new/prefix/b", bytearray(b"x" * 70_000)),  # missing parents: the fallback
            store.put_if_absent("new/prefix/c", memoryview(b"abcdef")[1:4]),
            store.put_if_absent("empty", b""),
        ]
        with pytest.raises(ObjectStoreError):
            store.put_if_absent("a/child", b"1")  # a file stands where a directory must go
        with pytest.raises(TypeError, match="bytes-like"):
            store.put_if_absent("d", "text")  # type: ignore[arg-type]
        contents = {meta.path: store.get(meta.path) for meta in store.list()}
        assert os.listdir(store.root / ".tmp") == []
        outcomes[compiled] = (results, contents)
    assert outcomes[True] == outcomes[False]
    assert outcomes[True][0] == [True, False, True, True, True]
    assert outcomes[True][1]["a"] == b"first" and outcomes[True][1]["new/prefix/c"] == b"bcd"


@pytest.mark.skipif(_newfile is None, reason="cython_ext._newfile is not built")
@pytest.mark.parametrize("fsync", [True, False])
def test_unnamed_and_named_temp_files_publish_alike(tmp_path: Path, fsync: bool) -> None:
    """cython_ext._newfile with an O_TMPFILE inode and with a named temp file:
    the same outcome for a publish, a lost race and a missing directory, and no temp name left."""
    outcomes = {}
    for unnamed in (True, False):
        root = tmp_path / str(unnamed)
        (root / ".tmp").mkdir(parents=True)
        (root / "d").mkdir()
        temp = b"%s/.tmp/t" % os.fsencode(root)

        def publish(name: str, data: bytes) -> tuple[int, int]:
            final = os.fsencode(root / name)
            return _newfile.publish_new_file(temp, final, os.path.dirname(final), data, fsync, unnamed)

        steps = [publish("d/a", b"first" * 1000), publish("d/a", b"second"), publish("missing/b", b"x")]
        assert (root / "d" / "a").read_bytes() == b"first" * 1000
        assert os.listdir(root / ".tmp") == [] and sorted(os.listdir(root)) == [".tmp", "d"]
        outcomes[unnamed] = steps
    assert outcomes[True][:2] == outcomes[False][:2] == [(0, 0), (_newfile.LINK, errno.EEXIST)]
    # A missing directory: ENOENT at the step that first needs it (LocalStore
    # sends both to its Python path, which creates the directory).
    unnamed_step = _newfile.OPEN_TEMP if _newfile.unnamed_temp_files() and fsync else _newfile.LINK
    assert outcomes[True][2] == (unnamed_step, errno.ENOENT) and outcomes[False][2] == (_newfile.LINK, errno.ENOENT)


@pytest.mark.skipif(_newfile is None or not _newfile.unnamed_temp_files(), reason="no O_TMPFILE here")
def test_an_unnamed_temp_file_needs_no_temp_directory(tmp_path: Path) -> None:
    """With O_TMPFILE the temp name is never created: a publish works with no .tmp/ at all."""
    final = os.fsencode(tmp_path / "a")
    temp = os.fsencode(tmp_path / "no-such-dir" / "t")
    assert _newfile.publish_new_file(temp, final, os.fsencode(tmp_path), b"data", True) == (0, 0)
    assert _newfile.publish_new_file(temp, final, os.fsencode(tmp_path), b"data", True, False) == (
        _newfile.OPEN_TEMP, errno.ENOENT,
    )
    assert sorted(os.listdir(tmp_path)) == ["a"] and (tmp_path / "a").read_bytes() == b"data"


def test_compiled_publish_races_across_threads(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, fsync=False)
    wins: list[int] = []
    barrier = threading.Barrier(8)

    def contend(i: int) -> None:
        barrier.wait()
        if store.put_if_absent("race", b"%d" % i):
            wins.append(i)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and store.get("race") == b"%d" % wins[0]


# -- a full disk and temp files of dead writers (issue 35) ------------------------------


def _fill(store: LocalStore) -> None:
    """Put objects until the file system refuses (the refusals must be definite)."""
    for n in range(100_000):
        try:
            store.put(f"filler/{n}", os.urandom(64 * 1024 if free_bytes(store.root) > 64 * 1024 else 1024))
        except NotWrittenError:
            if free_bytes(store.root) == 0:
                return
    raise AssertionError("the file system never filled up")


@pytest.mark.parametrize("compiled", [True, False])
def test_a_write_refused_by_a_full_disk_is_not_written(tmp_path: Path, compiled: bool) -> None:
    with tmpfs(tmp_path / "disk", size_mb=2) as disk:
        store = LocalStore(disk / "store")
        store.compiled_publish = compiled
        store.put("old", b"before the disk filled")
        _fill(store)
        with pytest.raises(NotWrittenError, match="No space left"):
            store.put_if_absent("new", b"x" * 10_000)
        with pytest.raises(NotWrittenError, match="No space left"):
            store.put("old", b"y" * 10_000)
        with pytest.raises(FileNotFoundError):
            store.head("new")
        assert store.get("old") == b"before the disk filled"
        assert os.listdir(store.root / local_module.TEMP_DIR) == []  # no temp file left behind
        # touch writes no bytes: it works on the full disk.
        assert store.touch("old").mtime >= store.head("filler/0").mtime


def _age(path: Path, seconds: float) -> None:
    st = path.stat()
    os.utime(path, (st.st_atime - seconds, st.st_mtime - seconds))


def test_stale_temp_files_are_those_of_dead_writers_past_the_cutoff(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    writer_killed_mid_write(tmp_path, 100_000)
    temp_dir = tmp_path / local_module.TEMP_DIR
    [left] = list(temp_dir.iterdir())
    assert left.stat().st_size == 100_000
    with pytest.raises(FileNotFoundError):
        store.head(WRITTEN_PATH)
    # Young: kept, whoever wrote it.
    assert store.stale_temp_files(left.stat().st_mtime - 1.0) == []
    # A live writer's (this process's) old temp file: never.
    live = temp_dir / f"{os.getpid():x}-{'0' * 24}.tmp"
    live.write_bytes(b"a live writer, stalled")
    _age(live, 7200)
    # Not a name this store makes: never touched.
    stranger = temp_dir / "notes.txt"
    stranger.write_bytes(b"someone else's")
    _age(stranger, 7200)
    stale = store.stale_temp_files(left.stat().st_mtime)
    assert [meta.path for meta in stale] == [f"{local_module.TEMP_DIR}/{left.name}"]
    assert stale[0].size == 100_000
    store.delete_temp_file(stale[0].path)
    assert sorted(p.name for p in temp_dir.iterdir()) == sorted([live.name, stranger.name])
    store.delete_temp_file(stale[0].path)  # already gone: not an error


@pytest.mark.parametrize("path", ["obj", ".tmp/notes.txt", ".tmp/../obj", "sst/1-000000000000000000000000.tmp"])
def test_delete_temp_file_refuses_other_names(tmp_path: Path, path: str) -> None:
    store = LocalStore(tmp_path)
    store.put("obj", b"1")
    with pytest.raises(ValueError, match="not a temp file"):
        store.delete_temp_file(path)
    assert store.get("obj") == b"1"


def test_touch_of_a_missing_object_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        LocalStore(tmp_path).touch("nothing")
