"""The AdminClient's cluster-wide calls (eoslog.client.admin_cluster, docs/api.md "Drop-in for
confluent-kafka"): answered as a one-node Kafka broker without authorizer or SASL answers,
with confluent's argument checks at the call (confluent-kafka on librdkafka's mock cluster is
the oracle for those; the mock answers none of these calls)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import eoslog
from eoslog.client.metadata import cluster_id
from eoslog.confluent import AdminClient, ElectionType, TopicPartition
from eoslog.confluent.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ConfigResource,
    NewTopic,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from eoslog.errors import KafkaError, KafkaException

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")
MOCK = {"bootstrap.servers": "", "test.mock.num.brokers": 1}
BINDING = ("TOPIC", "t", "LITERAL", "User:a", "*", "READ", "ALLOW")
ANY_FILTER = ("ANY", None, "ANY", None, None, "ANY", "ANY")


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[AdminClient]:
    client = AdminClient({"bootstrap.servers": f"eoslog://{tmp_path / 'd'}"})
    client.create_topics([NewTopic("t", 2)])["t"].result()
    yield client
    client.close()


@pytest.fixture(scope="module")
def oracle() -> Any:
    return confluent_admin.AdminClient(MOCK)


def code_of(future: Any) -> int:
    with pytest.raises(KafkaException) as raised:
        future.result()
    return raised.value.args[0].code()  # type: ignore[no-any-return]


def test_describe_cluster_reports_one_node_that_is_the_controller(admin: AdminClient) -> None:
    described = admin.describe_cluster().result()
    assert [node.id for node in described.nodes] == [0]
    assert described.controller.id == 0
    assert described.cluster_id == cluster_id(admin._broker.path)
    assert described.authorized_operations is None
    assert str(described.controller) == str(confluent_kafka.Node(0, "", -1))


def test_describe_cluster_grants_every_cluster_operation_without_an_authorizer(
    admin: AdminClient,
) -> None:
    described = admin.describe_cluster(include_authorized_operations=True).result()
    assert set(described.authorized_operations) == {
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    }


def test_acl_calls_answer_security_disabled(admin: AdminClient) -> None:
    binding, acl_filter = AclBinding(*BINDING), AclBindingFilter(*ANY_FILTER)
    assert code_of(admin.create_acls([binding])[binding]) == KafkaError.SECURITY_DISABLED
    assert code_of(admin.describe_acls(acl_filter)) == KafkaError.SECURITY_DISABLED
    assert code_of(admin.delete_acls([acl_filter])[acl_filter]) == KafkaError.SECURITY_DISABLED


def raised(call: Callable[[], object]) -> tuple[type, str] | None:
    try:
        call()
    except (TypeError, ValueError) as error:
        return type(error), str(error).split(" <class")[0]
    return None


BAD_CALLS: dict[str, Callable[[Any, Any], object]] = {
    "create_acls empty": lambda a, m: a.create_acls([]),
    "create_acls not a binding": lambda a, m: a.create_acls(["x"]),
    "create_acls twice": lambda a, m: a.create_acls([m.AclBinding(*BINDING)] * 2),
    "create_acls not a list": lambda a, m: a.create_acls(m.AclBinding(*BINDING)),
    "describe_acls a binding": lambda a, m: a.describe_acls(m.AclBinding(*BINDING)),
    "delete_acls a binding": lambda a, m: a.delete_acls([m.AclBinding(*BINDING)]),
    "delete_acls empty": lambda a, m: a.delete_acls([]),
    "describe_cluster bad flag": lambda a, m: a.describe_cluster(include_authorized_operations=1),
    "elect_leaders bad type": lambda a, m: a.elect_leaders("PREFERRED"),
    "elect_leaders negative": lambda a, m: a.elect_leaders(
        m.ElectionType.PREFERRED, [m.TopicPartition("t", -1)]
    ),
    "alter_configs empty": lambda a, m: a.alter_configs([]),
    "alter_configs not a resource": lambda a, m: a.alter_configs(["x"]),
    "scram describe not a list": lambda a, m: a.describe_user_scram_credentials("u"),
    "scram describe empty user": lambda a, m: a.describe_user_scram_credentials([""]),
    "scram alter empty password": lambda a, m: a.alter_user_scram_credentials(
        [m.UserScramCredentialUpsertion("u", m.ScramCredentialInfo(m.ScramMechanism(1), 1), b"")]
    ),
    "scram alter no iterations": lambda a, m: a.alter_user_scram_credentials(
        [m.UserScramCredentialUpsertion("u", m.ScramCredentialInfo(m.ScramMechanism(1), 0), b"p")]
    ),
    "acl filter-only member": lambda a, m: m.AclBinding(*BINDING[:5], "ANY", "ALLOW"),
    "acl unknown in filter": lambda a, m: m.AclBindingFilter(*ANY_FILTER[:6], "UNKNOWN"),
    "acl name not a string": lambda a, m: m.AclBinding("TOPIC", 1, *BINDING[2:]),
    "set_sasl_credentials int": lambda a, m: a.set_sasl_credentials(1, "p"),
}


class Both:
    """confluent_kafka and confluent_kafka.admin as one namespace, or eoslog's."""

    def __init__(self, *modules: Any) -> None:
        self.modules = modules

    def __getattr__(self, name: str) -> Any:
        for module in self.modules:
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(name)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_bad_arguments_raise_confluent_s_error_at_the_call(
    admin: AdminClient, oracle: Any, name: str
) -> None:
    ours = raised(lambda: BAD_CALLS[name](admin, Both(eoslog.confluent, eoslog.confluent.admin)))
    theirs = raised(lambda: BAD_CALLS[name](oracle, Both(confluent_kafka, confluent_admin)))
    assert theirs is not None
    assert ours is not None and ours[0] is theirs[0], (ours, theirs)


def test_scram_describe_finds_no_credentials(admin: AdminClient) -> None:
    assert admin.describe_user_scram_credentials().result() == {}
    answers = admin.describe_user_scram_credentials(["u"])
    assert code_of(answers["u"]) == KafkaError.RESOURCE_NOT_FOUND


def test_scram_alterations_change_nothing(admin: AdminClient) -> None:
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    answers = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion("a", info, b"pw"),
            UserScramCredentialDeletion("b", ScramMechanism.SCRAM_SHA_512),
            UserScramCredentialDeletion("c", ScramMechanism.SCRAM_SHA_512),
            UserScramCredentialDeletion("c", ScramMechanism.SCRAM_SHA_512),
        ]
    )
    assert code_of(answers["a"]) == KafkaError._UNSUPPORTED_FEATURE
    assert code_of(answers["b"]) == KafkaError.RESOURCE_NOT_FOUND
    assert code_of(answers["c"]) == KafkaError.DUPLICATE_RESOURCE
    assert admin.describe_user_scram_credentials().result() == {}


def test_elect_leaders_needs_no_election_and_reports_missing_partitions(
    admin: AdminClient,
) -> None:
    named = [TopicPartition("t", 1), TopicPartition("t", 2), TopicPartition("nope", 0)]
    answer = admin.elect_leaders(ElectionType.PREFERRED, named).result()
    assert {tp.partition if tp.topic == "t" else -1: e.code() for tp, e in answer.items()} == {
        1: KafkaError.ELECTION_NOT_NEEDED,
        2: KafkaError.UNKNOWN_TOPIC_OR_PART,
        -1: KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
    assert admin.elect_leaders(ElectionType.UNCLEAN).result() == {}


def topic_config(admin: AdminClient) -> dict[str, str]:
    return dict(admin._broker.topic_metadata("t").config)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_alter_configs_replaces_the_whole_config_so_keys_not_given_return_to_default(
    admin: AdminClient,
) -> None:
    resource = ConfigResource(ResourceType.TOPIC, "t")
    resource.add_incremental_config(
        eoslog.confluent.admin.ConfigEntry(
            "segment.ms",
            "60000",
            incremental_operation=eoslog.confluent.admin.AlterConfigOpType.SET,
        )
    )
    admin.incremental_alter_configs([resource])[resource].result()
    replaced = ConfigResource("topic", "t", set_config={"retention.ms": "1000"})
    with pytest.warns(DeprecationWarning, match="incremental_alter_configs"):
        answers = admin.alter_configs([replaced])
    assert answers[replaced].result() is None
    assert topic_config(admin) == {"retention.ms": 1000}
    bad = ConfigResource("topic", "t", set_config={"retention.ms": "soon"})
    assert code_of(admin.alter_configs([bad])[bad]) == KafkaError.INVALID_CONFIG
    assert topic_config(admin) == {"retention.ms": 1000}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_list_groups_reports_each_known_group(admin: AdminClient, tmp_path: Path) -> None:
    consumer = eoslog.confluent.Consumer(
        {"bootstrap.servers": f"eoslog://{tmp_path / 'd'}", "group.id": "g"}
    )
    consumer.commit(offsets=[TopicPartition("t", 0, 1)], asynchronous=False)
    consumer.close()
    (group,) = admin.list_groups()
    assert (group.id, group.state, group.error, group.broker.id) == ("g", "Empty", None, 0)
    (unknown,) = admin.list_groups("other")
    assert unknown.state == "Dead"


def test_poll_serves_no_events_and_sasl_credentials_are_accepted(admin: AdminClient) -> None:
    assert admin.poll(0) == 0
    assert admin.poll(timeout=1.0) == 0
    assert admin.set_sasl_credentials("user", "secret") is None


def test_context_manager_returns_the_client_and_closes_it_at_exit(tmp_path: Path) -> None:
    config = {"bootstrap.servers": f"eoslog://{tmp_path / 'd'}"}
    with AdminClient(config) as admin:
        assert isinstance(admin, AdminClient)
        admin.create_topics([NewTopic("t", 1)])["t"].result()
    for call in (lambda: admin.poll(0), admin.describe_cluster, admin.list_topics):
        with pytest.raises(RuntimeError, match="closed"):
            call()
    with eoslog.open(str(tmp_path / "d")) as broker:  # the directory was released
        assert "t" in broker.list_topics()


def test_an_exception_in_the_with_block_propagates(tmp_path: Path) -> None:
    with (
        pytest.raises(KeyError),
        AdminClient({"bootstrap.servers": f"eoslog://{tmp_path / 'd'}"}),
    ):
        raise KeyError("inside")


def test_broker_admin_is_a_context_manager_that_leaves_the_broker_open(tmp_path: Path) -> None:
    with eoslog.open(str(tmp_path / "d")) as broker:
        with broker.admin() as admin:
            admin.create_topics([NewTopic("t", 1)])["t"].result()
        with pytest.raises(RuntimeError, match="closed"):
            admin.list_topics()
        assert "t" in broker.list_topics()
