"""librdkafka's error codes, as confluent_kafka.KafkaError carries them (docs/api.md "Errors").

One row per code: the name confluent-kafka-python gives it as a class attribute of KafkaError,
the number, and librdkafka's one-line description (rd_kafka_err2str), which is what
`KafkaError(code).str()` says when no reason is given. Negative codes are librdkafka's own
("Local: ..."; -191 `_PARTITION_EOF` is an event, not a failure); -1 and the codes from 0 up are
Kafka's protocol codes (clients/.../common/protocol/Errors.java). librdkafka's names differ from
Kafka's Java names in places, among them 2 INVALID_MSG (Java CORRUPT_MESSAGE), 3
UNKNOWN_TOPIC_OR_PART, 10 MSG_SIZE_TOO_LARGE, 17 TOPIC_EXCEPTION and -1 UNKNOWN (Java
UNKNOWN_SERVER_ERROR); eoslog's errors report librdkafka's, as a confluent-kafka user expects.

The rows were written once from confluent-kafka 2.16.1 (librdkafka 2.16.0);
tests/client/test_kafka_error.py checks them against the confluent-kafka installed for the
tests. eoslog never imports confluent_kafka at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

_descriptions: dict[int, str] = {}


def _code(value: int, description: str) -> int:
    """Record librdkafka's description of a code, and return the code."""
    assert value not in _descriptions, f"error code {value} is defined twice"
    _descriptions[value] = description
    return value


class ErrorCodes:
    """The error-code constants of confluent_kafka.KafkaError, which eoslog's KafkaError
    inherits: `KafkaError._PARTITION_EOF == -191`, `KafkaError.UNKNOWN_TOPIC_OR_PART == 3`."""

    __slots__ = ()

    _BAD_MSG: Final = _code(-199, "Local: Bad message format")
    _BAD_COMPRESSION: Final = _code(-198, "Local: Invalid compressed data")
    _DESTROY: Final = _code(-197, "Local: Broker handle destroyed for termination")
    _FAIL: Final = _code(-196, "Local: Communication failure with broker")
    _TRANSPORT: Final = _code(-195, "Local: Broker transport failure")
    _CRIT_SYS_RESOURCE: Final = _code(-194, "Local: Critical system resource failure")
    _RESOLVE: Final = _code(-193, "Local: Host resolution failure")
    _MSG_TIMED_OUT: Final = _code(-192, "Local: Message timed out")
    _PARTITION_EOF: Final = _code(-191, "Broker: No more messages")
    _UNKNOWN_PARTITION: Final = _code(-190, "Local: Unknown partition")
    _FS: Final = _code(-189, "Local: File or filesystem error")
    _UNKNOWN_TOPIC: Final = _code(-188, "Local: Unknown topic")
    _ALL_BROKERS_DOWN: Final = _code(-187, "Local: All broker connections are down")
    _INVALID_ARG: Final = _code(-186, "Local: Invalid argument or configuration")
    _TIMED_OUT: Final = _code(-185, "Local: Timed out")
    _QUEUE_FULL: Final = _code(-184, "Local: Queue full")
    _ISR_INSUFF: Final = _code(-183, "Local: ISR count insufficient")
    _NODE_UPDATE: Final = _code(-182, "Local: Broker node update")
    _SSL: Final = _code(-181, "Local: SSL error")
    _WAIT_COORD: Final = _code(-180, "Local: Waiting for coordinator")
    _UNKNOWN_GROUP: Final = _code(-179, "Local: Unknown group")
    _IN_PROGRESS: Final = _code(-178, "Local: Operation in progress")
    _PREV_IN_PROGRESS: Final = _code(-177, "Local: Previous operation in progress")
    _EXISTING_SUBSCRIPTION: Final = _code(-176, "Local: Existing subscription")
    _ASSIGN_PARTITIONS: Final = _code(-175, "Local: Assign partitions")
    _REVOKE_PARTITIONS: Final = _code(-174, "Local: Revoke partitions")
    _CONFLICT: Final = _code(-173, "Local: Conflicting use")
    _STATE: Final = _code(-172, "Local: Erroneous state")
    _UNKNOWN_PROTOCOL: Final = _code(-171, "Local: Unknown protocol")
    _NOT_IMPLEMENTED: Final = _code(-170, "Local: Not implemented")
    _AUTHENTICATION: Final = _code(-169, "Local: Authentication failure")
    _NO_OFFSET: Final = _code(-168, "Local: No offset stored")
    _OUTDATED: Final = _code(-167, "Local: Outdated")
    _TIMED_OUT_QUEUE: Final = _code(-166, "Local: Timed out in queue")
    _UNSUPPORTED_FEATURE: Final = _code(-165, "Local: Required feature not supported by broker")
    _WAIT_CACHE: Final = _code(-164, "Local: Awaiting cache update")
    _INTR: Final = _code(-163, "Local: Operation interrupted")
    _KEY_SERIALIZATION: Final = _code(-162, "Local: Key serialization error")
    _VALUE_SERIALIZATION: Final = _code(-161, "Local: Value serialization error")
    _KEY_DESERIALIZATION: Final = _code(-160, "Local: Key deserialization error")
    _VALUE_DESERIALIZATION: Final = _code(-159, "Local: Value deserialization error")
    _PARTIAL: Final = _code(-158, "Local: Partial response")
    _READ_ONLY: Final = _code(-157, "Local: Read-only object")
    _NOENT: Final = _code(-156, "Local: No such entry")
    _UNDERFLOW: Final = _code(-155, "Local: Read underflow")
    _INVALID_TYPE: Final = _code(-154, "Local: Invalid type")
    _RETRY: Final = _code(-153, "Local: Retry operation")
    _PURGE_QUEUE: Final = _code(-152, "Local: Purged in queue")
    _PURGE_INFLIGHT: Final = _code(-151, "Local: Purged in flight")
    _FATAL: Final = _code(-150, "Local: Fatal error")
    _INCONSISTENT: Final = _code(-149, "Local: Inconsistent state")
    _GAPLESS_GUARANTEE: Final = _code(
        -148, "Local: Gap-less ordering would not be guaranteed if proceeding"
    )
    _MAX_POLL_EXCEEDED: Final = _code(
        -147, "Local: Maximum application poll interval (max.poll.interval.ms) exceeded"
    )
    _UNKNOWN_BROKER: Final = _code(-146, "Local: Unknown broker")
    _NOT_CONFIGURED: Final = _code(-145, "Local: Functionality not configured")
    _FENCED: Final = _code(-144, "Local: This instance has been fenced by a newer instance")
    _APPLICATION: Final = _code(-143, "Local: Application generated error")
    _ASSIGNMENT_LOST: Final = _code(-142, "Local: Group partition assignment lost")
    _NOOP: Final = _code(-141, "Local: No operation performed")
    _AUTO_OFFSET_RESET: Final = _code(-140, "Local: No offset to automatically reset to")
    _LOG_TRUNCATION: Final = _code(-139, "Local: Partition log truncation detected")
    _INVALID_DIFFERENT_RECORD: Final = _code(
        -138, "Local: an invalid record in the same batch caused the failure of this message too"
    )
    _DESTROY_BROKER: Final = _code(-137, "Local: Broker handle destroyed without termination")
    UNKNOWN: Final = _code(-1, "Unknown broker error")
    NO_ERROR: Final = _code(0, "Success")
    OFFSET_OUT_OF_RANGE: Final = _code(1, "Broker: Offset out of range")
    INVALID_MSG: Final = _code(2, "Broker: Invalid message")
    UNKNOWN_TOPIC_OR_PART: Final = _code(3, "Broker: Unknown topic or partition")
    INVALID_MSG_SIZE: Final = _code(4, "Broker: Invalid message size")
    LEADER_NOT_AVAILABLE: Final = _code(5, "Broker: Leader not available")
    NOT_LEADER_FOR_PARTITION: Final = _code(6, "Broker: Not leader for partition")
    REQUEST_TIMED_OUT: Final = _code(7, "Broker: Request timed out")
    BROKER_NOT_AVAILABLE: Final = _code(8, "Broker: Broker not available")
    REPLICA_NOT_AVAILABLE: Final = _code(9, "Broker: Replica not available")
    MSG_SIZE_TOO_LARGE: Final = _code(10, "Broker: Message size too large")
    STALE_CTRL_EPOCH: Final = _code(11, "Broker: StaleControllerEpochCode")
    OFFSET_METADATA_TOO_LARGE: Final = _code(12, "Broker: Offset metadata string too large")
    NETWORK_EXCEPTION: Final = _code(13, "Broker: Broker disconnected before response received")
    COORDINATOR_LOAD_IN_PROGRESS: Final = _code(14, "Broker: Coordinator load in progress")
    COORDINATOR_NOT_AVAILABLE: Final = _code(15, "Broker: Coordinator not available")
    NOT_COORDINATOR: Final = _code(16, "Broker: Not coordinator")
    TOPIC_EXCEPTION: Final = _code(17, "Broker: Invalid topic")
    RECORD_LIST_TOO_LARGE: Final = _code(
        18, "Broker: Message batch larger than configured server segment size"
    )
    NOT_ENOUGH_REPLICAS: Final = _code(19, "Broker: Not enough in-sync replicas")
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: Final = _code(
        20, "Broker: Message(s) written to insufficient number of in-sync replicas"
    )
    INVALID_REQUIRED_ACKS: Final = _code(21, "Broker: Invalid required acks value")
    ILLEGAL_GENERATION: Final = _code(22, "Broker: Specified group generation id is not valid")
    INCONSISTENT_GROUP_PROTOCOL: Final = _code(23, "Broker: Inconsistent group protocol")
    INVALID_GROUP_ID: Final = _code(24, "Broker: Invalid group.id")
    UNKNOWN_MEMBER_ID: Final = _code(25, "Broker: Unknown member")
    INVALID_SESSION_TIMEOUT: Final = _code(26, "Broker: Invalid session timeout")
    REBALANCE_IN_PROGRESS: Final = _code(27, "Broker: Group rebalance in progress")
    INVALID_COMMIT_OFFSET_SIZE: Final = _code(28, "Broker: Commit offset data size is not valid")
    TOPIC_AUTHORIZATION_FAILED: Final = _code(29, "Broker: Topic authorization failed")
    GROUP_AUTHORIZATION_FAILED: Final = _code(30, "Broker: Group authorization failed")
    CLUSTER_AUTHORIZATION_FAILED: Final = _code(31, "Broker: Cluster authorization failed")
    INVALID_TIMESTAMP: Final = _code(32, "Broker: Invalid timestamp")
    UNSUPPORTED_SASL_MECHANISM: Final = _code(33, "Broker: Unsupported SASL mechanism")
    ILLEGAL_SASL_STATE: Final = _code(34, "Broker: Request not valid in current SASL state")
    UNSUPPORTED_VERSION: Final = _code(35, "Broker: API version not supported")
    TOPIC_ALREADY_EXISTS: Final = _code(36, "Broker: Topic already exists")
    INVALID_PARTITIONS: Final = _code(37, "Broker: Invalid number of partitions")
    INVALID_REPLICATION_FACTOR: Final = _code(38, "Broker: Invalid replication factor")
    INVALID_REPLICA_ASSIGNMENT: Final = _code(39, "Broker: Invalid replica assignment")
    INVALID_CONFIG: Final = _code(40, "Broker: Configuration is invalid")
    NOT_CONTROLLER: Final = _code(41, "Broker: Not controller for cluster")
    INVALID_REQUEST: Final = _code(42, "Broker: Invalid request")
    UNSUPPORTED_FOR_MESSAGE_FORMAT: Final = _code(
        43, "Broker: Message format on broker does not support request"
    )
    POLICY_VIOLATION: Final = _code(44, "Broker: Policy violation")
    OUT_OF_ORDER_SEQUENCE_NUMBER: Final = _code(
        45, "Broker: Broker received an out of order sequence number"
    )
    DUPLICATE_SEQUENCE_NUMBER: Final = _code(
        46, "Broker: Broker received a duplicate sequence number"
    )
    INVALID_PRODUCER_EPOCH: Final = _code(
        47, "Broker: Producer attempted an operation with an old epoch"
    )
    INVALID_TXN_STATE: Final = _code(
        48, "Broker: Producer attempted a transactional operation in an invalid state"
    )
    INVALID_PRODUCER_ID_MAPPING: Final = _code(
        49,
        "Broker: Producer attempted to use a producer id which is not currently assigned to its"
        " transactional id",
    )
    INVALID_TRANSACTION_TIMEOUT: Final = _code(
        50,
        "Broker: Transaction timeout is larger than the maximum value allowed by the broker's "
        "max.transaction.timeout.ms",
    )
    CONCURRENT_TRANSACTIONS: Final = _code(
        51,
        "Broker: Producer attempted to update a transaction while another concurrent operation "
        "on the same transaction was ongoing",
    )
    TRANSACTION_COORDINATOR_FENCED: Final = _code(
        52,
        "Broker: Indicates that the transaction coordinator sending a WriteTxnMarker is no "
        "longer the current coordinator for a given producer",
    )
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Final = _code(
        53, "Broker: Transactional Id authorization failed"
    )
    SECURITY_DISABLED: Final = _code(54, "Broker: Security features are disabled")
    OPERATION_NOT_ATTEMPTED: Final = _code(55, "Broker: Operation not attempted")
    KAFKA_STORAGE_ERROR: Final = _code(
        56, "Broker: Disk error when trying to access log file on disk"
    )
    LOG_DIR_NOT_FOUND: Final = _code(
        57, "Broker: The user-specified log directory is not found in the broker config"
    )
    SASL_AUTHENTICATION_FAILED: Final = _code(58, "Broker: SASL Authentication failed")
    UNKNOWN_PRODUCER_ID: Final = _code(59, "Broker: Unknown Producer Id")
    REASSIGNMENT_IN_PROGRESS: Final = _code(60, "Broker: Partition reassignment is in progress")
    DELEGATION_TOKEN_AUTH_DISABLED: Final = _code(
        61, "Broker: Delegation Token feature is not enabled"
    )
    DELEGATION_TOKEN_NOT_FOUND: Final = _code(62, "Broker: Delegation Token is not found on server")
    DELEGATION_TOKEN_OWNER_MISMATCH: Final = _code(
        63, "Broker: Specified Principal is not valid Owner/Renewer"
    )
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: Final = _code(
        64, "Broker: Delegation Token requests are not allowed on this connection"
    )
    DELEGATION_TOKEN_AUTHORIZATION_FAILED: Final = _code(
        65, "Broker: Delegation Token authorization failed"
    )
    DELEGATION_TOKEN_EXPIRED: Final = _code(66, "Broker: Delegation Token is expired")
    INVALID_PRINCIPAL_TYPE: Final = _code(67, "Broker: Supplied principalType is not supported")
    NON_EMPTY_GROUP: Final = _code(68, "Broker: The group is not empty")
    GROUP_ID_NOT_FOUND: Final = _code(69, "Broker: The group id does not exist")
    FETCH_SESSION_ID_NOT_FOUND: Final = _code(70, "Broker: The fetch session ID was not found")
    INVALID_FETCH_SESSION_EPOCH: Final = _code(71, "Broker: The fetch session epoch is invalid")
    LISTENER_NOT_FOUND: Final = _code(72, "Broker: No matching listener")
    TOPIC_DELETION_DISABLED: Final = _code(73, "Broker: Topic deletion is disabled")
    FENCED_LEADER_EPOCH: Final = _code(74, "Broker: Leader epoch is older than broker epoch")
    UNKNOWN_LEADER_EPOCH: Final = _code(75, "Broker: Leader epoch is newer than broker epoch")
    UNSUPPORTED_COMPRESSION_TYPE: Final = _code(76, "Broker: Unsupported compression type")
    STALE_BROKER_EPOCH: Final = _code(77, "Broker: Broker epoch has changed")
    OFFSET_NOT_AVAILABLE: Final = _code(78, "Broker: Leader high watermark is not caught up")
    MEMBER_ID_REQUIRED: Final = _code(79, "Broker: Group member needs a valid member ID")
    PREFERRED_LEADER_NOT_AVAILABLE: Final = _code(80, "Broker: Preferred leader was not available")
    GROUP_MAX_SIZE_REACHED: Final = _code(81, "Broker: Consumer group has reached maximum size")
    FENCED_INSTANCE_ID: Final = _code(
        82, "Broker: Static consumer fenced by other consumer with same group.instance.id"
    )
    ELIGIBLE_LEADERS_NOT_AVAILABLE: Final = _code(
        83, "Broker: Eligible partition leaders are not available"
    )
    ELECTION_NOT_NEEDED: Final = _code(84, "Broker: Leader election not needed for topic partition")
    NO_REASSIGNMENT_IN_PROGRESS: Final = _code(
        85, "Broker: No partition reassignment is in progress"
    )
    GROUP_SUBSCRIBED_TO_TOPIC: Final = _code(
        86, "Broker: Deleting offsets of a topic while the consumer group is subscribed to it"
    )
    INVALID_RECORD: Final = _code(87, "Broker: Broker failed to validate record")
    UNSTABLE_OFFSET_COMMIT: Final = _code(
        88, "Broker: There are unstable offsets that need to be cleared"
    )
    THROTTLING_QUOTA_EXCEEDED: Final = _code(89, "Broker: Throttling quota has been exceeded")
    PRODUCER_FENCED: Final = _code(
        90,
        "Broker: There is a newer producer with the same transactionalId which fences the "
        "current one",
    )
    RESOURCE_NOT_FOUND: Final = _code(
        91, "Broker: Request illegally referred to resource that does not exist"
    )
    DUPLICATE_RESOURCE: Final = _code(
        92, "Broker: Request illegally referred to the same resource twice"
    )
    UNACCEPTABLE_CREDENTIAL: Final = _code(
        93, "Broker: Requested credential would not meet criteria for acceptability"
    )
    INCONSISTENT_VOTER_SET: Final = _code(
        94,
        "Broker: Indicates that the either the sender or recipient of a voter-only request is "
        "not one of the expected voters",
    )
    INVALID_UPDATE_VERSION: Final = _code(95, "Broker: Invalid update version")
    FEATURE_UPDATE_FAILED: Final = _code(
        96, "Broker: Unable to update finalized features due to server error"
    )
    PRINCIPAL_DESERIALIZATION_FAILURE: Final = _code(
        97, "Broker: Request principal deserialization failed during forwarding"
    )
    UNKNOWN_TOPIC_ID: Final = _code(100, "Broker: Unknown topic id")
    INCONSISTENT_TOPIC_ID: Final = _code(
        103, "Broker: The log's topic ID did not match the topic ID in the request"
    )
    FENCED_MEMBER_EPOCH: Final = _code(
        110, "Broker: The member epoch is fenced by the group coordinator"
    )
    UNRELEASED_INSTANCE_ID: Final = _code(
        111, "Broker: The instance ID is still used by another member in the consumer group"
    )
    UNSUPPORTED_ASSIGNOR: Final = _code(
        112, "Broker: The assignor or its version range is not supported by the consumer group"
    )
    STALE_MEMBER_EPOCH: Final = _code(113, "Broker: The member epoch is stale")
    MISMATCHED_ENDPOINT_TYPE: Final = _code(
        114, "Broker: The request was sent to an endpoint of the wrong type"
    )
    UNSUPPORTED_ENDPOINT_TYPE: Final = _code(115, "Broker: This endpoint type is not supported yet")
    UNKNOWN_CONTROLLER_ID: Final = _code(116, "Broker: This controller ID is not known")
    UNKNOWN_SUBSCRIPTION_ID: Final = _code(
        117,
        "Broker: Client sent a push telemetry request with an invalid or outdated subscription ID",
    )
    TELEMETRY_TOO_LARGE: Final = _code(
        118,
        "Broker: Client sent a push telemetry request larger than the maximum size the broker "
        "will accept",
    )
    INVALID_REGISTRATION: Final = _code(
        119, "Broker: The controller has considered the broker registration to be invalid"
    )
    TRANSACTION_ABORTABLE: Final = _code(
        120, "Broker: The server encountered an error with the transaction"
    )
    INVALID_RECORD_STATE: Final = _code(121, "Broker: The record state is invalid")
    SHARE_SESSION_NOT_FOUND: Final = _code(122, "Broker: The share session was not found")
    INVALID_SHARE_SESSION_EPOCH: Final = _code(123, "Broker: The share session epoch is invalid")
    FENCED_STATE_EPOCH: Final = _code(124, "Broker: The share-group state epoch did not match")
    INVALID_VOTER_KEY: Final = _code(
        125, "Broker: The voter key doesn't match the receiving replica's key"
    )
    DUPLICATE_VOTER: Final = _code(126, "Broker: The voter is already part of the set of voters")
    VOTER_NOT_FOUND: Final = _code(127, "Broker: The voter is not part of the set of voters")
    INVALID_REGULAR_EXPRESSION: Final = _code(128, "Broker: The regular expression is not valid")
    REBOOTSTRAP_REQUIRED: Final = _code(
        129, "Broker: Client metadata is stale, client should rebootstrap to obtain new metadata"
    )
    STREAMS_INVALID_TOPOLOGY: Final = _code(130, "Broker: The supplied topology is invalid")
    STREAMS_INVALID_TOPOLOGY_EPOCH: Final = _code(
        131, "Broker: The supplied topology epoch is invalid"
    )
    STREAMS_TOPOLOGY_FENCED: Final = _code(132, "Broker: The supplied topology epoch is outdated")
    SHARE_SESSION_LIMIT_REACHED: Final = _code(
        133, "Broker: The limit of share sessions has been reached"
    )


# The tables KafkaError looks codes up in; read-only after import.
DESCRIPTIONS: Final[Mapping[int, str]] = _descriptions
NAMES: Final[Mapping[int, str]] = {
    value: name
    for name, value in vars(ErrorCodes).items()
    if not name.startswith("__") and isinstance(value, int)
}


def name_of(code: int) -> str:
    """librdkafka's name for a code (rd_kafka_err2name); "ERR_<code>?" for a code it does not
    know, as librdkafka prints one."""
    return NAMES.get(code, f"ERR_{code}?")


def description_of(code: int) -> str:
    """librdkafka's description of a code (rd_kafka_err2str); "Err-<code>?" for a code it does
    not know."""
    return DESCRIPTIONS.get(code, f"Err-{code}?")
