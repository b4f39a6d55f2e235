"""Object store on a POSIX filesystem: one file per object under a root directory.

Writes never expose a partial object: the bytes go to a temp file under
``<root>/.tmp/`` first, are fsynced, and only then get their final name.

* ``put_if_absent`` publishes with ``os.link(temp, final)``: the kernel creates
  the name atomically and fails with ``EEXIST`` if it is taken, so exactly one
  of any number of racing writers (threads or processes) wins. Where the
  file system allows it, the compiled path (``cython_ext._newfile``) writes an
  unnamed ``O_TMPFILE`` inode in the final directory instead of a temp file
  in ``.tmp/``, and links that: nothing is left behind by a writer killed
  mid-write, and a commit changes one directory instead of two.
* ``put`` publishes with ``os.replace`` (atomic rename, overwrites).

A write that fails before its name exists (the temp file could not be
written: a full disk, a quota) or whose link/rename the kernel refused raises
:class:`~kvstore.errors.NotWrittenError`: nothing new is under the name.

Temp files of writers killed mid-write stay in ``.tmp/``;
:meth:`LocalStore.stale_temp_files` finds them for GC (see its docstring for
why a live writer's temp file is never taken).

After publishing, the parent directory is fsynced so the new name survives a
power loss; newly created parent directories are fsynced into their own
parents for the same reason. ``fsync=False`` skips every fsync (tests,
benchmarks, scratch data): objects stay atomic but the last writes may be lost
on a crash of the machine (not of the process).
"""

from __future__ import annotations

import builtins
import errno
import os
import random
import re
import stat
from pathlib import Path
from typing import Callable, Iterator

from kvstore.errors import NotWrittenError, ObjectStoreError
from kvstore.objstore.base import ObjectMeta, validate_path, validate_prefix

try:
    from cython_ext import _newfile
except ImportError:  # not built: the Python twin does the same, slower beside busy threads
    _newfile = None

TEMP_DIR = ".tmp"
"""Name of the root's subdirectory holding in-flight temp files; never listed."""
_TEMP_DIR_BYTES = TEMP_DIR.encode()

# A delete prunes empty parent directories, so a concurrent writer may find its
# freshly created parent gone before it links into it; it recreates the
# directory and tries again. Every such retry means a concurrent delete made
# progress (lock-free style), so a writer only starves under sustained churn
# in one directory. Measured with 4 threads putting and deleting in one
# directory: about 1 attempt in 8 is lost and runs decay geometrically (the
# longest of 8000 puts was 7), so 100 attempts never run out in practice.
_PUBLISH_ATTEMPTS = 100

# link(2)/rename(2) failures that mean "refused, nothing done". Anything else
# (EIO, ETIMEDOUT on a network file system) may hide a done link.
_REFUSED = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EMLINK, errno.ENAMETOOLONG}
)
# What _temp_name makes: "<pid hex>-<96 random bits hex>.tmp".
_TEMP_NAME_RE = re.compile(r"^([0-9a-f]{1,16})-[0-9a-f]{24}\.tmp$")


def check_range(path: str, start: int, end: int) -> None:
    """Validate the ``[start, end)`` arguments of ``get_range``.

    Raises:
        TypeError: ``start`` or ``end`` is not an int.
        ValueError: ``start`` is negative or ``end < start``.
    """
    for name, value in (("start", start), ("end", end)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"get_range {name} must be int, not {type(value).__name__}")
    if start < 0 or end < start:
        raise ValueError(f"invalid range [{start}, {end}) for {path!r}")


class LocalStore:
    """Objects as files under ``root_dir``; safe across threads and processes.

    Args:
        root_dir: directory holding the objects; created (with parents) if missing.
        fsync: fsync files and directories so published objects survive a crash
            of the machine.
        conditional_create: when False, ``put_if_absent`` is refused, modelling
            an object store without ``If-None-Match`` (tests of the LMDB commit
            store run several processes over such a store).
        create: create ``root_dir`` now. With False, a missing directory
            reads as empty and writes fail until it exists (read-only
            commands on a mistyped path must not leave directories behind).
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        *,
        fsync: bool = True,
        conditional_create: bool = True,
        create: bool = True,
    ) -> None:
        if not isinstance(root_dir, (str, os.PathLike)):
            raise TypeError(f"root_dir must be a str or path, not {type(root_dir).__name__}")
        self.root = Path(root_dir).expanduser().resolve()
        self.url = self.root.as_uri()
        self._root_bytes = os.fsencode(self.root)  # the commit path builds its names as bytes
        self.fsync = fsync
        self.conditional_create = conditional_create
        # Temp names from a generator seeded once from the OS (uuid4 asks the
        # OS on every write, and that call releases the GIL, which costs a
        # commit up to a switch interval beside a busy thread).
        self._names = random.Random(os.urandom(32))
        # put_if_absent (every commit) through cython_ext._newfile when built;
        # tests set False to run the Python twin.
        self.compiled_publish = True
        if not create:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            (self.root / TEMP_DIR).mkdir(exist_ok=True)
        except OSError as exc:
            raise ObjectStoreError(f"cannot create store directory {self.root}: {exc}") from exc

    # -- reads ---------------------------------------------------------------

    def get(self, path: str) -> bytes:
        full = self._file(path)
        try:
            with open(full, "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
            # A directory or a file standing where a directory should be both
            # mean "there is no object of that name", not a storage failure.
            raise FileNotFoundError(path) from exc
        except OSError as exc:
            raise ObjectStoreError(f"get {path!r} from {self.url} failed: {exc}") from exc

    def get_range(self, path: str, start: int, end: int) -> bytes:
        check_range(path, start, end)
        full = self._file(path)
        try:
            with open(full, "rb") as f:
                f.seek(start)
                return f.read(end - start)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
            raise FileNotFoundError(path) from exc
        except OSError as exc:
            raise ObjectStoreError(f"get_range {path!r} from {self.url} failed: {exc}") from exc

    def head(self, path: str) -> ObjectMeta:
        full = self._file(path)
        try:
            st = os.stat(full)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise FileNotFoundError(path) from exc
        except OSError as exc:
            raise ObjectStoreError(f"head {path!r} on {self.url} failed: {exc}") from exc
        if not stat.S_ISREG(st.st_mode):
            raise FileNotFoundError(path)  # a directory is not an object
        return _meta(path, st)

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        validate_prefix(prefix)
        # Walk only below the deepest directory the prefix names.
        start_dir = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        found: list[ObjectMeta] = []
        if start_dir.split("/", 1)[0] == TEMP_DIR:
            return iter(found)  # temp files are never objects
        try:
            self._walk(self.root / start_dir if start_dir else self.root, start_dir, prefix, found)
        except OSError as exc:
            raise ObjectStoreError(f"list {prefix!r} on {self.url} failed: {exc}") from exc
        found.sort(key=lambda meta: meta.path)
        return iter(found)

    # -- writes --------------------------------------------------------------

    def put(self, path: str, data: bytes) -> None:
        full = self._file(path)
        temp = self._write_temp(path, data)
        try:
            self._publish(path, full, lambda: os.replace(temp, full))
        finally:
            _unlink_quietly(temp)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        _check_object_path(path)
        if not self.conditional_create:
            raise ObjectStoreError(
                f"{self.url} was opened without conditional create; "
                "wrap it in an LMDB commit store (objstore.lmdb_commit)"
            )
        if self.compiled_publish and _newfile is not None:
            published = self._put_if_absent_compiled(path, data)
            if published is not None:
                return published
        return self._put_if_absent_py(path, self._file(path), data)

    def _put_if_absent_compiled(self, path: str, data: bytes) -> bool | None:
        """``cython_ext._newfile``'s one-call publish (see its docstring); None: use the Python path.

        The compiled call covers the usual case; a missing ``.tmp`` or parent
        directory (the first object under a new prefix) goes to the Python
        path, which creates and fsyncs directories. The names are built as
        bytes, not ``Path`` objects: this runs once per commit, and pathlib
        cost about 50 us of it.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data for {path!r} must be bytes-like, not {type(data).__name__}")
        view = memoryview(data).cast("B")
        if not view.c_contiguous:
            return None
        relative = os.fsencode(path)  # put_if_absent validated it: "/"-separated, no "." or ".."
        directory = relative.rpartition(b"/")[0]
        parent = self._root_bytes + b"/" + directory if directory else self._root_bytes
        temp = b"%s/%s/%x-%024x.tmp" % (self._root_bytes, _TEMP_DIR_BYTES, os.getpid(), self._names.getrandbits(96))
        step, err = _newfile.publish_new_file(temp, self._root_bytes + b"/" + relative, parent, view, self.fsync)
        if step == 0:
            return True
        if step == _newfile.LINK and err == errno.EEXIST:
            return False
        if err in (errno.ENOENT, errno.ENOTDIR) and step in (_newfile.OPEN_TEMP, _newfile.LINK):
            return None  # a directory is missing (or a file stands in its place): the Python path decides
        what = {
            _newfile.OPEN_TEMP: "writing",
            _newfile.WRITE_TEMP: "writing",
            _newfile.FSYNC_TEMP: "writing",
            _newfile.LINK: "publishing",
        }.get(step)
        if what is None:
            raise ObjectStoreError(
                f"fsync of {os.fsdecode(parent)} failed after writing {path!r}: {OSError(err, os.strerror(err))}"
            )
        # Before the link the name cannot exist; a refused link made none.
        definite = step != _newfile.LINK or err in _REFUSED
        error = NotWrittenError if definite else ObjectStoreError
        raise error(f"{what} {path!r} to {self.url} failed: {OSError(err, os.strerror(err))}")

    def _put_if_absent_py(self, path: str, full: Path, data: bytes) -> bool:
        """The Python twin of :meth:`_put_if_absent_compiled` (and its fallback)."""
        temp = self._write_temp(path, data)
        try:
            # link(2) fails with EEXIST if the name is taken: the atomic check.
            self._publish(path, full, lambda: os.link(temp, full))
        except FileExistsError:
            return False
        finally:
            # On success the data lives on under the final name; on a lost race
            # the temp file is garbage. Either way the temp name goes.
            _unlink_quietly(temp)
        return True

    def touch(self, path: str) -> ObjectMeta:
        """Stamp an existing object with the storage's current time; write no bytes.

        Works on a full disk (only the inode's times change): the storage
        clock's probe (:mod:`kvstore.clock`) when a PUT cannot be made.

        Raises:
            FileNotFoundError: no such object.
            ObjectStoreError: the file system refused.
        """
        full = self._file(path)
        try:
            os.utime(full)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise FileNotFoundError(path) from exc
        except OSError as exc:
            raise ObjectStoreError(f"touch {path!r} on {self.url} failed: {exc}") from exc
        return self.head(path)

    def stale_temp_files(self, cutoff: float) -> builtins.list[ObjectMeta]:
        """Temp files left by dead writers: stamped at or before ``cutoff``, and
        not named by a process alive on this host. Paths are ``.tmp/<name>``.

        Why a live writer's temp file is never among them: a writer stamps its
        temp file with every write, so a file stamped at or before ``cutoff``
        (GC passes ``now - gc_grace_s`` on the storage clock) had no write
        for the whole grace period. The name carries the writer's process id:
        a writer on this host that is still alive keeps its files whatever
        their age. Only a writer on another host that stalled mid-write for
        longer than the grace period can lose its temp file; its write then
        fails (the link or rename finds no temp file) and publishes nothing,
        so no object is ever partial or lost.

        Raises:
            ObjectStoreError: the directory could not be read.
        """
        found: builtins.list[ObjectMeta] = []
        try:
            entries = list(os.scandir(self.root / TEMP_DIR))
        except FileNotFoundError:
            return found
        except OSError as exc:
            raise ObjectStoreError(f"list {TEMP_DIR}/ on {self.url} failed: {exc}") from exc
        for entry in entries:
            match = _TEMP_NAME_RE.match(entry.name)
            if match is None or _process_alive(int(match.group(1), 16)):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # its writer finished meanwhile
            if stat.S_ISREG(st.st_mode) and st.st_mtime <= cutoff:
                found.append(_meta(f"{TEMP_DIR}/{entry.name}", st))
        found.sort(key=lambda meta: meta.path)
        return found

    def delete_temp_file(self, path: str) -> None:
        """Delete one of :meth:`stale_temp_files` (missing is not an error).

        Raises:
            ValueError: ``path`` is not a temp file name this store makes.
            ObjectStoreError: the file system refused.
        """
        if not isinstance(path, str):
            raise TypeError(f"temp file path must be str, not {type(path).__name__}")
        directory, _, name = path.partition("/")
        if directory != TEMP_DIR or _TEMP_NAME_RE.match(name) is None:
            raise ValueError(f"{path!r} is not a temp file of this store ({TEMP_DIR}/<pid>-<random>.tmp)")
        _unlink_quietly(self.root / TEMP_DIR / name)

    def delete(self, path: str) -> None:
        full = self._file(path)
        try:
            os.unlink(full)
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            raise ObjectStoreError(f"delete {path!r} on {self.url} failed: {exc}") from exc
        self._prune_empty_dirs(full.parent)

    def close(self) -> None:
        """Nothing to release: every call opens and closes its own files."""

    # -- helpers -------------------------------------------------------------

    def _file(self, path: str) -> Path:
        _check_object_path(path)
        return self.root.joinpath(*path.split("/"))

    def _write_temp(self, path: str, data: bytes) -> Path:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data for {path!r} must be bytes-like, not {type(data).__name__}")
        temp = self._temp_name()
        # os.open/os.write rather than open(): a buffered file object adds an
        # fstat, an isatty ioctl and an lseek, and every system call releases
        # the GIL, which beside a busy Python thread can cost a switch
        # interval (5 ms) each.
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        view = memoryview(data).cast("B")  # before the file exists: a bad buffer leaves nothing behind
        try:
            try:
                fd = os.open(temp, flags, 0o666)
            except FileNotFoundError:  # opened with create=False, or .tmp removed by hand
                temp.parent.mkdir(exist_ok=True)  # no parents: never creates the store root
                fd = os.open(temp, flags, 0o666)
            try:
                while view:
                    view = view[os.write(fd, view):]
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            _unlink_quietly(temp)
            raise NotWrittenError(f"writing {path!r} to {self.url} failed: {exc}") from exc
        return temp

    def _temp_name(self) -> Path:
        # The process id keeps two processes apart even if they share the
        # generator's state (a fork after open).
        return self.root / TEMP_DIR / f"{os.getpid():x}-{self._names.getrandbits(96):024x}.tmp"

    def _publish(self, path: str, full: Path, link: Callable[[], None]) -> None:
        """Run ``link`` (link or replace temp -> full), creating parents as needed.

        ``FileExistsError`` from ``link`` propagates: it is the lost race.
        """
        for attempt in range(_PUBLISH_ATTEMPTS):
            try:
                # The parent usually exists: link first, and look at the
                # directories only after link said one is missing (one stat
                # less per put; each system call may cost a GIL wait).
                if attempt:
                    self._ensure_dir(full.parent)
                link()
                break
            except FileExistsError:
                raise
            except FileNotFoundError as exc:
                # The parent was pruned by a concurrent delete; recreate it.
                if attempt == _PUBLISH_ATTEMPTS - 1:
                    raise NotWrittenError(f"publishing {path!r} on {self.url} failed: {exc}") from exc
            except OSError as exc:
                error = NotWrittenError if exc.errno in _REFUSED else ObjectStoreError
                raise error(f"publishing {path!r} on {self.url} failed: {exc}") from exc
        if self.fsync:
            try:
                _fsync_dir(full.parent)
            except OSError as exc:
                raise ObjectStoreError(f"fsync of {full.parent} failed after writing {path!r}: {exc}") from exc

    def _ensure_dir(self, directory: Path) -> None:
        """Create ``directory`` and missing ancestors, fsyncing each new entry."""
        if directory.is_dir():
            return
        missing: list[Path] = []
        d = directory
        while d != self.root and not d.is_dir():
            missing.append(d)
            d = d.parent
        for d in reversed(missing):
            try:
                d.mkdir()
            except FileExistsError:
                # Another writer created it first (or a file stands there, which
                # the link below reports as NotADirectoryError).
                continue
            if self.fsync:
                _fsync_dir(d.parent)

    def _prune_empty_dirs(self, directory: Path) -> None:
        """Remove now-empty parents of a deleted object, up to the root.

        Keeps scratch prefixes (``_doctor/<uuid>/``) from leaving directories
        behind. rmdir(2) refuses non-empty directories, so this never removes
        anything a concurrent writer just put there.
        """
        while directory != self.root and self.root in directory.parents:
            try:
                directory.rmdir()
            except OSError:
                # Not empty, already gone or busy: stop pruning, nothing to undo.
                return
            directory = directory.parent

    def _walk(self, directory: Path, rel_dir: str, prefix: str, found: builtins.list[ObjectMeta]) -> None:
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return  # nothing under this prefix (or pruned while we walked)
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if not rel_dir and entry.name == TEMP_DIR:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    # Descend only where the prefix can still match.
                    if rel.startswith(prefix) or prefix.startswith(rel + "/"):
                        self._walk(Path(entry.path), rel, prefix, found)
                    continue
                if not rel.startswith(prefix):
                    continue
                st = entry.stat()
            except FileNotFoundError:
                continue  # deleted while we listed: it is gone, so skip it
            try:
                validate_path(rel)
            except ValueError:
                # A stray file no lakekv writer could have made (editor backup,
                # name with spaces): listing it would hand out an unusable path.
                continue
            found.append(_meta(rel, st))


def _meta(path: str, st: os.stat_result) -> ObjectMeta:
    # mtime_ns + size identifies a version of a file well enough for an etag.
    return ObjectMeta(path, st.st_size, st.st_mtime, f"{st.st_mtime_ns:x}-{st.st_size:x}")


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _process_alive(pid: int) -> bool:
    """True if a process ``pid`` exists on this host (maybe another user's)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


def _unlink_quietly(temp: Path) -> None:
    """Remove a temp file that may already be gone.

    Only FileNotFoundError is tolerated; any other failure would leave garbage
    in ``.tmp/`` silently, so it is raised as ObjectStoreError.
    """
    try:
        os.unlink(temp)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ObjectStoreError(f"cannot remove temp file {temp}: {exc}") from exc


def _check_object_path(path: str) -> None:
    """Raise ValueError unless ``path`` is a valid object path outside the reserved temp directory."""
    validate_path(path)
    if path.split("/", 1)[0] == TEMP_DIR:
        raise ValueError(f"object path {path!r} is inside the reserved {TEMP_DIR}/ directory")
