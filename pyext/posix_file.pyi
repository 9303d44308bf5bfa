"""Positional writes on a POSIX file descriptor (pyext/posix_file.pyx), the native half of
eoslog.fs's real file handle. No pure-Python twin: eoslog.fs._PosixFile subclasses it.
Thread safety: as os.pwrite; callers serialize writes to one file."""

from typing_extensions import Buffer

class PositionalFile:
    fd: int  # -1 once closed
    _path: str
    def __init__(self, path: str, fd: int) -> None: ...
    def pwrite(self, data: Buffer, offset: int) -> None: ...
