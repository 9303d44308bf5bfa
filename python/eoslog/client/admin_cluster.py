"""The AdminClient's cluster-wide calls (docs/api.md "AdminClient"): describe_cluster, the ACL
and SASL/SCRAM calls, elect_leaders, the deprecated alter_configs and list_groups, poll and
set_sasl_credentials, each answered as a Kafka broker of one node with no authorizer and no
SASL answers it, with confluent_kafka's argument checks at the call. eoslog.client.admin's
AdminClient takes them from ClusterCalls; the answer types (DescribeClusterResult,
ElectionType, GroupMetadata, GroupMember) are confluent's shapes.

- describe_cluster: the one node, the controller, and the directory's cluster id
  (eoslog.client.metadata.cluster_id). With include_authorized_operations=True, every
  operation Kafka supports on the cluster resource: with no authorizer, Kafka grants them all.
- create_acls / describe_acls / delete_acls: SECURITY_DISABLED in every future, as Kafka
  answers when no authorizer is configured; nothing is stored.
- describe_user_scram_credentials: a log directory keeps no credentials, so the answer is the
  one Kafka gives with none stored: {} for every user, RESOURCE_NOT_FOUND for a user named.
  alter_user_scram_credentials: a deletion gets RESOURCE_NOT_FOUND (there is nothing to
  delete), an upsertion _UNSUPPORTED_FEATURE (eoslog has no SASL to use a credential and
  stores none); DUPLICATE_RESOURCE for a (user, mechanism) named twice, as Kafka.
- elect_leaders: each partition has one replica, which leads: ELECTION_NOT_NEEDED for each
  partition named, UNKNOWN_TOPIC_OR_PART for a missing one; for every partition (None) the
  answer is {}, as Kafka leaves out the partitions that needed no election.

Thread safety: as the AdminClient's; each broker call is atomic.
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from eoslog.arguments import real
from eoslog.client.admin_acl_types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
    as_enum,
)
from eoslog.client.admin_answers import answered, check_options, node, non_empty_list, refused
from eoslog.client.admin_types import ConfigResource, Node, ResourceType
from eoslog.client.message import TopicPartition
from eoslog.client.metadata import NO_PORT, NODE_ID, BrokerMetadata, cluster_id
from eoslog.errors import KafkaError

if TYPE_CHECKING:
    from eoslog.client.admin import AdminBroker

# Kafka's supported operations on the CLUSTER resource (AclEntry.supportedOperations), all of
# them granted when no authorizer is configured.
_CLUSTER_OPERATIONS = (
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
)
_NO_AUTHORIZER = "No Authorizer is configured on the broker"


class ElectionType(enum.Enum):
    """confluent_kafka.ElectionType (Kafka's election type codes)."""

    PREFERRED = 0
    UNCLEAN = 1


class DescribeClusterResult:
    """describe_cluster's answer (confluent_kafka.admin.DescribeClusterResult)."""

    def __init__(
        self,
        controller: Node,
        nodes: list[Node],
        cluster_id: str | None = None,
        authorized_operations: Iterable[AclOperation | str | int] | None = None,
    ) -> None:
        self.cluster_id = cluster_id
        self.controller = controller
        self.nodes = nodes
        self.authorized_operations = (
            [as_enum(op, AclOperation) for op in authorized_operations]
            if authorized_operations
            else None
        )


class GroupMember:
    """A member in list_groups' answer (confluent_kafka.admin.GroupMember). eoslog keeps no
    client id, host or protocol bytes for a member: "" and b""."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.client_id: str | None = None
        self.client_host: str | None = None
        self.metadata: bytes | None = None
        self.assignment: bytes | None = None


class GroupMetadata:
    """A group in list_groups' answer (confluent_kafka.admin.GroupMetadata): state is Kafka's
    name ("Empty", "Stable", "PreparingRebalance"; "Dead" for a group not known here)."""

    def __init__(self) -> None:
        self.broker: BrokerMetadata | None = None
        self.id: str | None = None
        self.error: KafkaError | None = None
        self.state: str | None = None
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.members: list[GroupMember] = []

    def __repr__(self) -> str:
        if self.error is not None:
            return f"GroupMetadata({self.id}, {self.error})"
        return f"GroupMetadata({self.id})"

    def __str__(self) -> str:
        return str(self.id)


class ClusterCalls:
    """The calls of the module docstring, for the AdminClient to inherit."""

    @property
    def _broker(self) -> AdminBroker:
        raise NotImplementedError

    def describe_cluster(self, **kwargs: Any) -> Future[DescribeClusterResult]:
        """One future: DescribeClusterResult(controller, [the node], cluster_id,
        authorized_operations: every cluster operation with include_authorized_operations=True,
        else None)."""
        check_options(
            "describe_cluster", kwargs, ("include_authorized_operations", "request_timeout")
        )
        include = kwargs.get("include_authorized_operations", False)
        if not isinstance(include, bool):
            raise TypeError(
                "Expected include_authorized_operations to be bool type, "
                f"not {type(include).__name__}"
            )
        operations = _CLUSTER_OPERATIONS if include else None
        result = DescribeClusterResult(node(), [node()], cluster_id(self._broker.path), operations)
        return answered(lambda: result)

    # --- ACLs -------------------------------------------------------------------------------

    def create_acls(self, acls: list[AclBinding], **kwargs: Any) -> dict[AclBinding, Future[None]]:
        """SECURITY_DISABLED for each binding (no authorizer); ValueError for an empty list,
        one that is not of AclBinding or one naming a binding twice, as confluent's."""
        check_options("create_acls", kwargs, ("request_timeout",))
        bindings = _acl_list(acls, AclBinding, "ACL bindings")
        return {binding: answered(_no_authorizer) for binding in bindings}

    def describe_acls(self, acl_binding_filter: AclBindingFilter, **kwargs: Any) -> Future[Any]:
        """One future: SECURITY_DISABLED (no authorizer)."""
        check_options("describe_acls", kwargs, ("request_timeout",))
        if not isinstance(acl_binding_filter, AclBindingFilter):
            raise TypeError("Expected an AclBindingFilter object")
        return answered(_no_authorizer)

    def delete_acls(
        self, acl_binding_filters: list[AclBindingFilter], **kwargs: Any
    ) -> dict[AclBindingFilter, Future[Any]]:
        """SECURITY_DISABLED for each filter (no authorizer)."""
        check_options("delete_acls", kwargs, ("request_timeout",))
        filters = _acl_list(acl_binding_filters, AclBindingFilter, "ACL binding filters")
        return {acl_filter: answered(_no_authorizer) for acl_filter in filters}

    # --- SASL/SCRAM ---------------------------------------------------------------------------

    def describe_user_scram_credentials(
        self, users: list[str] | None = None, **kwargs: Any
    ) -> Future[dict[str, UserScramCredentialsDescription]] | dict[str, Future[Any]]:
        """None: one future, {} (no user has a credential). A list of users: a future per
        user, RESOURCE_NOT_FOUND (DUPLICATE_RESOURCE for a user named twice)."""
        check_options("describe_user_scram_credentials", kwargs, ("request_timeout",))
        if users is None:
            return answered(dict)
        _check_users(users)
        return {
            user: answered(_raise, KafkaError.DUPLICATE_RESOURCE, "Cannot describe SCRAM "
                           "credentials for the same user twice in a single request")
            if users.count(user) > 1
            else answered(_raise, KafkaError.RESOURCE_NOT_FOUND, "Attempt to describe a user "
                          "credential that does not exist")
            for user in users
        }  # fmt: skip

    def alter_user_scram_credentials(
        self, alterations: list[UserScramCredentialAlteration], **kwargs: Any
    ) -> dict[str, Future[None]]:
        """A future per user: RESOURCE_NOT_FOUND for deletions (nothing is stored),
        _UNSUPPORTED_FEATURE for an upsertion, DUPLICATE_RESOURCE for a (user, mechanism)
        altered twice; nothing changes."""
        check_options("alter_user_scram_credentials", kwargs, ("request_timeout",))
        _check_alterations(alterations)
        return {user: answered(_alter_scram, user, alterations) for user in _users(alterations)}

    # --- leaders, configs, groups ---------------------------------------------------------

    def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: list[TopicPartition] | None = None,
        **kwargs: Any,
    ) -> Future[dict[TopicPartition, KafkaError | None]]:
        """One future: {TopicPartition: KafkaError} with ELECTION_NOT_NEEDED (the one
        replica leads) or UNKNOWN_TOPIC_OR_PART per partition named; {} for None (all)."""
        check_options("elect_leaders", kwargs, ("request_timeout", "operation_timeout"))
        _check_election(election_type, partitions)
        broker = self._broker
        return answered(lambda: {tp: _election(broker, tp) for tp in partitions or []})

    def alter_configs(
        self, resources: list[ConfigResource], **kwargs: Any
    ) -> dict[ConfigResource, Future[None]]:
        """Deprecated (DeprecationWarning, as confluent's): replace a topic's whole config
        with resource.set_config_dict, every key not given back to its default, in one
        Broker.alter_topic_config (checked, persisted, live at once, or nothing changes).
        Errors as incremental_alter_configs'."""
        warnings.warn(
            "alter_configs has been deprecated. Use incremental_alter_configs instead.",
            category=DeprecationWarning,
            stacklevel=2,
        )
        check_options("alter_configs", kwargs, ("validate_only", "request_timeout", "broker"))
        wanted = _configs_list(resources)
        validate_only = kwargs.get("validate_only", False)
        if not isinstance(validate_only, bool):
            raise TypeError(
                f"Expected validate_only to be bool type, not {type(validate_only).__name__}"
            )
        broker = self._broker
        return {r: answered(_replace_config, broker, r, validate_only) for r in wanted}

    def list_groups(self, group: str | None = None, timeout: float = -1) -> list[GroupMetadata]:
        """Deprecated (DeprecationWarning, as confluent's): a GroupMetadata per known group,
        or for `group` alone."""
        warnings.warn(
            "list_groups() is deprecated, use list_consumer_groups() and "
            "describe_consumer_groups() instead.",
            category=DeprecationWarning,
            stacklevel=2,
        )
        if group is not None and not isinstance(group, str):
            raise TypeError(f"argument 1 must be str or None, not {type(group).__name__}")
        real("timeout", timeout)
        broker = self._broker
        names = broker.groups.group_ids() if group is None else [group]
        return [_group_metadata(broker, name) for name in names]

    # --- the handle -----------------------------------------------------------------------

    def poll(self, timeout: float = -1) -> int:
        """0: the answers are in the futures before each call returns, so there are no events
        to serve."""
        real("timeout", timeout)
        self._broker  # noqa: B018 (raises once the client is closed)
        return 0

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Accepted and ignored: a log directory has no SASL."""
        for position, value in ((1, username), (2, password)):
            if not isinstance(value, str):
                raise TypeError(f"argument {position} must be str, not {type(value).__name__}")


def _raise(code: int, reason: str) -> None:
    raise refused(code, reason)


def _no_authorizer() -> None:
    raise refused(KafkaError.SECURITY_DISABLED, _NO_AUTHORIZER)


def _acl_list(value: object, kind: type, what: str) -> list[Any]:
    """confluent's checks of create_acls / delete_acls: a non-empty list of `kind`, none
    twice."""
    if not isinstance(value, list):
        raise TypeError(f"'{type(value).__name__}' object is not iterable")
    if not value:
        raise ValueError(f"Expected non-empty list of {kind.__name__} objects")
    if len(set(value)) != len(value):
        raise ValueError(f"duplicate {what} not allowed")
    for item in value:
        if not isinstance(item, kind):
            raise ValueError(f"Expected list of {kind!r}")
    return value


def _configs_list(value: object) -> list[ConfigResource]:
    if not isinstance(value, list):
        raise TypeError(f"'{type(value).__name__}' object is not iterable")
    if not value:
        raise ValueError("Expected non-empty list of ConfigResource objects")
    for item in value:
        if not isinstance(item, ConfigResource):
            raise ValueError(f"Expected list of {ConfigResource!r}")
    return value


def _check_users(users: object) -> None:
    if not isinstance(users, list):
        raise TypeError("Expected input to be list of String")
    for user in users:
        if user is None:
            raise TypeError("'user' cannot be None")
        if not isinstance(user, str):
            raise TypeError("Each value should be a string")
        if not user:
            raise ValueError("'user' cannot be empty")


def _check_alterations(alterations: object) -> None:
    """confluent's checks of alter_user_scram_credentials' list, at the call."""
    non_empty_list(alterations, UserScramCredentialAlteration, "UserScramCredentialAlteration")
    assert isinstance(alterations, list)
    for alteration in alterations:
        if not isinstance(alteration.user, str):
            raise TypeError("'user' must be a string")
        if not alteration.user:
            raise ValueError("'user' cannot be empty")
        if isinstance(alteration, UserScramCredentialUpsertion):
            _check_upsertion(alteration)
        elif isinstance(alteration, UserScramCredentialDeletion):
            if not isinstance(alteration.mechanism, ScramMechanism):
                raise TypeError("Expected the mechanism to be ScramMechanism Type")
        else:
            raise TypeError(
                "Expected each element of list 'alterations' to be either a "
                "UserScramCredentialUpsertion or a UserScramCredentialDeletion"
            )


def _check_upsertion(upsertion: UserScramCredentialUpsertion) -> None:
    if not isinstance(upsertion.password, bytes):
        raise TypeError("'password' must be bytes")
    if not upsertion.password:
        raise ValueError("'password' cannot be empty")
    if upsertion.salt is not None and not isinstance(upsertion.salt, bytes):
        raise TypeError("'salt' must be bytes")
    if upsertion.salt is not None and not upsertion.salt:
        raise ValueError("'salt' can be None but cannot be empty")
    info = upsertion.scram_credential_info
    if not isinstance(info, ScramCredentialInfo):
        raise TypeError("Expected credential_info to be ScramCredentialInfo Type")
    if info.iterations < 1:
        raise ValueError("Iterations should be positive")
    if not isinstance(info.mechanism, ScramMechanism):
        raise TypeError("Expected the mechanism to be ScramMechanism Type")


def _mechanism(alteration: UserScramCredentialAlteration) -> ScramMechanism:
    if isinstance(alteration, UserScramCredentialUpsertion):
        return alteration.scram_credential_info.mechanism
    assert isinstance(alteration, UserScramCredentialDeletion)
    return alteration.mechanism


def _users(alterations: list[UserScramCredentialAlteration]) -> list[str]:
    return list(dict.fromkeys(alteration.user for alteration in alterations))


def _alter_scram(user: str, alterations: list[UserScramCredentialAlteration]) -> None:
    own = [alteration for alteration in alterations if alteration.user == user]
    mechanisms = [_mechanism(alteration) for alteration in own]
    if len(set(mechanisms)) != len(mechanisms):
        _raise(
            KafkaError.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        )
    if any(isinstance(alteration, UserScramCredentialUpsertion) for alteration in own):
        _raise(
            KafkaError._UNSUPPORTED_FEATURE,
            "eoslog has no SASL: a log directory stores no SCRAM credentials",
        )
    _raise(KafkaError.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")


def _check_election(election_type: object, partitions: object) -> None:
    if not isinstance(election_type, ElectionType):
        raise TypeError("Expected 'election_type' to be of type 'ElectionType'")
    if partitions is None:
        return
    if not isinstance(partitions, list):
        raise TypeError(f"Expected 'partitions' to be a list, got '{type(partitions).__name__}'")
    for tp in partitions:
        if not isinstance(tp, TopicPartition):
            raise TypeError(
                "Element of the 'partitions' list must be of type 'TopicPartition' got "
                f"'{type(tp).__name__}' "
            )
        if tp.partition < 0:
            raise ValueError(
                "Elements of the 'partitions' list must not have negative value for "
                "'partition' field"
            )


def _election(broker: AdminBroker, tp: TopicPartition) -> KafkaError:
    """The KafkaError elect_leaders reports for one partition (a KafkaError, not an
    exception, as confluent's result holds it)."""
    topic = broker.list_topics().get(tp.topic)
    if topic is None or tp.partition >= topic.num_partitions:
        return KafkaError(
            KafkaError.UNKNOWN_TOPIC_OR_PART, "This server does not host this topic-partition."
        )
    return KafkaError(
        KafkaError.ELECTION_NOT_NEEDED,
        f"Leader election not needed for topic partition: its one replica, node {NODE_ID}, leads",
    )


def _replace_config(broker: AdminBroker, resource: ConfigResource, validate_only: bool) -> None:
    """alter_configs for one resource: the keys given set, every other key set on the topic
    back to its default, in one alteration."""
    if resource.restype is not ResourceType.TOPIC:
        _raise(
            KafkaError.INVALID_REQUEST,
            "eoslog alters TOPIC configs only: the broker's settings are fixed when the "
            f"directory is opened ({resource!r})",
        )
    given: Mapping[str, object] = resource.set_config_dict
    changes: dict[str, object | None] = {key: str(value) for key, value in given.items()}
    for key in broker.topic_metadata(resource.name).config:
        changes.setdefault(key, None)
    broker.alter_topic_config(resource.name, changes, validate_only=validate_only)


def _group_metadata(broker: AdminBroker, group_id: str) -> GroupMetadata:
    metadata = GroupMetadata()
    metadata.broker = BrokerMetadata(NODE_ID, broker.path, NO_PORT)
    metadata.id = group_id
    if group_id not in broker.groups.group_ids():
        metadata.state, metadata.protocol_type, metadata.protocol = "Dead", "", ""
        return metadata
    state, _, protocol, members = broker.groups.describe_group(group_id)
    metadata.state = state.value
    metadata.protocol_type = "consumer" if protocol else ""
    metadata.protocol = protocol or ""
    for member_id in members:
        member = GroupMember()
        member.id, member.client_id, member.client_host = member_id, "", ""
        member.metadata, member.assignment = b"", b""
        metadata.members.append(member)
    return metadata
