"""Every version of every API the server registers answers a well-formed request with no
error: the handlers build each answer from the fields its version has (messages.build), so a
field an old or new version lacks or adds is caught here, not by a client in the field."""

from __future__ import annotations

import dataclasses
import datetime
import importlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.static.constants import EntityType

from eoslog.broker import Broker
from eoslog.serve import registry
from eoslog.serve.messages import build
from eoslog.serve.server import Server
from tests.serve import wire

TIMEOUT = datetime.timedelta(seconds=wire.DEADLINE_S)
SOON = datetime.timedelta(milliseconds=0)


def _api_versions(m: Any, v: int) -> Any:
    return build(m.ApiVersionsRequest, client_software_name="t", client_software_version="1")


def _metadata(m: Any, v: int) -> Any:
    topic = build(m.MetadataRequestTopic, name="data", topic_id=None)
    return build(
        m.MetadataRequest,
        topics=(topic,),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def _produce(m: Any, v: int) -> Any:
    data = build(m.PartitionProduceData, index=0, records=wire.batch(b"v%d" % v))
    topic = build(m.TopicProduceData, name="data", partition_data=(data,))
    return build(m.ProduceRequest, acks=-1, timeout=TIMEOUT, topic_data=(topic,))


def _fetch(m: Any, v: int) -> Any:
    partition = build(m.FetchPartition, partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    return build(
        m.FetchRequest,
        replica_id=-1,
        max_wait=SOON,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=1,
        topics=(build(m.FetchTopic, topic="data", partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def _list_offsets(m: Any, v: int) -> Any:
    partitions = tuple(
        build(m.ListOffsetsPartition, partition_index=0, timestamp=spec, max_num_offsets=1)
        for spec in (-1, -2)
    )
    return build(
        m.ListOffsetsRequest,
        replica_id=-1,
        isolation_level=0,
        topics=(build(m.ListOffsetsTopic, name="data", partitions=partitions),),
    )


def _find_coordinator(m: Any, v: int) -> Any:
    return build(m.FindCoordinatorRequest, key="g", key_type=0, coordinator_keys=("g", "h"))


def _describe_cluster(m: Any, v: int) -> Any:
    return build(m.DescribeClusterRequest, include_cluster_authorized_operations=False)


def _create_topics(m: Any, v: int) -> Any:
    config = build(m.CreatableTopicConfig, name="retention.ms", value="60000")
    topic = build(
        m.CreatableTopic,
        name=f"made-{v}",
        num_partitions=2,
        replication_factor=1,
        assignments=(),
        configs=(config,),
    )
    return build(m.CreateTopicsRequest, topics=(topic,), timeout=TIMEOUT, validate_only=False)


def _delete_topics(m: Any, v: int) -> Any:
    name = f"doomed-{v}"
    if hasattr(m, "DeleteTopicState"):
        topics = (build(m.DeleteTopicState, name=name, topic_id=None),)
        return build(m.DeleteTopicsRequest, topics=topics, timeout=TIMEOUT)
    return build(m.DeleteTopicsRequest, topic_names=(name,), timeout=TIMEOUT)


def _create_partitions(m: Any, v: int) -> Any:
    topic = build(m.CreatePartitionsTopic, name="grown", count=v + 2, assignments=None)
    return build(m.CreatePartitionsRequest, topics=(topic,), timeout=TIMEOUT, validate_only=False)


def _describe_configs(m: Any, v: int) -> Any:
    resource = build(
        m.DescribeConfigsResource, resource_type=2, resource_name="data", configuration_keys=None
    )
    return build(
        m.DescribeConfigsRequest,
        resources=(resource,),
        include_synonyms=True,
        include_documentation=True,
    )


def _alter_configs(m: Any, v: int) -> Any:
    config = build(m.AlterableConfig, name="retention.ms", config_operation=0, value="70000")
    resource = build(
        m.AlterConfigsResource, resource_type=2, resource_name="data", configs=(config,)
    )
    return build(m.IncrementalAlterConfigsRequest, resources=(resource,), validate_only=False)


def _delete_records(m: Any, v: int) -> Any:
    partition = build(m.DeleteRecordsPartition, partition_index=0, offset=0)
    topic = build(m.DeleteRecordsTopic, name="data", partitions=(partition,))
    return build(m.DeleteRecordsRequest, topics=(topic,), timeout=TIMEOUT)


REQUESTS: dict[int, Callable[[Any, int], Any]] = {
    18: _api_versions,
    3: _metadata,
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    10: _find_coordinator,
    60: _describe_cluster,
    19: _create_topics,
    20: _delete_topics,
    37: _create_partitions,
    32: _describe_configs,
    44: _alter_configs,
    21: _delete_records,
}


def _served() -> list[tuple[int, int]]:
    for module in registry.HANDLER_MODULES:
        importlib.import_module(module)
    return [
        (key, version)
        for key in REQUESTS
        for version in range(registry.APIS[key].min_version, registry.APIS[key].max_version + 1)
    ]


def _error_codes(entity: Any) -> Iterator[int]:
    """Every error code in a response, nested ones included."""
    if isinstance(entity, tuple):
        for item in entity:
            yield from _error_codes(item)
    elif dataclasses.is_dataclass(entity):
        for field in dataclasses.fields(entity):
            value = getattr(entity, field.name)
            if field.name == "error_code":
                yield int(value)
            else:
                yield from _error_codes(value)


def test_every_registered_api_has_a_request_here() -> None:
    _served()
    mine = {18, 3, 0, 1, 2, 10, 60, 19, 20, 37, 32, 44, 21}
    assert set(REQUESTS) == mine & set(registry.APIS)


@pytest.mark.parametrize(("key", "version"), _served())
def test_each_version_is_answered_without_error(
    broker: Broker, server: Server, key: int, version: int
) -> None:
    broker.create_topic("data", 1)
    broker.create_topic("grown", 1)
    broker.create_topic(f"doomed-{version}", 1)
    module = load_payload_module(key, version, EntityType.request)
    request = REQUESTS[key](module, version)
    with wire.connect(server.address) as sock:
        response = wire.call(sock, request)
    assert set(_error_codes(response)) <= {0}, response
