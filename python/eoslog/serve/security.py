"""The security of an `eoslog serve` listener (docs/api.md "Wire protocol", "Security"):
Kafka's four listener protocols, TLS from PEM files, and SASL/PLAIN against a table of users.

The protocol prefixes the address as in Kafka's `listeners` ("SASL_SSL://0.0.0.0:9093"; no
prefix: PLAINTEXT). The other settings are a mapping given to Broker.serve, with librdkafka's
key names for the PEM files (Kafka's broker keys name JKS keystores, which Python's ssl module
does not read):

- `ssl.certificate.location`, `ssl.key.location` (PEM), `ssl.key.password`: the server's
  certificate chain and key, required by SSL and SASL_SSL;
- `sasl.enabled.mechanisms`: Kafka's key; "PLAIN", the only mechanism served;
- `sasl.plain.users`: a mapping of user name to password, or `sasl.plain.users.file`: a file
  of `user:password` lines (blank lines and lines starting with # are skipped); one of them is
  required by SASL_PLAINTEXT and SASL_SSL.

Light to import: the command line checks its options with it before opening anything.
"""

from __future__ import annotations

import hmac
import ipaddress
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from eoslog.errors import InvalidConfigError

PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS: Final = ("PLAIN",)
KEYS: Final = frozenset(
    {
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "sasl.enabled.mechanisms",
        "sasl.plain.users",
        "sasl.plain.users.file",
    }
)
_NO_PASSWORD: Final = b"\0" * 32  # compared against when the user is unknown


@dataclass(frozen=True, slots=True)
class Security:
    """A listener's protocol, its TLS context (SSL, SASL_SSL) and its users (SASL_*)."""

    protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def plain_user(self, token: bytes) -> str | None:
        """The user a SASL/PLAIN token ("authzid NUL user NUL password", RFC 4616) names if
        its password is right and it asks for no other identity; None otherwise. The
        password comparison takes the same time wherever the first difference is."""
        parts = token.split(b"\0")
        if len(parts) != 3:
            return None
        authzid, user_bytes, password = parts
        try:
            user = user_bytes.decode()
        except UnicodeDecodeError:
            return None
        expected = self.users.get(user)
        matches = hmac.compare_digest(password, _NO_PASSWORD if expected is None else expected)
        if expected is None or not matches or authzid not in (b"", user_bytes):
            return None
        return user


def split_listener(listener: str) -> tuple[str, str]:
    """(protocol, "host:port") of "PROTOCOL://host:port" or "host:port" (PLAINTEXT);
    ValueError for a protocol not one of PROTOCOLS."""
    protocol, separator, address = listener.partition("://")
    if not separator:
        return "PLAINTEXT", listener
    if protocol.upper() not in PROTOCOLS:
        raise ValueError(f"listener protocol must be one of {', '.join(PROTOCOLS)}: {listener!r}")
    return protocol.upper(), address


def security(protocol: str, config: Mapping[str, object] | None) -> Security:
    """The Security of a listener of `protocol` from Broker.serve's mapping;
    InvalidConfigError for an unknown key, a missing file or a setting the protocol lacks."""
    config = dict(config or {})
    unknown = sorted(set(config) - KEYS)
    if unknown:
        raise InvalidConfigError(f"unknown serve configuration {unknown[0]!r}")
    tls = _tls_context(config) if protocol.endswith("SSL") else None
    if protocol.startswith("SASL_"):
        mechanisms = str(config.get("sasl.enabled.mechanisms", "PLAIN"))
        if [m.strip().upper() for m in mechanisms.split(",")] != ["PLAIN"]:
            raise InvalidConfigError(f"sasl.enabled.mechanisms must be PLAIN, not {mechanisms!r}")
        return Security(protocol, tls, _users(config))
    extra = sorted(key for key in config if key.startswith("sasl."))
    extra += [] if tls else sorted(key for key in config if key.startswith("ssl."))
    if extra:
        raise InvalidConfigError(f"{extra[0]} is set but the listener is {protocol}")
    return Security(protocol, tls)


def _tls_context(config: Mapping[str, object]) -> ssl.SSLContext:
    certificate = config.get("ssl.certificate.location")
    key = config.get("ssl.key.location")
    if not isinstance(certificate, str) or not isinstance(key, str):
        raise InvalidConfigError("SSL needs ssl.certificate.location and ssl.key.location")
    password = config.get("ssl.key.password")
    if password is not None and not isinstance(password, str):
        raise InvalidConfigError("ssl.key.password must be a string")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(certificate, key, password)
    except (OSError, ssl.SSLError) as error:
        raise InvalidConfigError(f"cannot load {certificate} and {key}: {error}") from error
    return context


def _users(config: Mapping[str, object]) -> dict[str, bytes]:
    users = config.get("sasl.plain.users")
    path = config.get("sasl.plain.users.file")
    if (users is None) == (path is None):
        raise InvalidConfigError("SASL needs one of sasl.plain.users and sasl.plain.users.file")
    if path is not None:
        users = read_users(str(path))
    if not isinstance(users, Mapping) or not users:
        raise InvalidConfigError("sasl.plain.users must map user names to passwords")
    table = {}
    for user, password in users.items():
        if not isinstance(user, str) or not isinstance(password, str) or not user:
            raise InvalidConfigError("sasl.plain.users must map user names to passwords")
        table[user] = password.encode()
    return table


def read_users(path: str) -> dict[str, str]:
    """The `user:password` lines of `path`; InvalidConfigError if unreadable or malformed."""
    try:
        with open(path, encoding="utf-8") as lines:
            text = lines.read()
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidConfigError(f"cannot read sasl.plain.users.file {path}: {error}") from error
    users = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, colon, password = line.partition(":")
        if not colon or not user:
            raise InvalidConfigError(f"{path}:{number}: expected user:password")
        users[user] = password
    return users


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# The APIs a SASL listener serves before authentication (Kafka's flow: ApiVersions to learn
# the versions, SaslHandshake to pick the mechanism, SaslAuthenticate to send the token).
_BEFORE_AUTHENTICATION: Final = frozenset({18, 17, 36})


class Session:
    """One connection's SASL state (connection's thread only). `closing`: the answer being
    written is the connection's last (a failed or out-of-order step)."""

    def __init__(self, security: Security) -> None:
        self.security = security
        self.handshaken = False
        self.user: str | None = None
        self.closing = False

    def allows(self, api_key: int) -> bool:
        """Whether a request of `api_key` may be served now."""
        if not self.security.sasl or self.user is not None:
            return True
        return api_key in _BEFORE_AUTHENTICATION
