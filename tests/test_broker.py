"""The broker: one process's ownership of a log directory (docs/api.md "Opening a log directory";
docs/format.md §9.1; docs/reliability.md "Security and bad input").

Covers the directory lock (against a second process), topics and their persisted config,
validation before any path is built, the CRC-protected metadata file, file modes, and what
close() leaves on disk in Kafka's formats.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

import eoslog
from eoslog.errors import (
    InvalidConfigError,
    KafkaStorageError,
    TopicAlreadyExistsError,
)
from eoslog.fs import PosixFileSystem
from eoslog.fs_twin import RecordingFileSystem
from eoslog.log.checkpoints import CLEAN_SHUTDOWN_FILE
from tests.support import logtools
from tests.support.logtools import OpenBroker

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
# Small index files keep the byte-for-byte "nothing changed" comparisons cheap (a default index
# file is preallocated to 10 MiB, and every broker has two internal topics).
SMALL_INDEXES = {"log.index.size.max.bytes": 4096}

# A child that opens the directory, says "ready" and holds it until its stdin closes.
HOLDER = """
import sys
import eoslog
broker = eoslog.open(sys.argv[1], config={"log.index.size.max.bytes": 4096}, background=False)
print("ready", flush=True)
sys.stdin.read()
broker.close()
"""


@pytest.fixture
def open_broker(data_dir: str) -> Iterator[OpenBroker]:
    """open_broker(path=data_dir, **kwargs); every broker opened is closed at teardown."""
    with logtools.brokers_opened(data_dir, lambda: {"config": SMALL_INDEXES}) as opener:
        yield opener


def start_holder(data_dir: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, data_dir],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "ready"
    return holder


# --- opening and the lock ----------------------------------------------------------------------


def test_open_creates_the_directory_and_its_missing_parents(
    open_broker: OpenBroker, tmp_path: os.PathLike[str]
) -> None:
    path = os.path.join(tmp_path, "a", "b", "data")
    open_broker(path)
    assert os.path.isdir(path)
    names = set(os.listdir(path))
    assert {".lock", "eoslog.meta", "__consumer_offsets-0", "__transaction_state-0"} <= names


def test_second_open_from_another_process_raises_log_dir_locked_naming_the_owner_pid(
    data_dir: str,
) -> None:
    holder = start_holder(data_dir)
    try:
        before = logtools.contents(data_dir)
        with pytest.raises(eoslog.LogDirLockedError) as raised:
            eoslog.open(data_dir, background=False)
        assert f"pid {holder.pid}" in str(raised.value)
        assert isinstance(raised.value, OSError)
        assert logtools.contents(data_dir) == before, "a refused open changed the directory"
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0
    eoslog.open(data_dir, background=False).close()


def test_directory_of_a_killed_owner_can_be_opened(open_broker: OpenBroker, data_dir: str) -> None:
    holder = start_holder(data_dir)
    holder.kill()
    assert holder.wait(timeout=30) == -signal.SIGKILL
    assert holder.stdin is not None
    holder.stdin.close()
    broker = open_broker()
    assert set(INTERNAL_TOPICS) <= set(broker.list_topics())


def test_second_open_in_the_same_process_is_refused_too(
    open_broker: OpenBroker, data_dir: str
) -> None:
    open_broker()
    with pytest.raises(eoslog.LogDirLockedError):
        eoslog.open(data_dir, background=False)


def test_unknown_durability_or_broker_config_raises_before_creating_the_directory(
    data_dir: str,
) -> None:
    with pytest.raises(ValueError):
        eoslog.open(data_dir, durability="sometimes", background=False)
    with pytest.raises(InvalidConfigError):
        eoslog.open(data_dir, config={"no.such.property": 1}, background=False)
    with pytest.raises(InvalidConfigError):
        eoslog.open(data_dir, config={"log.segment.bytes": 13}, background=False)
    assert not os.path.exists(data_dir)


# --- topics ------------------------------------------------------------------------------------


def test_internal_topics_exist_in_every_broker(open_broker: OpenBroker) -> None:
    broker = open_broker()
    topics = broker.list_topics()
    for name in INTERNAL_TOPICS:
        assert topics[name].num_partitions == 1
        assert broker.log(name, 0).log_end_offset == 0


def test_internal_topics_cannot_be_deleted(open_broker: OpenBroker) -> None:
    broker = open_broker()
    for name in INTERNAL_TOPICS:
        with pytest.raises(eoslog.InvalidTopicError):
            broker.delete_topic(name)
        assert name in broker.list_topics()


def test_create_list_and_delete_a_topic(open_broker: OpenBroker, data_dir: str) -> None:
    broker = open_broker()
    created = broker.create_topic("orders", 3)
    assert (created.name, created.num_partitions) == ("orders", 3)
    assert broker.list_topics()["orders"].num_partitions == 3
    for partition in range(3):
        assert os.path.isdir(os.path.join(data_dir, f"orders-{partition}"))
        broker.log("orders", partition).append_batch(logtools.batch([b"x"]))
    broker.delete_topic("orders")
    assert "orders" not in broker.list_topics()
    assert not any(name.startswith("orders-") for name in os.listdir(data_dir))
    with pytest.raises(eoslog.UnknownTopicOrPartitionError):
        broker.log("orders", 0)
    broker.close()
    broker = open_broker()
    assert "orders" not in broker.list_topics()
    broker.create_topic("orders", 1)
    assert broker.log("orders", 0).log_end_offset == 0


class FailingUnlinks(PosixFileSystem):
    """Real files, but unlink fails (EIO) under `doomed` once armed: an interrupted delete."""

    def __init__(self, doomed: str) -> None:
        self.doomed = doomed
        self.armed = False

    def unlink(self, path: str) -> None:
        if self.armed and path.startswith(self.doomed):
            raise OSError(errno.EIO, "injected unlink failure", path)
        super().unlink(path)


def test_a_topic_re_created_after_an_interrupted_delete_starts_empty(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # A delete that stops part way (crash, I/O error) must not let a later topic of the same
    # name inherit the old records.
    # The prefix also matches the `t-0.<random>-delete` name a delete renames the directory to.
    fs = FailingUnlinks(os.path.join(data_dir, "t-0"))
    broker = open_broker(fs=fs)
    broker.create_topic("t", 1)
    for _ in range(3):
        broker.log("t", 0).append_batch(logtools.batch([b"deleted"]))
    fs.armed = True
    with pytest.raises(OSError):
        broker.delete_topic("t")
    broker.close()

    broker = open_broker()
    assert "t" not in broker.list_topics()
    broker.create_topic("t", 1)
    log = broker.log("t", 0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert bytes(log.read(0).records) == b""


def test_topic_config_is_persisted_across_reopen(open_broker: OpenBroker) -> None:
    config = {
        "segment.bytes": 4096,
        "retention.ms": 1000,
        "message.timestamp.type": "LogAppendTime",
    }
    broker = open_broker()
    broker.create_topic("t", 2, config=config)
    listed = broker.list_topics()["t"]
    broker.close()
    reopened = open_broker()
    assert reopened.list_topics()["t"] == listed
    assert listed.num_partitions == 2
    for key, value in config.items():
        assert listed.config[key] == value
    assert listed.config["segment.ms"] == 7 * 24 * 3_600_000  # Kafka's default where unset
    log = reopened.log("t", 1)
    assert (log.config.segment_bytes, log.config.retention_ms) == (4096, 1000)
    assert log.config.log_append_time


def test_creating_an_existing_topic_raises_topic_already_exists(open_broker: OpenBroker) -> None:
    broker = open_broker()
    broker.create_topic("t", 1)
    broker.log("t", 0).append_batch(logtools.batch([b"kept"]))
    with pytest.raises(TopicAlreadyExistsError):
        broker.create_topic("t", 2)
    with pytest.raises(TopicAlreadyExistsError):
        broker.create_topic("__consumer_offsets", 1)
    assert broker.list_topics()["t"].num_partitions == 1
    assert broker.log("t", 0).log_end_offset == 1


def test_log_of_an_unknown_topic_or_partition_raises(open_broker: OpenBroker) -> None:
    broker = open_broker()
    broker.create_topic("t", 1)
    for topic, partition in (("nope", 0), ("t", 1), ("t", -1)):
        with pytest.raises(eoslog.UnknownTopicOrPartitionError):
            broker.log(topic, partition)
    with pytest.raises(eoslog.UnknownTopicOrPartitionError):
        broker.delete_topic("nope")


INVALID_TOPIC_NAMES = [
    "",
    "a" * 250,
    ".",
    "..",
    "a/b",
    "../x",
    "/tmp/x",
    "a\x00b",
    "tópico",
    "a b",
    "a\n",
    "a\\b",
]


@pytest.mark.parametrize("name", INVALID_TOPIC_NAMES)
def test_invalid_topic_name_raises_before_touching_the_disk(
    open_broker: OpenBroker, tmp_path: os.PathLike[str], name: str
) -> None:
    broker = open_broker()
    before = logtools.contents(tmp_path), logtools.tree(tmp_path)
    with pytest.raises(eoslog.InvalidTopicError):
        broker.create_topic(name, 1)
    with pytest.raises(eoslog.InvalidTopicError):
        broker.delete_topic(name)
    assert (logtools.contents(tmp_path), logtools.tree(tmp_path)) == before
    assert set(broker.list_topics()) == set(INTERNAL_TOPICS)


@pytest.mark.parametrize("name", [None, b"bytes", 7])
def test_a_topic_name_that_is_not_a_string_raises_invalid_topic(
    open_broker: OpenBroker, name: object
) -> None:
    with pytest.raises(eoslog.InvalidTopicError):
        open_broker().create_topic(name, 1)  # type: ignore[arg-type]


def test_longest_valid_topic_name_of_249_characters_works(open_broker: OpenBroker) -> None:
    name = "a-b.c_" + "x" * 243
    assert len(name) == 249
    broker = open_broker()
    broker.create_topic(name, 1)
    broker.log(name, 0).append_batch(logtools.batch([b"x"]))
    broker.close()
    assert open_broker().log(name, 0).log_end_offset == 1


@pytest.mark.parametrize(
    ("num_partitions", "config"),
    [
        (1, {"no.such.key": 1}),
        (1, {"segment.bytes": 13}),
        (1, {"segment.bytes": "many"}),
        (1, {"segment.bytes": True}),
        (1, {"retention.ms": -2}),
        (1, {"max.message.bytes": -1}),
        (1, {"message.timestamp.type": "WallClock"}),
        (1, {"segment.index.bytes": 11}),
        (0, {}),
        (-1, {}),
    ],
)
def test_bad_topic_config_raises_invalid_config_and_creates_nothing(
    open_broker: OpenBroker,
    tmp_path: os.PathLike[str],
    num_partitions: int,
    config: dict[str, object],
) -> None:
    broker = open_broker()
    before = logtools.contents(tmp_path), logtools.tree(tmp_path)
    with pytest.raises(InvalidConfigError):
        broker.create_topic("t", num_partitions, config=config)
    assert (logtools.contents(tmp_path), logtools.tree(tmp_path)) == before
    assert "t" not in broker.list_topics()


# --- topics created on first use ------------------------------------------------------------


def test_a_metadata_request_that_allows_it_creates_an_unknown_topic_with_num_partitions(
    open_broker: OpenBroker, data_dir: str
) -> None:
    broker = open_broker(config={**SMALL_INDEXES, "num.partitions": 3})
    made = broker.topic_metadata("new", auto_create=True)
    assert (made.name, made.num_partitions) == ("new", 3)
    assert broker.topic_metadata("new") == made  # asked again: the same topic
    assert broker.list_topics()["new"].num_partitions == 3
    broker.close()
    assert open_broker().list_topics()["new"].num_partitions == 3  # persisted as any topic


def test_auto_create_disabled_raises_unknown_topic(open_broker: OpenBroker) -> None:
    """Kafka's broker setting auto.create.topics.enable (default true), and a client that
    does not allow creation (allow.auto.create.topics false): either refuses."""
    broker = open_broker(config={**SMALL_INDEXES, "auto.create.topics.enable": "false"})
    with pytest.raises(eoslog.UnknownTopicOrPartitionError):
        broker.topic_metadata("new", auto_create=True)
    broker.close()
    broker = open_broker()
    with pytest.raises(eoslog.UnknownTopicOrPartitionError):
        broker.topic_metadata("new", auto_create=False)
    assert "new" not in broker.list_topics()


def test_an_invalid_name_is_never_auto_created(open_broker: OpenBroker, tmp_path: str) -> None:
    broker = open_broker()
    before = logtools.tree(tmp_path)
    for name in ("", "a/b", "..", "x" * 250):
        with pytest.raises(eoslog.InvalidTopicError):
            broker.topic_metadata(name, auto_create=True)
    assert logtools.tree(tmp_path) == before


def test_internal_topics_are_never_auto_created_with_user_topic_settings(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker(config={**SMALL_INDEXES, "num.partitions": 4})
    for name in INTERNAL_TOPICS:
        assert broker.topic_metadata(name, auto_create=True).num_partitions == 1
    assert set(broker.list_topics()) == set(INTERNAL_TOPICS)


def test_concurrent_metadata_requests_create_a_new_topic_once(open_broker: OpenBroker) -> None:
    broker = open_broker()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        made = list(pool.map(lambda _: broker.topic_metadata("new", auto_create=True), range(8)))
    assert made == [made[0]] * 8 and made[0].num_partitions == 1


@pytest.mark.parametrize("value", [1, "yes", None])
def test_auto_create_topics_enable_must_be_a_boolean(data_dir: str, value: object) -> None:
    with pytest.raises(InvalidConfigError):
        eoslog.open(data_dir, config={"auto.create.topics.enable": value}, background=False)


# --- files on disk -----------------------------------------------------------------------------


def test_metadata_file_is_crc_protected_and_any_flipped_byte_fails_open(
    open_broker: OpenBroker, data_dir: str
) -> None:
    broker = open_broker()
    broker.create_topic("orders", 2, config={"segment.bytes": 4096})
    broker.close()
    path = os.path.join(data_dir, "eoslog.meta")
    original = logtools.file_bytes(path)
    for position in range(len(original)):
        damaged = bytearray(original)
        damaged[position] ^= 1 << (position % 8)
        logtools.write_at(path, 0, bytes(damaged))
        with pytest.raises(KafkaStorageError):
            eoslog.open(data_dir, background=False)
    logtools.write_at(path, 0, original)
    with open(path, "r+b") as file:
        file.truncate(len(original) - 1)
    with pytest.raises(KafkaStorageError):
        eoslog.open(data_dir, background=False)
    logtools.write_at(path, 0, original)
    # Every refused open released the lock, and the intact file opens with the topic.
    assert open_broker().list_topics()["orders"].num_partitions == 2


@pytest.mark.parametrize(
    ("umask", "file_mode", "dir_mode"), [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)]
)
def test_files_and_directories_are_created_0644_and_0755_under_the_umask(
    tmp_path: os.PathLike[str], umask: int, file_mode: int, dir_mode: int
) -> None:
    data_dir = os.path.join(tmp_path, "data")
    old = os.umask(umask)
    try:
        broker = eoslog.open(data_dir, background=False)
        broker.create_topic("t", 1, config={"segment.bytes": 200})
        for _ in range(5):
            broker.log("t", 0).append_batch(logtools.batch([b"x" * 50]))
        broker.close()
    finally:
        os.umask(old)
    modes = {path: mode & 0o777 for path, (mode, _) in logtools.tree(data_dir).items()}
    modes["."] = os.stat(data_dir).st_mode & 0o777
    dirs = {p for p in modes if os.path.isdir(os.path.join(data_dir, p))}
    assert {p: m for p, m in modes.items() if p in dirs} == dict.fromkeys(dirs, dir_mode)
    files = set(modes) - dirs
    assert len([p for p in files if p.endswith(".log")]) > 1
    assert {p: m for p, m in modes.items() if p in files} == dict.fromkeys(files, file_mode)


def parse_checkpoint(path: str) -> set[tuple[str, int, int]]:
    """Kafka's checkpoint text (docs/format.md §9.1), parsed strictly."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    assert text.endswith("\n")
    lines = text[:-1].split("\n")
    assert lines[0] == "0", "version"
    assert int(lines[1]) == len(lines) - 2, "entry count"
    entries = set()
    for line in lines[2:]:
        topic, partition, offset = line.split(" ")
        entries.add((topic, int(partition), int(offset)))
    return entries


def test_close_writes_kafka_checkpoints_and_the_clean_shutdown_marker(
    open_broker: OpenBroker, data_dir: str
) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    for _ in range(3):
        broker.log("t", 1).append_batch(logtools.batch([b"x"]))
    broker.close()
    recovery_points = parse_checkpoint(os.path.join(data_dir, "recovery-point-offset-checkpoint"))
    assert recovery_points == {
        ("__consumer_offsets", 0, 0),
        ("__transaction_state", 0, 0),
        ("t", 0, 0),
        ("t", 1, 3),
    }
    # Kafka writes a log start only where it is above the first segment's base offset.
    assert parse_checkpoint(os.path.join(data_dir, "log-start-offset-checkpoint")) == set()
    with open(os.path.join(data_dir, ".kafka_cleanshutdown"), encoding="utf-8") as file:
        marker = json.load(file)
    assert marker["version"] == 0
    assert isinstance(marker["brokerEpoch"], int)
    assert not [name for name in os.listdir(data_dir) if name.endswith(".tmp")]


def test_a_log_start_inside_the_first_segment_is_ignored_and_dropped_from_the_checkpoint(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # eoslog moves the log start only by deleting whole segments: a checkpointed log start
    # inside a segment is one the segments do not explain, and would hide records 0-1
    # (eoslog.log.recovery): ignored, reported, and not written back.
    broker = open_broker()
    broker.create_topic("t", 1)
    for _ in range(5):
        broker.log("t", 0).append_batch(logtools.batch([b"x"]))
    broker.close()
    with open(os.path.join(data_dir, "log-start-offset-checkpoint"), "w") as file:
        file.write("0\n1\nt 0 2\n")
    broker = open_broker()
    log = broker.log("t", 0)
    assert log.log_start_offset == 0
    assert "log start 2" in log.recovery_report.checkpoints_ignored[0]
    broker.close()
    assert parse_checkpoint(os.path.join(data_dir, "log-start-offset-checkpoint")) == set()


def test_context_manager_closes_the_broker(data_dir: str) -> None:
    with eoslog.open(data_dir, background=False) as broker:
        broker.create_topic("t", 1)
        broker.log("t", 0).append_batch(logtools.batch([b"x"]))
    assert os.path.exists(os.path.join(data_dir, ".kafka_cleanshutdown"))
    with pytest.raises(KafkaStorageError):
        broker.create_topic("u", 1)
    broker.close()  # a second close does nothing
    with eoslog.open(data_dir, background=False) as reopened:
        assert reopened.log("t", 0).log_end_offset == 1


def test_close_releases_every_descriptor_the_broker_opened(data_dir: str) -> None:
    # The broker's file system keeps directory descriptors (eoslog.fs.DIRECTORY_FDS_MAX):
    # close() releases them with the files, and so does a refused open.
    def descriptors() -> set[str]:
        return set(os.listdir("/proc/self/fd"))

    before = descriptors()
    broker = eoslog.open(data_dir, background=False)
    broker.create_topic("t", 3)
    for partition in range(3):
        broker.log("t", partition).append_batch(logtools.batch([b"v"]))
    broker.close()
    assert descriptors() <= before
    with open(os.path.join(data_dir, "eoslog.meta"), "r+b") as meta:
        meta.write(b"XXXX")
    with pytest.raises(KafkaStorageError):
        eoslog.open(data_dir, background=False)
    assert descriptors() <= before


# --- a create_topic that fails midway ----------------------------------------------------------

TWIN_LOG_DIR = "/data/log"


def _open_on_twin(twin: RecordingFileSystem) -> eoslog.Broker:
    return eoslog.open(TWIN_LOG_DIR, config=SMALL_INDEXES, fs=twin, background=False)


def _create_topic_calls(faults: dict[int, str]) -> tuple[RecordingFileSystem, list[int]]:
    """A twin with `faults` set, after open and create_topic("out", 2) (its error, if any,
    swallowed); the call numbers create_topic made."""
    twin = RecordingFileSystem(seed=0)
    twin.makedirs("/data", durable=True)
    for call, kind in faults.items():
        twin.fail_at(call, kind)
    broker = _open_on_twin(twin)
    start = twin.calls
    with contextlib.suppress(KafkaStorageError):
        broker.create_topic("out", 2)
    calls = list(range(start, twin.calls))
    with contextlib.suppress(KafkaStorageError):
        broker.close()
    return twin, calls


def _listdir_of_first_partition() -> int:
    twin, calls = _create_topic_calls({})
    recorded = twin.recorded_calls()
    return next(c for c in calls if recorded[c] == ("listdir", f"{TWIN_LOG_DIR}/out-0"))


def _append_and_read_back(broker: eoslog.Broker) -> list[bytes]:
    log = broker.log("out", 0)
    for index in range(3):
        log.append_batch(logtools.batch([b"v%d" % index]))
    return [record.value or b"" for record in logtools.read_all(log)]


def test_a_create_topic_failing_midway_is_undone_so_a_clean_open_never_trusts_its_partition() -> (
    None
):
    # The EIO hits the new partition's first directory listing, after eoslog.meta named the
    # topic and out-0 was made: the creation is taken back whole, the directory closes
    # clean, and the creation can simply be tried again.
    twin = RecordingFileSystem(seed=0)
    twin.makedirs("/data", durable=True)
    twin.fail_at(_listdir_of_first_partition(), "EIO")
    broker = _open_on_twin(twin)
    with pytest.raises(KafkaStorageError, match="creating topic 'out' failed"):
        broker.create_topic("out", 2)
    assert "out" not in broker.list_topics()
    assert not twin.exists(f"{TWIN_LOG_DIR}/out-0")
    broker.create_topic("out", 2)
    assert _append_and_read_back(broker) == [b"v0", b"v1", b"v2"]
    broker.close()
    assert twin.exists(f"{TWIN_LOG_DIR}/{CLEAN_SHUTDOWN_FILE}")
    with _open_on_twin(twin) as reopened:
        log = reopened.log("out", 0)
        assert log.log_end_offset == 3
        assert [record.value for record in logtools.read_all(log)] == [b"v0", b"v1", b"v2"]


def test_a_create_topic_that_cannot_be_undone_fail_stops_so_close_writes_no_clean_marker() -> None:
    # The meta write that would take the topic back fails too: eoslog.meta still names the
    # half-created topic, so close() must not mark the directory clean (the next open would
    # trust out-0's preallocated, never-written index); the next open recovers it instead.
    first_listdir = _listdir_of_first_partition()
    twin, calls = _create_topic_calls({first_listdir: "EIO"})
    recorded = twin.recorded_calls()
    undo_meta_write = next(
        c
        for c in calls
        if c > first_listdir and recorded[c][0] == "pwrite" and "meta" in recorded[c][1]
    )
    twin = RecordingFileSystem(seed=0)
    twin.makedirs("/data", durable=True)
    twin.fail_at(first_listdir, "EIO")
    twin.fail_at(undo_meta_write, "EIO")
    broker = _open_on_twin(twin)
    with pytest.raises(KafkaStorageError, match="undoing it failed"):
        broker.create_topic("out", 2)
    with pytest.raises(KafkaStorageError, match="undoing it failed"):
        broker.close()
    assert not twin.exists(f"{TWIN_LOG_DIR}/{CLEAN_SHUTDOWN_FILE}")
    with _open_on_twin(twin) as reopened:
        assert reopened.log("out", 0).log_end_offset == 0
        assert _append_and_read_back(reopened) == [b"v0", b"v1", b"v2"]
