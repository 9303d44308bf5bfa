"""Why each test of the clients' own suites that fails against `eoslog serve` fails (the
reasons docs/api.md "Wire protocol" lists), keyed by test function name (parameters dropped),
and reason(), which falls back on the error when the name is not listed."""

from __future__ import annotations

import re
from typing import Final

_ONE_NODE = "needs what one node cannot give"
_NOT_SERVED = "feature not served"
_OWN_BROKER = "starts a Kafka broker of its own"

KNOWN_FAILURES: Final = {
    "test_create_describe_delete_acls": f"{_ONE_NODE}: ACLs (DescribeAcls, CreateAcls)",
    "test_elect_leaders": f"{_ONE_NODE}: replicas to elect from (ElectLeaders)",
    "test_alter_partition_reassignments": f"{_ONE_NODE}: replicas to move",
    "test_list_partition_reassignments": f"{_ONE_NODE}: replicas to move",
    "test_describe_metadata_quorum": f"{_ONE_NODE}: a KRaft quorum (DescribeQuorum)",
    "test_describe_log_dirs": f"{_NOT_SERVED}: DescribeLogDirs",
    "test_alter_replica_log_dirs": f"{_NOT_SERVED}: DescribeLogDirs, AlterReplicaLogDirs",
    "test_describe_topic_partitions": f"{_NOT_SERVED}: DescribeTopicPartitions",
    "test_describe_topic_partitions_pagination": f"{_NOT_SERVED}: DescribeTopicPartitions",
    "test_list_config_resources": f"{_NOT_SERVED}: ListConfigResources",
    "test_describe_configs_broker_resource_returns_configs": (
        f"{_NOT_SERVED}: listener configs (advertised.listeners) among the BROKER resource's"
    ),
    "test_kafka_version_infer": (
        f"{_NOT_SERVED}: kafka-python infers 3.8 from eoslog's ApiVersions (the APIs and "
        "versions Kafka 4 adds are not served); passes at the default KAFKA_VERSION"
    ),
    "test_ssl_handshake": f"{_OWN_BROKER} with an SSL listener (ignores KAFKA_URI)",
    "test_legacy_kafka_client_ssl": f"{_OWN_BROKER} with an SSL listener (ignores KAFKA_URI)",
}

_MISSING_API = re.compile(r"does not support the '(\w+?)(Request)?' Kafka protocol")


def reason(test: str, message: str) -> str:
    """The listed reason for `test` (a name, parameters allowed), else one read from the
    error (an API the client found missing from ApiVersions), else UNCLASSIFIED."""
    listed = KNOWN_FAILURES.get(test.split("[", 1)[0])
    if listed is not None:
        return listed
    missing = _MISSING_API.search(message)
    if missing is not None:
        return f"{_NOT_SERVED}: {missing.group(1)}"
    return f"UNCLASSIFIED: {message}"
