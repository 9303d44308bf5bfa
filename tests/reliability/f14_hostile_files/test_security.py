"""Nothing escapes the log directory, and no name read from it is trusted (docs/reliability.md
"security"; issue 12 deliverables 3 and 7).

1. Containment: a symlink planted at each path the owner reads or writes (the lock, the meta
   file and its temp file, both checkpoints and their temp files, the clean-shutdown marker's
   temp file, a partition directory, each segment file kind, a snapshot and its temp file)
   is refused with a KafkaStorageError naming it, and the file it points to is byte-identical
   afterwards. A link at a rename's target is replaced, never written through.
2. Forged eoslog.meta (a valid CRC over hostile JSON): a typed error naming the file, and
   nothing created or deleted anywhere.
3. Stray names in a partition directory: reported, kept, never read as segments.
4. Topic deletion works for every valid name, and the sweep at open finds what it left.
5. The maintenance race: run_maintenance() from many threads beside the maintenance thread.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from collections.abc import Callable

import pytest

import eoslog
import eoslog.offline
from eoslog.errors import KafkaStorageError
from eoslog.fs import PosixFileSystem
from eoslog.log import checkpoints
from eoslog.record import primitives
from tests.support import logtools

TOPIC = "t"
RECORDS = 40
SEGMENT = f"{TOPIC}-0"
OUTSIDE_BYTES = b"a file outside the log directory\n" * 32


class Place:
    """A log directory `root` (tmp/data) holding topic t (one partition, RECORDS records of
    one batch each, closed cleanly), and beside it `outside` (a file) and `outside_dir`
    (a directory holding one file) that no operation may change."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.root = os.path.join(base, "data")
        self.outside = os.path.join(base, "outside")
        self.outside_dir = os.path.join(base, "outside_dir")
        os.mkdir(self.outside_dir)
        for path in (self.outside, os.path.join(self.outside_dir, "inner")):
            with open(path, "wb") as file:
                file.write(OUTSIDE_BYTES)
        with eoslog.open(self.root, background=False) as broker:
            broker.create_topic(TOPIC, 1)
            for value in logtools.values(0, RECORDS):
                broker.log(TOPIC, 0).append_batch(logtools.batch([value]))

    def path(self, *names: str) -> str:
        return os.path.join(self.root, *names)

    def plant(self, name: str) -> str:
        """Replace the entry at name (if any) by a symlink to the outside file, or for a
        partition directory to the outside directory; returns its path."""
        path = self.path(name)
        target = self.outside_dir if name == SEGMENT else self.outside
        if os.path.isdir(path) and not os.path.islink(path):
            for inner in os.listdir(path):
                os.unlink(os.path.join(path, inner))
            os.rmdir(path)
        elif os.path.lexists(path):
            os.unlink(path)
        os.symlink(target, path)
        return path

    def outside_untouched(self) -> bool:
        return logtools.file_bytes(self.outside) == OUTSIDE_BYTES and os.listdir(
            self.outside_dir
        ) == ["inner"]

    def snapshot(self) -> dict[str, tuple[bool, bytes | None]]:
        """Every entry under base, links not followed: path -> (is a link, bytes of a
        regular file)."""
        found: dict[str, tuple[bool, bytes | None]] = {}
        for directory, dirnames, filenames in os.walk(self.base):
            for name in [*dirnames, *filenames]:
                path = os.path.join(directory, name)
                regular = os.path.isfile(path) and not os.path.islink(path)
                content = logtools.file_bytes(path) if regular and name != ".lock" else None
                found[os.path.relpath(path, self.base)] = (os.path.islink(path), content)
        return found

    def values(self) -> list[bytes | None]:
        with eoslog.open(self.root, background=False) as broker:
            return [record.value for record in logtools.read_all(broker.log(TOPIC, 0))]


@pytest.fixture
def place(tmp_path: os.PathLike[str]) -> Place:
    return Place(os.fspath(tmp_path))


def expect_refusal(call: Callable[[], object], planted: str) -> None:
    with pytest.raises(KafkaStorageError) as caught:
        call()
    assert planted in str(caught.value), caught.value
    assert "symbolic link" in str(caught.value), caught.value


# -- 1. containment -----------------------------------------------------------------------

# Paths the owner reads or writes while opening (load, recovery, the meta write at open).
PLANTED_BEFORE_OPEN = [
    ".lock",
    "eoslog.meta",
    "eoslog.meta.tmp",
    checkpoints.RECOVERY_POINT_FILE,
    checkpoints.LOG_START_OFFSET_FILE,
    checkpoints.ABORTED_TXNS_FILE,
    SEGMENT,
    f"{SEGMENT}/00000000000000000000.log",
    f"{SEGMENT}/00000000000000000000.index",
    f"{SEGMENT}/00000000000000000000.timeindex",
    f"{SEGMENT}/00000000000000000000.txnindex",
    f"{SEGMENT}/{RECORDS:020d}.snapshot",
]


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("name", PLANTED_BEFORE_OPEN)
def test_a_symlink_planted_before_open_is_refused_and_its_target_untouched(
    place: Place, name: str, clean: bool
) -> None:
    if not clean:
        os.unlink(place.path(checkpoints.CLEAN_SHUTDOWN_FILE))
    planted = place.plant(name)
    if name.endswith(".snapshot") and not clean:
        # An unclean open replays from below the recovery point and never reads a
        # snapshot past it (nor rewrites one that exists): the link is left unused.
        assert len(place.values()) == RECORDS
    else:
        expect_refusal(lambda: eoslog.open(place.root, background=False), planted)
        assert os.path.islink(planted)
    assert place.outside_untouched()


# Temp files the owner writes while closing: each checkpoint's, the marker's, the snapshot's.
PLANTED_BEFORE_CLOSE = [
    f"{checkpoints.RECOVERY_POINT_FILE}.tmp",
    f"{checkpoints.LOG_START_OFFSET_FILE}.tmp",
    f"{checkpoints.ABORTED_TXNS_FILE}.tmp",
    f"{checkpoints.CLEAN_SHUTDOWN_FILE}.tmp",
    f"{SEGMENT}/{RECORDS + 1:020d}.snapshot.tmp",
]


@pytest.mark.parametrize("name", PLANTED_BEFORE_CLOSE)
def test_a_symlink_planted_at_a_temp_file_is_refused_and_its_target_untouched(
    place: Place, name: str
) -> None:
    broker = eoslog.open(place.root, background=False)
    broker.log(TOPIC, 0).append_batch(logtools.batch([b"one more"]))
    planted = place.plant(name)
    expect_refusal(broker.close, planted)
    assert place.outside_untouched()
    # Not closed cleanly: the next open recovers everything acknowledged.
    os.unlink(planted)
    assert len(place.values()) == RECORDS + 1


def test_a_symlink_planted_at_a_temp_file_during_maintenance_is_refused(place: Place) -> None:
    broker = eoslog.open(place.root, background=False)
    planted = place.plant(f"{checkpoints.LOG_START_OFFSET_FILE}.tmp")
    expect_refusal(broker.run_maintenance, planted)
    assert place.outside_untouched()
    with pytest.raises(KafkaStorageError):
        broker.close()


@pytest.mark.parametrize(
    "name",
    [
        checkpoints.CLEAN_SHUTDOWN_FILE,
        checkpoints.RECOVERY_POINT_FILE,
        checkpoints.ABORTED_TXNS_FILE,
        "eoslog.meta",
    ],
)
def test_a_symlink_at_a_file_replaced_by_rename_is_replaced_not_written_through(
    place: Place, name: str
) -> None:
    broker = eoslog.open(place.root, background=False)
    planted = place.plant(name)
    broker.create_topic("second", 1)  # rewrites eoslog.meta
    broker.close()  # rewrites both checkpoints and writes the marker
    assert place.outside_untouched()
    assert not os.path.islink(planted)
    assert len(place.values()) == RECORDS


def test_a_symlink_at_a_stale_temp_file_in_a_partition_is_removed_not_followed(
    place: Place,
) -> None:
    # Recovery deletes our own leftovers (`<20 digits>.<suffix>.tmp`): for a link, the link.
    planted = place.plant(f"{SEGMENT}/00000000000000000000.log.tmp")
    assert len(place.values()) == RECORDS
    assert not os.path.lexists(planted)
    assert place.outside_untouched()


def test_a_topic_created_over_a_planted_partition_directory_link_is_refused(
    place: Place,
) -> None:
    broker = eoslog.open(place.root, background=False)
    os.symlink(place.outside_dir, place.path("fresh-0"))
    with pytest.raises(KafkaStorageError):
        broker.create_topic("fresh", 1)
    assert place.outside_untouched()
    broker.close()


def test_a_log_directory_that_is_itself_a_symlink_is_the_users_choice(place: Place) -> None:
    chosen = os.path.join(place.base, "chosen")
    os.symlink(place.root, chosen)
    with eoslog.open(chosen, background=False) as broker:
        broker.log(TOPIC, 0).append_batch(logtools.batch([b"through the link"]))
    assert len(place.values()) == RECORDS + 1


# -- 2. forged eoslog.meta -----------------------------------------------------------------


def forge_meta(place: Place, mutate: Callable[[dict[str, object]], object]) -> str:
    """Rewrite eoslog.meta with mutate(body)'s result (or body, mutated in place) under a
    valid CRC: only the content is hostile. Returns the file's path."""
    path = place.path("eoslog.meta")
    data = logtools.file_bytes(path)
    body = json.loads(data[10:])
    result = mutate(body)
    payload = result if isinstance(result, bytes) else json.dumps(body).encode()
    header = struct.pack(">4shI", b"EOSM", 1, primitives.crc32c(payload))
    with open(path, "wb") as file:
        file.write(header + payload)
    return path


def entry(partitions: object = 1, config: object = None) -> dict[str, object]:
    return {"partitions": partitions, "config": {} if config is None else config}


def set_topic(name: str, value: object) -> Callable[[dict[str, object]], None]:
    def mutate(body: dict[str, object]) -> None:
        topics = body["topics"]
        assert isinstance(topics, dict)
        topics[name] = value

    return mutate


def set_field(key: str, value: object) -> Callable[[dict[str, object]], None]:
    def mutate(body: dict[str, object]) -> None:
        body[key] = value

    return mutate


FORGERIES: dict[str, Callable[[dict[str, object]], object]] = {
    "topic ../x": set_topic("../x", entry()),
    "topic ../../x": set_topic("../../x", entry()),
    "topic with a slash": set_topic("a/b", entry()),
    "topic ..": set_topic("..", entry()),
    "topic empty": set_topic("", entry()),
    "topic 250 characters": set_topic("x" * 250, entry()),
    "topic with a space": set_topic("a b", entry()),
    "partitions 0": set_topic("p", entry(0)),
    "partitions -1": set_topic("p", entry(-1)),
    "partitions a string": set_topic("p", entry("2")),
    "partitions true": set_topic("p", entry(True)),
    "partitions a float": set_topic("p", entry(2.0)),
    "partitions past the limit": set_topic("p", entry(10**7)),
    "partitions missing": set_topic("p", {"config": {}}),
    "entry not an object": set_topic("p", [1, {}]),
    "config not an object": set_topic("p", entry(1, "segment.bytes=1")),
    "config unknown key": set_topic("p", entry(1, {"no.such.key": 1})),
    "config bad value": set_topic("p", entry(1, {"segment.bytes": "big"})),
    "config out of range": set_topic("p", entry(1, {"segment.bytes": -5})),
    "no topics": lambda body: body.pop("topics"),
    "topics a list": set_field("topics", [TOPIC]),
    "producer id block negative": set_field("next_producer_id_block", -1),
    "producer id block a string": set_field("next_producer_id_block", "5"),
    "producer id block past int64": set_field("next_producer_id_block", 1 << 63),
    "coordinator epoch past int32": set_field("coordinator_epoch", (1 << 31) - 1),
    "coordinator epoch a float": set_field("coordinator_epoch", 1.5),
    "body a list": lambda body: b"[]",
    "not JSON": lambda body: b'{"topics": {',
    "not UTF-8": lambda body: b'{"topics": {"\xff": 1}}',
    "deeply nested": lambda body: b'{"topics": ' + b"[" * 200_000,
    "NaN partitions": lambda body: b'{"topics": {"p": {"partitions": NaN, "config": {}}}}',
    # A fuzz find: 1e400 parses as infinity, which int() refused with an untyped OverflowError.
    "config an overflowing float": lambda body: (
        b'{"topics": {"p": {"partitions": 1, "config": {"segment.bytes": 1048576764E444400}}}}'
    ),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_forged_meta_is_a_typed_error_naming_it_and_changes_nothing(
    place: Place, forgery: str
) -> None:
    path = forge_meta(place, FORGERIES[forgery])
    before = place.snapshot()
    with pytest.raises(KafkaStorageError) as caught:
        eoslog.open(place.root, background=False)
    assert path in str(caught.value), caught.value
    assert place.snapshot() == before
    assert place.outside_untouched()


def test_a_meta_json_syntax_error_names_the_byte(place: Place) -> None:
    forge_meta(place, lambda body: b'{"topics": {}, oops}')
    with pytest.raises(KafkaStorageError, match="at byte 25"):  # 10-byte header + 15
        eoslog.open(place.root, background=False)


def test_a_valid_forged_meta_still_opens(place: Place) -> None:
    # The checks refuse only what create_topic would refuse: an honest edit still loads.
    forge_meta(place, set_topic("second", entry(2, {"retention.ms": 1000})))
    with eoslog.open(place.root, background=False) as broker:
        assert broker.list_topics()["second"].num_partitions == 2


# -- 3. stray names in a partition directory -------------------------------------------------

STRAY_FILES = [
    "junk.log",
    "abc.snapshot",
    "-5.log",
    "+5.log",
    "00000000000000000000000.log",  # 23 digits
    "99999999999999999999.log",  # 20 digits past int64
    "0000000000000000000٠.log",  # an Arabic-Indic zero: a digit to str.isdigit, not to us
    "00000000000000000000.log.bak",
    "00000000000000000000.LOG",
    "junk.index",
    "junk.timeindex",
    "junk.txnindex",
    "junk.tmp",
    "junk.deleted",
    "leader-epoch-checkpoint",
]


@pytest.mark.parametrize("directory", [False, True], ids=["file", "directory"])
@pytest.mark.parametrize("name", STRAY_FILES)
def test_a_stray_name_in_a_partition_is_reported_kept_and_never_a_segment(
    place: Place, name: str, directory: bool
) -> None:
    segment = place.path(SEGMENT, "00000000000000000000.log")
    log_bytes = logtools.file_bytes(segment)
    stray = place.path(SEGMENT, name)
    if directory:
        os.mkdir(stray)
    else:
        open(stray, "wb").close()
    os.unlink(place.path(checkpoints.CLEAN_SHUTDOWN_FILE))  # an unclean open rescans
    for _ in range(2):  # unclean, then clean
        with eoslog.open(place.root, background=False) as broker:
            log = broker.log(TOPIC, 0)
            assert stray in log.recovery_report.stray_files
            assert len(logtools.read_all(log)) == RECORDS
        assert os.path.lexists(stray)
        assert logtools.file_bytes(segment) == log_bytes


def test_a_directory_named_like_a_segment_is_a_stray_not_a_segment(place: Place) -> None:
    stray = place.path(SEGMENT, f"{RECORDS + 5:020d}.log")
    os.mkdir(stray)
    os.unlink(place.path(checkpoints.CLEAN_SHUTDOWN_FILE))
    with eoslog.open(place.root, background=False) as broker:
        log = broker.log(TOPIC, 0)
        assert log.recovery_report.stray_files == [stray]
        assert log.log_end_offset == RECORDS
        log.append_batch(logtools.batch([b"after"]))
    assert os.path.isdir(stray)
    assert len(place.values()) == RECORDS + 1


def test_our_own_leftovers_are_still_removed(place: Place) -> None:
    leftovers = [
        place.path(SEGMENT, "00000000000000000000.log.deleted"),
        place.path(SEGMENT, "00000000000000000000.index.tmp"),
        place.path(SEGMENT, f"{RECORDS:020d}.snapshot.tmp"),
        place.path(SEGMENT, f"{RECORDS + 7:020d}.index"),  # an index without its .log
    ]
    for path in leftovers:
        open(path, "wb").close()
    with eoslog.open(place.root, background=False) as broker:
        assert broker.log(TOPIC, 0).recovery_report.stray_files == []
    assert not any(os.path.exists(path) for path in leftovers)


# -- 4. topic deletion ---------------------------------------------------------------------


@pytest.mark.parametrize("length", [215, 249])
def test_a_topic_with_the_longest_names_can_be_deleted(place: Place, length: int) -> None:
    name = "n" * length
    with eoslog.open(place.root, background=False) as broker:
        broker.create_topic(name, 3)
        for partition in range(3):
            broker.log(name, partition).append_batch(logtools.batch([b"gone"]))
        broker.delete_topic(name)
        assert name not in broker.list_topics()
    assert not [entry for entry in os.listdir(place.root) if entry.startswith("n")]
    with eoslog.open(place.root, background=False) as broker:
        assert name not in broker.list_topics()
        broker.create_topic(name, 1)
        assert broker.log(name, 0).log_end_offset == 0


def test_a_topic_holding_stray_files_and_directories_can_be_deleted(place: Place) -> None:
    os.makedirs(place.path(SEGMENT, f"{RECORDS + 5:020d}.log", "nested"))
    open(place.path(SEGMENT, "junk.log"), "wb").close()
    os.symlink(place.outside, place.path(SEGMENT, "link"))
    with eoslog.open(place.root, background=False) as broker:
        broker.delete_topic(TOPIC)
    assert not [entry for entry in os.listdir(place.root) if entry.startswith(f"{TOPIC}-")]
    assert place.outside_untouched()


class FailingUnlinks(PosixFileSystem):
    """The broker's rooted file system, with unlink failing (EIO) under `doomed` once armed:
    a delete interrupted after its renames."""

    def __init__(self, root: str, doomed: str) -> None:
        super().__init__(root)
        self.doomed = doomed
        self.armed = False

    def unlink(self, path: str) -> None:
        if self.armed and path.startswith(self.doomed):
            raise OSError(5, "injected unlink failure", path)
        super().unlink(path)


def test_the_open_sweeps_the_delete_directory_of_a_long_topic_name(place: Place) -> None:
    name = "n" * 249
    fs = FailingUnlinks(place.root, place.path("n" * 100))
    broker = eoslog.open(place.root, background=False, fs=fs)
    broker.create_topic(name, 2)
    broker.log(name, 1).append_batch(logtools.batch([b"gone"]))
    fs.armed = True
    with pytest.raises(KafkaStorageError):
        broker.delete_topic(name)
    broker.close()
    left = [entry for entry in os.listdir(place.root) if entry.endswith("-delete")]
    assert len(left) == 2 and all(len(entry) <= 255 for entry in left)
    with eoslog.open(place.root, background=False) as broker:
        assert name not in broker.list_topics()
    assert not [entry for entry in os.listdir(place.root) if entry.startswith("n")]


def test_the_open_sweep_leaves_other_names_ending_in_delete_alone(place: Place) -> None:
    kept = [place.path("notes-delete"), place.path("x-0.nothex-delete")]
    open(kept[0], "wb").close()
    os.mkdir(kept[1])
    with eoslog.open(place.root, background=False):
        pass
    assert all(os.path.lexists(path) for path in kept)


# -- 5. the maintenance race ---------------------------------------------------------------


def test_run_maintenance_from_many_threads_beside_the_maintenance_thread_is_safe(
    place: Place,
) -> None:
    # The maintenance thread runs every millisecond; four more threads call run_maintenance()
    # and one appends. Before the fix two writers of log-start-offset-checkpoint.tmp collided
    # and the broker fail-stopped with "No such file or directory".
    config = {"log.retention.check.interval.ms": 1}
    broker = eoslog.open(place.root, config=config)
    failures: list[BaseException] = []

    def guarded(work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except BaseException as error:  # the test reports every failure
                failures.append(error)

        return run

    def maintain() -> None:
        for _ in range(60):
            broker.run_maintenance()

    appended = 200

    def append() -> None:
        for value in logtools.values(RECORDS, appended):
            broker.log(TOPIC, 0).append_batch(logtools.batch([value]))

    threads = [threading.Thread(target=guarded(maintain)) for _ in range(4)]
    threads.append(threading.Thread(target=guarded(append)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    broker.close()
    assert failures == []
    for name in (checkpoints.RECOVERY_POINT_FILE, checkpoints.LOG_START_OFFSET_FILE):
        checkpoints.decode_offsets(logtools.file_bytes(place.path(name)))
        assert not os.path.exists(place.path(name + ".tmp"))
    counts = place.path(checkpoints.ABORTED_TXNS_FILE)
    checkpoints.decode_aborted_counts(logtools.file_bytes(counts))
    assert not os.path.exists(counts + ".tmp")
    assert len(place.values()) == RECORDS + appended


def test_run_maintenance_after_close_writes_nothing(place: Place) -> None:
    broker = eoslog.open(place.root, background=False)
    broker.close()
    before = place.snapshot()
    with pytest.raises(KafkaStorageError, match="closed"):
        broker.run_maintenance()
    assert place.snapshot() == before


@pytest.mark.parametrize(
    "name", ["99999999999999999999.log", "09999999999999999999.log", "0000000000000000000٠.log"]
)
def test_an_offline_scan_ignores_stray_segment_names(place: Place, name: str) -> None:
    # A 20-digit name past int64 gave an untyped OverflowError; a name with a non-ASCII digit
    # was read as segment 0 a second time (the scan then happened to skip its records).
    open(place.path(SEGMENT, name), "wb").close()
    rows = sum(batch.num_rows for batch in eoslog.offline.scan(place.root, [TOPIC]))
    assert rows == RECORDS
