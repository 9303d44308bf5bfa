"""The security types of the AdminClient (docs/api.md "AdminClient"), with confluent_kafka.admin's
names, members, values (Kafka's protocol codes), constructor shapes and argument checks: ACL
bindings and filters (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
ResourcePatternType) and SASL/SCRAM credentials (ScramMechanism, ScramCredentialInfo,
UserScramCredentialsDescription and the alterations).

A log directory has no authorizer and no SASL, so the AdminClient answers the calls that take
these as a Kafka broker without them does (eoslog.client.admin_cluster); the types exist so
that code written against confluent's AdminClient builds its requests unchanged, and a bad
request gets confluent's TypeError or ValueError at the call. Plain value objects: any thread
may read them.
"""

from __future__ import annotations

import enum
import functools
from typing import Any, ClassVar, TypeVar

from eoslog.client.admin_types import ResourceType

_E = TypeVar("_E", bound=enum.Enum)


def as_enum(value: object, kind: type[_E]) -> _E:
    """`value` as a member of `kind`: a member, its name (any case) or its value, as confluent
    converts them; ValueError for an unknown name or value, TypeError for another type."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        try:
            return kind[value.upper()]
        except KeyError:
            raise ValueError(f'Unknown value "{value}": should be a {kind.__name__}') from None
    if isinstance(value, int) and not isinstance(value, bool):
        return kind(value)
    raise TypeError(f'Unknown value "{value}": should be a {kind.__name__}')


class AclOperation(enum.Enum):
    """confluent_kafka.admin.AclOperation (Kafka's AclOperation codes)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermissionType(enum.Enum):
    """confluent_kafka.admin.AclPermissionType (Kafka's AclPermissionType codes)."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class ResourcePatternType(enum.Enum):
    """confluent_kafka.admin.ResourcePatternType (Kafka's PatternType codes)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


@functools.total_ordering
class AclBinding:
    """One ACL (confluent_kafka.admin.AclBinding): a principal allowed or denied an operation
    on resources from a host. Each enum argument is a member, its name or its value. Raises
    ValueError for a None argument or a filter-only member (ANY, MATCH), TypeError for a
    name, principal or host that is not a string, as confluent's."""

    _optional: ClassVar[tuple[str, ...]] = ()
    _forbidden: ClassVar[dict[str, tuple[enum.Enum, ...]]] = {
        "restype": (ResourceType.ANY,),
        "resource_pattern_type": (ResourcePatternType.ANY, ResourcePatternType.MATCH),
        "operation": (AclOperation.ANY,),
        "permission_type": (AclPermissionType.ANY,),
    }

    def __init__(
        self,
        restype: ResourceType | str | int,
        name: str | None,
        resource_pattern_type: ResourcePatternType | str | int,
        principal: str | None,
        host: str | None,
        operation: AclOperation | str | int,
        permission_type: AclPermissionType | str | int,
    ) -> None:
        given = {
            "restype": restype,
            "name": name,
            "resource_pattern_type": resource_pattern_type,
            "principal": principal,
            "host": host,
            "operation": operation,
            "permission_type": permission_type,
        }
        for key, value in given.items():
            if value is None and key not in self._optional:
                raise ValueError(f"Expected {key} to be not None")
        for key in ("name", "principal", "host"):
            if given[key] is not None and not isinstance(given[key], str):
                raise TypeError(f"Expected {key} to be a string")
        self.restype = as_enum(restype, ResourceType)
        self.name = name
        self.resource_pattern_type = as_enum(resource_pattern_type, ResourcePatternType)
        self.principal = principal
        self.host = host
        self.operation = as_enum(operation, AclOperation)
        self.permission_type = as_enum(permission_type, AclPermissionType)
        for key, forbidden in self._forbidden.items():
            member = getattr(self, key)
            if member in forbidden:
                raise ValueError(f"Cannot use enum {key}, value {member.name} in this class")
        self.restype_int = self.restype.value
        self.resource_pattern_type_int = self.resource_pattern_type.value
        self.operation_int = self.operation.value
        self.permission_type_int = self.permission_type.value

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.restype,
            self.name,
            self.resource_pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission_type,
        )

    def _order(self) -> tuple[Any, ...]:
        return tuple(
            field.value if isinstance(field, enum.Enum) else field for field in self._fields()
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({','.join(str(field) for field in self._fields())})"

    def __hash__(self) -> int:
        return hash(self._fields())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AclBinding):
            return NotImplemented
        return self._fields() == other._fields()

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, AclBinding):
            return NotImplemented
        return self._order() < other._order()


class AclBindingFilter(AclBinding):
    """Which ACLs describe_acls / delete_acls match (confluent_kafka.admin.AclBindingFilter):
    None for name, principal or host matches any; ANY matches any member, MATCH any pattern
    that covers the name. UNKNOWN members are refused (ValueError), as confluent's."""

    _optional: ClassVar[tuple[str, ...]] = ("name", "principal", "host")
    _forbidden: ClassVar[dict[str, tuple[enum.Enum, ...]]] = {
        "restype": (ResourceType.UNKNOWN,),
        "resource_pattern_type": (ResourcePatternType.UNKNOWN,),
        "operation": (AclOperation.UNKNOWN,),
        "permission_type": (AclPermissionType.UNKNOWN,),
    }


class ScramMechanism(enum.Enum):
    """confluent_kafka.admin.ScramMechanism (Kafka's ScramMechanism codes)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2


class ScramCredentialInfo:
    """A SASL/SCRAM credential's mechanism and iteration count
    (confluent_kafka.admin.ScramCredentialInfo)."""

    def __init__(self, mechanism: ScramMechanism, iterations: int) -> None:
        self.mechanism = mechanism
        self.iterations = iterations


class UserScramCredentialsDescription:
    """A user's SASL/SCRAM credentials (confluent_kafka.admin.UserScramCredentialsDescription)."""

    def __init__(self, user: str, scram_credential_infos: list[ScramCredentialInfo]) -> None:
        self.user = user
        self.scram_credential_infos = scram_credential_infos


class UserScramCredentialAlteration:
    """A change to a user's SASL/SCRAM credentials
    (confluent_kafka.admin.UserScramCredentialAlteration): an upsertion or a deletion."""

    def __init__(self, user: str) -> None:
        self.user = user


class UserScramCredentialUpsertion(UserScramCredentialAlteration):
    """Set a user's credential for one mechanism (salt None: the broker would pick one)."""

    def __init__(
        self,
        user: str,
        scram_credential_info: ScramCredentialInfo,
        password: bytes,
        salt: bytes | None = None,
    ) -> None:
        super().__init__(user)
        self.scram_credential_info = scram_credential_info
        self.password = password
        self.salt = salt


class UserScramCredentialDeletion(UserScramCredentialAlteration):
    """Delete a user's credential for one mechanism."""

    def __init__(self, user: str, mechanism: ScramMechanism) -> None:
        super().__init__(user)
        self.mechanism = mechanism
