"""Why each test of the clients' own suites that fails against `eoslog serve` fails (the
reasons docs/api.md "Wire protocol" lists). Keyed by test function name (parameters dropped)."""

from __future__ import annotations

from typing import Final

_SINGLE_NODE = "needs what one node cannot give"
_NOT_SERVED = "feature not served"

KNOWN_FAILURES: Final = {
    "test_create_describe_delete_acls": f"{_SINGLE_NODE}: ACLs (DescribeAcls...)",
    "test_elect_leaders": f"{_SINGLE_NODE}: replication (ElectLeaders)",
    "test_alter_partition_reassignments": f"{_SINGLE_NODE}: replicas (AlterPartitionReassignments)",
    "test_list_partition_reassignments": f"{_SINGLE_NODE}: replicas (ListPartitionReassignments)",
    "test_describe_metadata_quorum": f"{_SINGLE_NODE}: a KRaft quorum (DescribeQuorum)",
    "test_describe_log_dirs": f"{_NOT_SERVED}: DescribeLogDirs",
    "test_alter_replica_log_dirs": f"{_NOT_SERVED}: DescribeLogDirs, AlterReplicaLogDirs",
    "test_describe_topic_partitions": f"{_NOT_SERVED}: DescribeTopicPartitions",
    "test_describe_topic_partitions_pagination": f"{_NOT_SERVED}: DescribeTopicPartitions",
    "test_list_config_resources": f"{_NOT_SERVED}: ListConfigResources",
}
