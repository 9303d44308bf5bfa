# cython: language_level=3, boundscheck=False, wraparound=False
"""Positional writes and reads on a POSIX file descriptor: the native half of the fs seam's real
file handle (eoslog.fs._PosixFile builds on PositionalFile), so that the append path's
`handle.pwrite` costs one C call instead of a Python loop around os.pwrite. Same behaviour as
that loop: a short write continues from where it stopped, a write of nothing is EIO, a failure
raises OSError with the errno (EINTR is retried, as os.pwrite does, after any signal handler
ran). The contract is pyext/posix_file.pyi.

Thread safety: as for os.pwrite and os.pread: the GIL is released around each system call, and
callers serialize writes to one file (the fs seam's FileHandle is not thread-safe).
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.exc cimport PyErr_CheckSignals, PyErr_SetFromErrno
from libc.errno cimport EINTR, errno
from libc.stdint cimport int64_t, uint8_t
from posix.types cimport off_t
from posix.unistd cimport pwrite

import errno as errno_codes


cdef class PositionalFile:
    """A file descriptor (-1 once closed) and the path it was opened at."""

    cdef public int fd
    cdef public str _path

    def __cinit__(self, str path, int fd, *args, **kwargs):
        self._path = path
        self.fd = fd

    def pwrite(self, data, int64_t offset):
        """Write all of `data` (any contiguous buffer) at `offset`, extending the file if
        needed, or raise OSError. After an error some prefix may have been written."""
        cdef Py_buffer view
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            self._write_all(<const uint8_t *>view.buf, view.len, offset)
        finally:
            PyBuffer_Release(&view)

    cdef int _write_all(self, const uint8_t *data, Py_ssize_t size, int64_t offset) except -1:
        cdef Py_ssize_t written
        cdef int fd = self.fd
        while size > 0:
            with nogil:
                written = pwrite(fd, data, <size_t>size, <off_t>offset)
            if written < 0:
                if errno == EINTR:
                    PyErr_CheckSignals()  # raises if a handler did; else try again
                    continue
                PyErr_SetFromErrno(OSError)
                return -1
            if written == 0:
                raise OSError(errno_codes.EIO, "pwrite wrote nothing", self._path)
            data += written
            size -= written
            offset += written
        return 0
