"""A recording twin (eoslog.fs_twin) that takes a power-loss image before every counted
file-system call while it is armed: the way a power-loss test covers every step of one
operation (a truncation's file replacement, a cleaner's swap) rather than random points."""

from __future__ import annotations

import random

from eoslog.fs_twin import RecordingFileSystem


class ImagingTwin(RecordingFileSystem):
    """While `armed`, an image before each counted call, kept in `images` as (call number,
    operation, path, image). It hooks the twin's call counter, the one place every counted
    call passes through. `name` seeds each image's randomness with the call number, so an
    image replays without the others."""

    def __init__(self, seed: int, name: str) -> None:
        super().__init__(seed)
        self.name = name
        self.armed = False
        self.images: list[tuple[int, str, str, RecordingFileSystem]] = []

    def _count(self, operation: str, path: str) -> str | None:
        if self.armed:
            rng = random.Random(f"{self.name} {self.seed} {self.calls}")
            self.images.append((self.calls, operation, path, self.crash_image(rng)))
        return super()._count(operation, path)
