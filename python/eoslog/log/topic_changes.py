"""Changes to a topic that exists: more partitions (Kafka's CreatePartitions), a new config
(IncrementalAlterConfigs) and its deletion's directory names, checked here and applied in the
order that keeps a crash harmless (docs/format.md §9.1, "Changing a topic"). The broker calls
these under its lock, with its own metadata writer: this module knows eoslog.meta's topics,
never the broker.

The rule for more partitions: the new partition directories first, each with its empty first
segment, synced; then eoslog.meta naming the new count (temp file, fsync, rename, directory
fsync: the commit point); only then does any client see the new partitions. A crash before
the rename leaves directories past the count eoslog.meta gives: nothing was ever written to
them, an open ignores them (and logs a warning naming them), and adding partitions again
replaces them. A crash after it leaves a topic with its new count whose newest directories
may lack their recovery-point entries: the open treats them as young partitions that lost
their entry (they are empty) and writes the entries.

Thread safety: the functions keep no state; the caller holds the broker lock.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Final

from eoslog import crashpoints, limits
from eoslog.errors import InvalidConfigError, InvalidPartitionsError, KafkaStorageError
from eoslog.fs import FileSystem, remove_tree
from eoslog.log.config import LogConfig
from eoslog.log.meta_file import PARTITIONS_MAX, TopicMetadata

if TYPE_CHECKING:
    from eoslog.log.partition import PartitionLog

_log = logging.getLogger(__name__)
_PARTITION_DIRECTORY = re.compile(r"(.+)-([0-9]+)")
# A partition directory being deleted: `<topic>-<partition>.<random>-delete` (Kafka's suffix),
# the topic cut short so that the name fits limits.file_name_bytes_max (Kafka's
# UnifiedLog.logDeleteDirName).
DELETE_SUFFIX: Final = "-delete"
DELETE_DIRECTORY = re.compile(r"[a-zA-Z0-9._-]*-[0-9]+\.[0-9a-f]{32}-delete")


def grown_topic(metadata: TopicMetadata, total: object) -> TopicMetadata:
    """The topic with `total` partitions; InvalidPartitionsError unless total is an integer
    above the current count (Kafka adds partitions, never removes them) and at most
    PARTITIONS_MAX."""
    current = metadata.num_partitions
    if isinstance(total, bool) or not isinstance(total, int):
        raise InvalidPartitionsError(f"a partition count is an integer, not {total!r}")
    if total == current:
        raise InvalidPartitionsError(f"Topic already has {current} partitions.")
    if total < current:
        raise InvalidPartitionsError(
            f"Topic currently has {current} partitions, which is higher than the requested {total}."
        )
    if total > PARTITIONS_MAX:
        raise InvalidPartitionsError(f"a topic has at most {PARTITIONS_MAX} partitions")
    return metadata._replace(num_partitions=total)


def add_partitions(
    fs: FileSystem,
    root: str,
    grown: TopicMetadata,
    first_new: int,
    open_log: Callable[[int], PartitionLog],
    commit: Callable[[], None],
) -> dict[int, PartitionLog]:
    """Make partitions first_new..grown.num_partitions-1 of the topic (module docstring: the
    directories, then `commit`, which writes eoslog.meta). Returns the new logs, which the
    caller publishes. KafkaStorageError when the storage fails: the new logs are closed and
    their directories removed, so the topic keeps its old count (a commit that failed after
    its rename leaves eoslog.meta naming directories that are gone: the next open makes
    them again, empty)."""
    logs: dict[int, PartitionLog] = {}
    try:
        for partition in range(first_new, grown.num_partitions):
            stale = os.path.join(root, f"{grown.name}-{partition}")
            if fs.exists(stale):
                remove_tree(fs, stale)  # left by a crash before an earlier commit
            logs[partition] = open_log(partition)
        crashpoints.hit("partitions.made")
        commit()
        crashpoints.hit("partitions.committed")
    except BaseException as error:
        for log in logs.values():
            try:
                log.close()
                remove_tree(fs, log.directory)
            except (OSError, KafkaStorageError) as undo:
                _log.warning("undoing new partition %s failed: %s", log.directory, undo)
        if isinstance(error, OSError):
            raise KafkaStorageError(
                f"adding partitions to topic {grown.name!r} failed: {error}"
            ) from error
        raise
    return logs


def stray_partition_directories(
    directories: Iterable[str], topics: Mapping[str, TopicMetadata]
) -> list[str]:
    """The directories named as partitions of a known topic at or past its count: left by a
    crash between the new directories and eoslog.meta's commit (module docstring)."""
    stray = []
    for name in directories:
        found = _PARTITION_DIRECTORY.fullmatch(name)
        if found is None:
            continue
        topic = topics.get(found.group(1))
        if topic is not None and int(found.group(2)) >= topic.num_partitions:
            stray.append(name)
    if stray:
        _log.warning(
            "ignoring partition directories past their topic's count in eoslog.meta (left by "
            "a crash while partitions were added; the next addition replaces them): %s",
            ", ".join(sorted(stray)),
        )
    return stray


def altered_config(
    metadata: TopicMetadata,
    defaults: LogConfig,
    changes: Mapping[str, object | None],
) -> tuple[TopicMetadata, LogConfig]:
    """The topic with its properties changed: a key set to a value, or, given None, removed
    (the broker's default applies again). Checked as create_topic checks a config:
    InvalidConfigError naming the key for an unknown key or a bad value, nothing changed.
    Returns the new metadata (the properties set on the topic, normalized) and the
    effective config."""
    properties: dict[str, object] = dict(metadata.config)
    for key, value in changes.items():
        if not isinstance(key, str):
            raise InvalidConfigError(f"a config name is a string, not {key!r}")
        if value is None:
            defaults.with_properties({key: _any_value_of(defaults, key)})  # a known key
            properties.pop(key, None)
        else:
            properties[key] = value
    config = defaults.with_properties(properties)
    normalized = config.to_properties()
    stored = {key: normalized[key] for key in properties}
    return metadata._replace(config=stored), config


def _any_value_of(defaults: LogConfig, key: str) -> object:
    """A valid value of a known key (its default), or the key itself, which with_properties
    then refuses as unknown."""
    return defaults.to_properties().get(key, key)


def delete_directory_name(topic: str, partition: int) -> str:
    """The name a partition directory is renamed to before its files are removed: Kafka's
    `<topic>-<partition>.<uuid hex>-delete`, the topic cut so that the name fits
    limits.file_name_bytes_max (a topic may be 249 characters long: the plain name would not
    fit)."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
    name = topic[: limits.file_name_bytes_max - len(suffix)] + suffix
    assert len(name.encode()) <= limits.file_name_bytes_max and DELETE_DIRECTORY.fullmatch(name), (
        name
    )
    return name
