"""librdkafka itself, through the copy confluent-kafka ships, as the tests' oracle: its
partitioner functions (public in rdkafka.h) and a mock cluster with topics of any partition
count (rd_kafka_mock_topic_create), which confluent-kafka's Python API cannot make."""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Iterator
from contextlib import contextmanager

import confluent_kafka

_LIBS = os.path.join(os.path.dirname(confluent_kafka.__file__), os.pardir, "confluent_kafka.libs")
_PRODUCER = 0  # RD_KAFKA_PRODUCER
_ERROR_BYTES = 512


def _library() -> ctypes.CDLL:
    [path] = glob.glob(os.path.join(_LIBS, "librdkafka*.so*"))
    lib = ctypes.CDLL(path)
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_int,
    ]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    return lib


LIBRDKAFKA = _library()


def partition(partitioner: str, key: bytes | None, partition_count: int) -> int:
    """librdkafka's rd_kafka_msg_partitioner_<partitioner> for the key (no topic handle:
    only for the cases that do not pick at random)."""
    function = getattr(LIBRDKAFKA, f"rd_kafka_msg_partitioner_{partitioner}")
    function.restype = ctypes.c_int32
    function.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_int32,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    return int(function(None, key, 0 if key is None else len(key), partition_count, None, None))


@contextmanager
def mock_cluster(topics: dict[str, int]) -> Iterator[str]:
    """A one-broker mock cluster with the topics {name: partition count}; its
    bootstrap.servers."""
    error = ctypes.create_string_buffer(_ERROR_BYTES)
    handle = LIBRDKAFKA.rd_kafka_new(_PRODUCER, LIBRDKAFKA.rd_kafka_conf_new(), error, _ERROR_BYTES)
    assert handle, error.value
    cluster = LIBRDKAFKA.rd_kafka_mock_cluster_new(handle, 1)
    try:
        for name, count in topics.items():
            assert LIBRDKAFKA.rd_kafka_mock_topic_create(cluster, name.encode(), count, 1) == 0
        yield LIBRDKAFKA.rd_kafka_mock_cluster_bootstraps(cluster).decode()
    finally:
        LIBRDKAFKA.rd_kafka_mock_cluster_destroy(cluster)
        LIBRDKAFKA.rd_kafka_destroy(handle)
