"""A drop-in for confluent-kafka-python (docs/api.md "confluent-kafka drop-in"):

    import eoslog.confluent as confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": "eoslog:///var/lib/app/log"})
    c = confluent_kafka.Consumer({"bootstrap.servers": "eoslog:///var/lib/app/log",
                                  "group.id": "g"})

A client names its log directory in its config, where a Kafka client names its brokers:
`bootstrap.servers` = `eoslog://` + the directory's path (`eoslog:///abs/path`, or
`eoslog://relative/path` from the working directory), or the key `eoslog.dir` = the path. The
first client of a directory in this process opens it (eoslog.open); every later client of the
same directory shares that Broker; the directory is closed when its last client closes (or is
collected), and at interpreter exit, which flushes what producers still hold and commits what
consumers consumed (Broker.close). Two more keys are read at that first open and ignored
after it: `eoslog.durability` ("commit", the default, "always" or "none"; docs/reliability.md)
and `eoslog.broker.<key>` for a broker-level setting (`eoslog.broker.num.partitions`: 3). Every
other key is the client's, as for `broker.producer(config)` / `broker.consumer(config)`.

The classes are eoslog's own (Producer and Consumer subclass eoslog.Producer and
eoslog.Consumer, AdminClient subclasses eoslog.client.admin.AdminClient, adding only the
directory), so both spellings behave identically. The admin types (NewTopic, NewPartitions,
ConfigResource, ...) are exported here and, for `from confluent_kafka.admin import ...`, from
eoslog.confluent.admin.
"""

from __future__ import annotations

import atexit
import collections
import functools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Final

from eoslog import __version__
from eoslog.broker import DURABILITY_MODES, Broker
from eoslog.broker import open as open_broker
from eoslog.client import partitioner
from eoslog.client.admin import AdminClient as _AdminClient
from eoslog.client.admin_cluster import ElectionType
from eoslog.client.admin_types import (
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    DeletedRecords,
    IsolationLevel,
    NewPartitions,
    NewTopic,
    Node,
    OffsetSpec,
    ResourceType,
    TopicCollection,
    TopicPartitionInfo,
)
from eoslog.client.consumer import Consumer as _Consumer
from eoslog.client.message import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Message,
    TopicPartition,
)
from eoslog.client.producer import Producer as _Producer
from eoslog.confluent.compat import (
    ConcurrentModificationException,
    IllegalStateException,
    ThrottleEvent,
    Uuid,
    consistent,
    fnv1a,
    murmur2,
)
from eoslog.coordinator.group_coordinator import ConsumerGroupMetadata
from eoslog.errors import InvalidConfigError, KafkaError, KafkaException

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "AdminClient",
    "ConcurrentModificationException",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerGroupState",
    "ConsumerGroupTopicPartitions",
    "ConsumerGroupType",
    "DeletedRecords",
    "ElectionType",
    "IllegalStateException",
    "IsolationLevel",
    "KafkaError",
    "KafkaException",
    "Message",
    "NewPartitions",
    "NewTopic",
    "Node",
    "OffsetSpec",
    "Producer",
    "ResourceType",
    "ThrottleEvent",
    "TopicCollection",
    "TopicPartition",
    "TopicPartitionInfo",
    "Uuid",
    "consistent",
    "fnv1a",
    "libversion",
    "murmur2",
    "version",
]

SCHEME: Final = "eoslog://"
DIRECTORY_KEY: Final = "eoslog.dir"
DURABILITY_KEY: Final = "eoslog.durability"
BROKER_PREFIX: Final = "eoslog.broker."


def version() -> tuple[str, int]:
    """(version string, version as an int 0xMMmmrr00), as confluent_kafka.version() gives."""
    major, minor, patch = (int(part) for part in __version__.split(".")[:3])
    return __version__, (major << 24) | (minor << 16) | (patch << 8)


def libversion() -> tuple[str, int]:
    """The engine's version in confluent_kafka.libversion()'s shape (eoslog has no librdkafka)."""
    return version()


class _Directory:
    """Where a client's config points, and what the first open of it takes."""

    def __init__(self, config: Mapping[str, object]) -> None:
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a dict, not {type(config).__name__}")
        servers = config.get("bootstrap.servers")
        named = config.get(DIRECTORY_KEY)
        if named is None and isinstance(servers, str) and servers.startswith(SCHEME):
            named = servers[len(SCHEME) :]
        if not isinstance(named, str) or not named:
            raise InvalidConfigError(
                f"name the log directory: 'bootstrap.servers': '{SCHEME}/path/to/dir' or "
                f"'{DIRECTORY_KEY}': '/path/to/dir' (got bootstrap.servers={servers!r})"
            )
        self.path = os.path.realpath(named)
        durability = config.get(DURABILITY_KEY, "commit")
        if durability not in DURABILITY_MODES:
            raise InvalidConfigError(
                f"{DURABILITY_KEY} must be one of {', '.join(DURABILITY_MODES)}, not {durability!r}"
            )
        self.durability = str(durability)
        self.broker_config = {
            key[len(BROKER_PREFIX) :]: value
            for key, value in config.items()
            if key.startswith(BROKER_PREFIX)
        }
        self.client_config = {
            key: value
            for key, value in config.items()
            if key not in (DIRECTORY_KEY, DURABILITY_KEY) and not key.startswith(BROKER_PREFIX)
        }


class _Brokers:
    """The brokers this process opened for eoslog.confluent clients, by real path, with how
    many clients each still has.

    A client gives its directory back from a weakref finalizer when it is collected, and the
    collector runs finalizers wherever Python allocates: also in this thread while it holds
    the lock, opening a broker (a release that waited for the lock there deadlocked). So
    release() only queues the path, and whoever holds the lock, or gets it without waiting,
    settles the queue: counts go down, and a broker whose last client went is closed before
    the lock is let go (so that a client opening the same directory next finds it closed)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, list[Any]] = {}  # path -> [broker, clients]
        self._released: collections.deque[str] = collections.deque()  # not yet counted

    def acquire(self, directory: _Directory) -> Broker:
        try:
            with self._lock:
                self._settle_locked()
                entry = self._open.get(directory.path)
                if entry is None:
                    broker = open_broker(
                        directory.path, directory.durability, directory.broker_config
                    )
                    entry = self._open[directory.path] = [broker, 0]
                entry[1] += 1
                return entry[0]  # type: ignore[no-any-return]
        finally:
            self._settle()

    def release(self, path: str) -> None:
        """One client of `path` is done (close(), collection or a failed __init__). Safe
        from a finalizer: it never waits for the lock."""
        self._released.append(path)
        self._settle()

    def _settle(self) -> None:
        # Re-checked after the lock is let go: a path queued while another thread held it
        # is settled by whichever thread gets the lock next.
        while self._released and self._lock.acquire(blocking=False):
            try:
                self._settle_locked()
            finally:
                self._lock.release()

    def _settle_locked(self) -> None:
        while self._released:
            path = self._released.popleft()
            entry = self._open.get(path)
            if entry is None:
                continue
            entry[1] -= 1
            if entry[1] <= 0:
                del self._open[path]
                try:
                    entry[0].close()
                except Exception:  # the client that let go may be a finalizer: never raise
                    _log.exception("closing the eoslog broker of %s failed", path)

    def close_all(self) -> None:
        with self._lock:
            self._settle_locked()
            brokers = [entry[0] for entry in self._open.values()]
            self._open.clear()
        for broker in brokers:
            broker.close()


_log = logging.getLogger(__name__)
_BROKERS = _Brokers()
atexit.register(_BROKERS.close_all)


def _attach(
    client: Producer | Consumer | AdminClient,
    config: Mapping[str, object],
    kwargs: Mapping[str, object],
    init: Callable[[Broker, dict[str, object]], None],
) -> None:
    """Open or share the directory `config` names, then run the eoslog client's __init__;
    the client's release (a finalizer) gives the directory back once, at close or
    collection, or at once if __init__ raises."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict, not {type(config).__name__}")
    directory = _Directory({**config, **kwargs})
    broker = _BROKERS.acquire(directory)
    client._release = weakref.finalize(client, _BROKERS.release, directory.path)
    try:
        init(broker, directory.client_config)
    except BaseException:
        client._release()
        raise


class Producer(_Producer):
    """confluent_kafka.Producer(config) or Producer(**config): eoslog's Producer over the
    directory the config names (module docstring; keyword arguments join the dict, as in
    confluent-kafka). close() (an eoslog addition) flushes, stops it and releases the
    directory; without it the directory is released when the producer is collected or at
    exit."""

    _release: weakref.finalize[Any, Any]

    def __init__(self, config: Mapping[str, object] | None = None, **kwargs: Any) -> None:
        # librdkafka's default partitioner, where broker.producer() keeps Java's.
        _attach(
            self,
            {} if config is None else config,
            kwargs,
            functools.partial(super().__init__, default_partitioner=partitioner.CONFLUENT_DEFAULT),
        )

    def close(self, timeout: float | None = None) -> int:
        try:
            return super().close(timeout)
        finally:
            self._release()


class Consumer(_Consumer):
    """confluent_kafka.Consumer(config) or Consumer(**config): eoslog's Consumer over the
    directory the config names (module docstring; keyword arguments join the dict); close()
    also releases the directory."""

    _release: weakref.finalize[Any, Any]

    def __init__(self, config: Mapping[str, object] | None = None, **kwargs: Any) -> None:
        _attach(self, {} if config is None else config, kwargs, super().__init__)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._release()


class AdminClient(_AdminClient):
    """confluent_kafka.admin.AdminClient(config): eoslog's AdminClient (eoslog.client.admin)
    over the directory the config names (module docstring). The directory is released when
    the client is closed: at the end of a `with` block (as confluent's destroys its handle
    there), by close() (an eoslog addition), or when it is collected (or at exit)."""

    _release: weakref.finalize[Any, Any]

    def __init__(self, config: Mapping[str, object], **kwargs: Any) -> None:
        _attach(self, config, kwargs, super().__init__)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._release()
