# cython: language_level=3, boundscheck=False, wraparound=False
"""Publish a new file under a name that must not exist yet, in one call.

The local object store's conditional create is: write a temp file, fsync it,
link(2) it to the final name (EEXIST is a lost race), unlink the temp name,
fsync the directory. Done from Python, each of those system calls releases
the GIL, and beside a thread spinning in Python every re-acquisition can wait
a whole switch interval (5 ms): a commit without fsync went from ~3,600 to
~37 per second that way. Here the page-cache-only steps run with the GIL
held (they take microseconds), and the two fsyncs, when asked for, run in a
single GIL release together with the link between them.

Pure-Python twin: ``LocalStore._put_if_absent_py`` (kvstore/objstore/local.py),
which the tests run against this one.
"""

from libc.errno cimport errno, EINTR
from posix.fcntl cimport open as c_open, O_WRONLY, O_CREAT, O_EXCL, O_RDONLY
from posix.unistd cimport write as c_write, close as c_close, fsync as c_fsync, link as c_link, unlink as c_unlink

cdef extern from "fcntl.h":
    int O_CLOEXEC

# Steps reported on failure (the errno comes with it).
cdef enum:
    STEP_OPEN_TEMP = 1
    STEP_WRITE_TEMP = 2
    STEP_FSYNC_TEMP = 3
    STEP_LINK = 4
    STEP_FSYNC_DIR = 5

OPEN_TEMP = STEP_OPEN_TEMP
WRITE_TEMP = STEP_WRITE_TEMP
FSYNC_TEMP = STEP_FSYNC_TEMP
LINK = STEP_LINK
FSYNC_DIR = STEP_FSYNC_DIR


def publish_new_file(bytes temp, bytes final, bytes directory, const unsigned char[::1] data, bint fsync):
    """Create ``final`` holding ``data`` if it does not exist; see the module docstring.

    Returns ``(step, errno)``: ``(0, 0)`` when published, else the failed step
    and its errno. On every outcome but an OPEN_TEMP failure the temp file is
    gone when this returns (a FSYNC_DIR failure comes after the publish).
    """
    cdef const char* temp_c = temp
    cdef const char* final_c = final
    cdef const char* dir_c = directory
    cdef Py_ssize_t done = 0, size = data.shape[0]
    cdef const unsigned char* buf = &data[0] if size else NULL
    cdef long wrote
    cdef int fd, dir_fd, rc, err = 0, step = 0
    fd = c_open(temp_c, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
    if fd < 0:
        return STEP_OPEN_TEMP, errno
    while done < size:
        wrote = c_write(fd, buf + done, size - done)
        if wrote < 0:
            if errno == EINTR:
                continue
            err = errno
            c_close(fd)
            c_unlink(temp_c)
            return STEP_WRITE_TEMP, err
        done += wrote
    if fsync:
        with nogil:
            rc = c_fsync(fd)
            if rc != 0:
                step = STEP_FSYNC_TEMP; err = errno
            c_close(fd)
            if step == 0:
                rc = c_link(temp_c, final_c)
                if rc != 0:
                    step = STEP_LINK; err = errno
            c_unlink(temp_c)
            if step == 0:
                dir_fd = c_open(dir_c, O_RDONLY | O_CLOEXEC)
                if dir_fd < 0:
                    step = STEP_FSYNC_DIR; err = errno
                else:
                    if c_fsync(dir_fd) != 0:
                        step = STEP_FSYNC_DIR; err = errno
                    c_close(dir_fd)
        return step, err
    c_close(fd)
    if c_link(temp_c, final_c) != 0:
        step = STEP_LINK; err = errno
    c_unlink(temp_c)
    return step, err
