"""The refusals of the read-only file systems (eoslog.fs_arrow, eoslog.archive_view): mixins
giving a FileSystem's directory operations and a FileHandle's writes that raise OSError(EROFS),
change nothing, and say why (`refusal`)."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    import mmap

    # Only for annotations: typing_extensions is not a run-time dependency.
    from typing_extensions import Buffer


class RefusesChanges:
    """The directory operations of a read-only FileSystem (eoslog.fs_arrow, eoslog.
    archive_view): each raises OSError(EROFS) naming the path, with `refusal` as the reason,
    and changes nothing."""

    refusal = "read-only"

    def _refuse(self, path: str) -> NoReturn:
        raise OSError(errno.EROFS, self.refusal, path)

    def mkdir(self, path: str) -> None:
        self._refuse(path)

    def rmdir(self, path: str) -> None:
        self._refuse(path)

    def unlink(self, path: str) -> None:
        self._refuse(path)

    def rename(self, source: str, target: str) -> None:
        self._refuse(source)

    def sync_dir(self, path: str) -> None:
        self._refuse(path)

    def lock(self, path: str) -> NoReturn:
        self._refuse(path)


class RefusesWrites:
    """The writing operations of a read-only FileHandle (its path in `_path`): each raises
    OSError(EROFS) with `refusal` as the reason. map_read is refused too (ENOTSUP): a reader
    of a file system that is not the owner's preads."""

    __slots__ = ()
    refusal = "read-only"
    _path: str

    def pwrite(self, data: Buffer, offset: int) -> None:
        raise OSError(errno.EROFS, self.refusal, self._path)

    def truncate(self, size: int) -> None:
        raise OSError(errno.EROFS, self.refusal, self._path)

    def sync(self) -> None:
        raise OSError(errno.EROFS, self.refusal, self._path)

    def map(self, size: int) -> mmap.mmap:
        raise OSError(errno.EROFS, self.refusal, self._path)

    def map_read(self, size: int) -> mmap.mmap:
        raise OSError(errno.ENOTSUP, "read with pread, never mapped", self._path)
