"""Every configuration property librdkafka knows, as data (docs/api.md "librdkafka keys").

Taken from librdkafka's CONFIGURATION.md (commit 4c3b017c, after v2.15.0) with the hidden
properties its src/rdkafka_conf.c accepts without listing them. Names, roles, kinds, ranges and
defaults are librdkafka's; the descriptions are left out (CONFIGURATION.md has them).
tests/client/test_config_keys.py holds this table against the installed confluent-kafka, whose
librdkafka refuses a name it does not know.

A Property is one row: `role` is "P" (producer), "C" (consumer) or "*" (both); `kind` is how
librdkafka reads the value (eoslog.client.config_reader reads it the same way); `limits` is the
inclusive (min, max) of an INT or FLOAT, the words an ENUM or FLAGS accepts (in any case), or
the exact values a STR accepts where librdkafka checks them; `default` is librdkafka's default
as its table prints it ("" for none).

librdkafka looks a name up among the global properties first, then among the topic properties,
which a config may also name with a "topic." prefix; an alias stands for its target in the same
table (rd_kafka_conf_set in src/rdkafka_conf.c). `find` does the same.
"""

from __future__ import annotations

from typing import Final, NamedTuple

# How librdkafka reads a value: the _RK_C_* types of src/rdkafka_conf.c.
BOOL: Final = "bool"  # true, t or 1; false, f or 0; in any case
INT: Final = "int"  # C's strtol in base 0 (0x hex, 0 octal), then the range
FLOAT: Final = "float"  # C's strtod, then the range
ENUM: Final = "enum"  # one of the words, in any case
FLAGS: Final = "flags"  # comma-separated words, in any case, each may start with + or -
STR: Final = "str"  # any text; None or "" restores the default
WORD: Final = "word"  # text without a comma or a space (sasl.mechanisms)
REQUIRED: Final = "required"  # text that may not be missing (broker.version.fallback)
PATTERNS: Final = "patterns"  # comma-separated regular expressions
C_API: Final = "c_api"  # set only through a dedicated C function, never by name
INTERNAL: Final = "internal"  # not settable at all


class Property(NamedTuple):
    name: str
    role: str
    kind: str
    limits: tuple[int | float | str, ...] = ()
    default: str = ""


_p = Property


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_DEBUG_CONTEXTS: Final = _words(
    "generic broker topic metadata feature queue msg protocol cgrp security fetch "
    "interceptor plugin consumer admin eos mock assignor conf telemetry all"
)
_BUILTIN_FEATURES: Final = _words(
    "gzip snappy ssl sasl regex lz4 sasl_gssapi sasl_plain sasl_scram plugins zstd "
    "sasl_oauthbearer http oidc"
)
# The partitioner values src/rdkafka_conf.c accepts, exactly (rd_kafka_conf_validate_partitioner).
_PARTITIONERS: Final = _words(
    "random consistent consistent_random murmur2 murmur2_random fnv1a fnv1a_random"
)
_KINIT_CMD: Final = (
    'kinit -R -t "%{sasl.kerberos.keytab}" -k %{sasl.kerberos.principal} || '
    'kinit -t "%{sasl.kerberos.keytab}" -k %{sasl.kerberos.principal}'
)

GLOBAL_PROPERTIES: Final = {
    prop.name: prop
    for prop in (
        _p("builtin.features", "*", FLAGS, _BUILTIN_FEATURES, ", ".join(_BUILTIN_FEATURES)),
        _p("client.id", "*", STR, (), "rdkafka"),
        _p("metadata.broker.list", "*", STR),
        _p("message.max.bytes", "*", INT, (1000, 1_000_000_000), "1000000"),
        _p("message.copy.max.bytes", "*", INT, (0, 1_000_000_000), "65535"),
        _p("receive.message.max.bytes", "*", INT, (1000, 2_147_483_647), "100000000"),
        _p("max.in.flight.requests.per.connection", "*", INT, (1, 1_000_000), "1000000"),
        _p("metadata.recovery.strategy", "*", ENUM, ("none", "rebootstrap"), "rebootstrap"),
        _p("metadata.recovery.rebootstrap.trigger.ms", "*", INT, (0, 2_147_483_647), "300000"),
        _p("topic.metadata.refresh.interval.ms", "*", INT, (-1, 3_600_000), "300000"),
        _p("metadata.max.age.ms", "*", INT, (1, 86_400_000), "900000"),
        _p("topic.metadata.refresh.fast.interval.ms", "*", INT, (1, 60_000), "100"),
        _p("topic.metadata.refresh.fast.cnt", "*", INT, (0, 1000), "10"),
        _p("topic.metadata.refresh.sparse", "*", BOOL, (), "true"),
        _p("topic.metadata.propagation.max.ms", "*", INT, (0, 3_600_000), "30000"),
        _p("topic.blacklist", "*", PATTERNS),
        _p("debug", "*", FLAGS, _DEBUG_CONTEXTS),
        _p("socket.timeout.ms", "*", INT, (10, 300_000), "60000"),
        _p("socket.blocking.max.ms", "*", INT, (1, 60_000), "1000"),
        _p("socket.send.buffer.bytes", "*", INT, (0, 100_000_000), "0"),
        _p("socket.receive.buffer.bytes", "*", INT, (0, 100_000_000), "0"),
        _p("socket.keepalive.enable", "*", BOOL, (), "false"),
        _p("socket.nagle.disable", "*", BOOL, (), "true"),
        _p("socket.max.fails", "*", INT, (0, 1_000_000), "1"),
        _p("broker.address.ttl", "*", INT, (0, 86_400_000), "1000"),
        _p("broker.address.family", "*", ENUM, ("any", "v4", "v6"), "any"),
        _p("socket.connection.setup.timeout.ms", "*", INT, (1000, 2_147_483_647), "30000"),
        _p("connections.max.idle.ms", "*", INT, (0, 2_147_483_647), "0"),
        _p("reconnect.backoff.jitter.ms", "*", INT, (0, 3_600_000), "0"),
        _p("reconnect.backoff.ms", "*", INT, (0, 3_600_000), "100"),
        _p("reconnect.backoff.max.ms", "*", INT, (0, 3_600_000), "10000"),
        _p("statistics.interval.ms", "*", INT, (0, 86_400_000), "0"),
        _p("enabled_events", "*", INT, (0, 2_147_483_647), "0"),
        _p("error_cb", "*", C_API),
        _p("throttle_cb", "*", C_API),
        _p("stats_cb", "*", C_API),
        _p("log_cb", "*", C_API),
        _p("log_level", "*", INT, (0, 7), "6"),
        _p("log.queue", "*", BOOL, (), "false"),
        _p("log.thread.name", "*", BOOL, (), "true"),
        _p("enable.random.seed", "*", BOOL, (), "true"),
        _p("log.connection.close", "*", BOOL, (), "true"),
        _p("background_event_cb", "*", C_API),
        _p("socket_cb", "*", C_API),
        _p("connect_cb", "*", C_API),
        _p("closesocket_cb", "*", C_API),
        _p("open_cb", "*", C_API),
        _p("resolve_cb", "*", C_API),
        _p("opaque", "*", C_API),
        _p("default_topic_conf", "*", C_API),
        _p("internal.termination.signal", "*", INT, (0, 128), "0"),
        _p("api.version.request", "*", BOOL, (), "true"),
        _p("api.version.request.timeout.ms", "*", INT, (1, 300_000), "10000"),
        _p("api.version.fallback.ms", "*", INT, (0, 604_800_000), "0"),
        _p("broker.version.fallback", "*", REQUIRED, (), "0.10.0"),
        _p("allow.auto.create.topics", "*", BOOL, (), "false"),
        _p(
            "security.protocol",
            "*",
            ENUM,
            ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl"),
            "plaintext",
        ),
        _p("ssl.cipher.suites", "*", STR),
        _p("ssl.curves.list", "*", STR),
        _p("ssl.sigalgs.list", "*", STR),
        _p("ssl.key.location", "*", STR),
        _p("ssl.key.password", "*", STR),
        _p("ssl.key.pem", "*", STR),
        _p("ssl_key", "*", INTERNAL),
        _p("ssl.certificate.location", "*", STR),
        _p("ssl.certificate.pem", "*", STR),
        _p("ssl_certificate", "*", INTERNAL),
        _p("ssl.ca.location", "*", STR),
        _p("https.ca.location", "*", STR),
        _p("https.ca.pem", "*", STR),
        _p("ssl.ca.pem", "*", STR),
        _p("ssl_ca", "*", INTERNAL),
        _p("ssl.ca.certificate.stores", "*", STR, (), "Root"),
        _p("ssl.crl.location", "*", STR),
        _p("ssl.keystore.location", "*", STR),
        _p("ssl.keystore.password", "*", STR),
        _p("ssl.providers", "*", STR),
        _p("ssl.engine.location", "*", STR),
        _p("ssl.engine.id", "*", STR, (), "dynamic"),
        _p("ssl_engine_callback_data", "*", C_API),
        _p("enable.ssl.certificate.verification", "*", BOOL, (), "true"),
        _p("ssl.endpoint.identification.algorithm", "*", ENUM, ("none", "https"), "https"),
        _p("ssl.certificate.verify_cb", "*", C_API),
        _p("sasl.mechanisms", "*", WORD, (), "GSSAPI"),
        _p("sasl.kerberos.service.name", "*", STR, (), "kafka"),
        _p("sasl.kerberos.principal", "*", STR, (), "kafkaclient"),
        _p("sasl.kerberos.kinit.cmd", "*", STR, (), _KINIT_CMD),
        _p("sasl.kerberos.keytab", "*", STR),
        _p("sasl.kerberos.min.time.before.relogin", "*", INT, (0, 86_400_000), "60000"),
        _p("sasl.username", "*", STR),
        _p("sasl.password", "*", STR),
        _p("sasl.oauthbearer.config", "*", STR),
        _p("enable.sasl.oauthbearer.unsecure.jwt", "*", BOOL, (), "false"),
        _p("oauthbearer_token_refresh_cb", "*", C_API),
        _p("sasl.oauthbearer.method", "*", ENUM, ("default", "oidc"), "default"),
        _p("sasl.oauthbearer.client.id", "*", STR),
        _p("sasl.oauthbearer.client.secret", "*", STR),
        _p("sasl.oauthbearer.scope", "*", STR),
        _p("sasl.oauthbearer.extensions", "*", STR),
        _p("sasl.oauthbearer.token.endpoint.url", "*", STR),
        _p("sasl.oauthbearer.sub.claim.name", "*", STR, (), "sub"),
        _p(
            "sasl.oauthbearer.grant.type",
            "*",
            ENUM,
            ("client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            "client_credentials",
        ),
        _p("sasl.oauthbearer.assertion.algorithm", "*", ENUM, ("RS256", "ES256"), "RS256"),
        _p("sasl.oauthbearer.assertion.private.key.file", "*", STR),
        _p("sasl.oauthbearer.assertion.private.key.passphrase", "*", STR),
        _p("sasl.oauthbearer.assertion.private.key.pem", "*", STR),
        _p("sasl.oauthbearer.assertion.file", "*", STR),
        _p("sasl.oauthbearer.assertion.claim.aud", "*", STR),
        _p("sasl.oauthbearer.assertion.claim.exp.seconds", "*", INT, (1, 2_147_483_647), "300"),
        _p("sasl.oauthbearer.assertion.claim.iss", "*", STR),
        _p("sasl.oauthbearer.assertion.claim.jti.include", "*", BOOL, (), "false"),
        _p("sasl.oauthbearer.assertion.claim.nbf.seconds", "*", INT, (0, 2_147_483_647), "60"),
        _p("sasl.oauthbearer.assertion.claim.sub", "*", STR),
        _p("sasl.oauthbearer.assertion.jwt.template.file", "*", STR),
        _p(
            "sasl.oauthbearer.metadata.authentication.type",
            "*",
            ENUM,
            ("none", "azure_imds", "aws_iam"),
            "none",
        ),
        _p("plugin.library.paths", "*", STR),
        _p("interceptors", "*", INTERNAL),
        _p("group.id", "C", STR),
        _p("group.instance.id", "C", STR),
        _p("partition.assignment.strategy", "C", STR, (), "range,roundrobin"),
        _p("session.timeout.ms", "C", INT, (1, 3_600_000), "45000"),
        _p("heartbeat.interval.ms", "C", INT, (1, 3_600_000), "3000"),
        _p("group.protocol.type", "C", STR, (), "consumer"),
        _p("group.protocol", "C", ENUM, ("classic", "consumer"), "classic"),
        _p("group.remote.assignor", "C", STR),
        _p("coordinator.query.interval.ms", "C", INT, (1, 3_600_000), "600000"),
        _p("max.poll.interval.ms", "C", INT, (1, 86_400_000), "300000"),
        _p("enable.auto.commit", "C", BOOL, (), "true"),
        _p("auto.commit.interval.ms", "C", INT, (0, 86_400_000), "5000"),
        _p("enable.auto.offset.store", "C", BOOL, (), "true"),
        _p("queued.min.messages", "C", INT, (1, 10_000_000), "100000"),
        _p("queued.max.messages.kbytes", "C", INT, (1, 2_097_151), "65536"),
        _p("fetch.wait.max.ms", "C", INT, (0, 300_000), "500"),
        _p("fetch.queue.backoff.ms", "C", INT, (0, 300_000), "1000"),
        _p("fetch.message.max.bytes", "C", INT, (1, 1_000_000_000), "1048576"),
        _p("fetch.max.bytes", "C", INT, (0, 2_147_483_135), "52428800"),
        _p("fetch.min.bytes", "C", INT, (0, 2_147_483_647), "1"),
        _p("fetch.error.backoff.ms", "C", INT, (0, 300_000), "500"),
        _p("offset.store.method", "C", ENUM, ("none", "file", "broker"), "broker"),
        _p("isolation.level", "C", ENUM, ("read_uncommitted", "read_committed"), "read_committed"),
        _p("consume_cb", "C", C_API),
        _p("rebalance_cb", "C", C_API),
        _p("offset_commit_cb", "C", C_API),
        _p("enable.partition.eof", "C", BOOL, (), "false"),
        _p("check.crcs", "C", BOOL, (), "false"),
        _p("client.rack", "*", STR),
        _p("max.poll.records", "C", INT, (1, 2_147_483_647), "500"),
        _p("share.acknowledgement.mode", "C", STR, (), "implicit"),
        _p("transactional.id", "P", STR),
        _p("transaction.timeout.ms", "P", INT, (1000, 2_147_483_647), "60000"),
        _p("enable.idempotence", "P", BOOL, (), "false"),
        _p("enable.gapless.guarantee", "P", BOOL, (), "false"),
        _p("queue.buffering.max.messages", "P", INT, (0, 2_147_483_647), "100000"),
        _p("queue.buffering.max.kbytes", "P", INT, (1, 2_147_483_647), "1048576"),
        _p("queue.buffering.max.ms", "P", FLOAT, (0, 900_000), "5"),
        _p("message.send.max.retries", "P", INT, (0, 2_147_483_647), "2147483647"),
        _p("retry.backoff.ms", "*", INT, (1, 300_000), "100"),
        _p("retry.backoff.max.ms", "*", INT, (1, 300_000), "1000"),
        _p("queue.buffering.backpressure.threshold", "P", INT, (1, 1_000_000), "1"),
        _p("compression.codec", "P", ENUM, ("none", "gzip", "snappy", "lz4", "zstd"), "none"),
        _p("batch.num.messages", "P", INT, (1, 1_000_000), "10000"),
        _p("batch.size", "P", INT, (1, 2_147_483_647), "1000000"),
        _p("delivery.report.only.error", "P", BOOL, (), "false"),
        _p("dr_cb", "P", C_API),
        _p("dr_msg_cb", "P", C_API),
        _p("sticky.partitioning.linger.ms", "P", INT, (0, 900_000), "10"),
        _p(
            "client.dns.lookup",
            "*",
            ENUM,
            ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"),
            "use_all_dns_ips",
        ),
        _p("enable.metrics.push", "*", BOOL, (), "true"),
        # Hidden: accepted by src/rdkafka_conf.c, not listed in CONFIGURATION.md. Left out:
        # ut_handle_ProduceResponse, a function pointer for librdkafka's own unit tests.
        _p("client.software.name", "*", STR, (), "librdkafka"),
        _p("client.software.version", "*", STR),
        _p("metadata.request.timeout.ms", "*", INT, (10, 900_000), "10"),
        _p("enable.sparse.connections", "*", BOOL, (), "true"),
        _p("enable_sasl_queue", "*", BOOL, (), "false"),
        _p("test.mock.num.brokers", "*", INT, (0, 10_000), "0"),
        _p("test.mock.broker.rtt", "*", INT, (0, 3_600_000), "0"),
    )
}
GLOBAL_ALIASES: Final = {
    "bootstrap.servers": "metadata.broker.list",
    "max.in.flight": "max.in.flight.requests.per.connection",
    "sasl.mechanism": "sasl.mechanisms",
    "sasl.oauthbearer.client.credentials.client.id": "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.credentials.client.secret": "sasl.oauthbearer.client.secret",
    "max.partition.fetch.bytes": "fetch.message.max.bytes",
    "linger.ms": "queue.buffering.max.ms",
    "retries": "message.send.max.retries",
    "compression.type": "compression.codec",
}

TOPIC_PROPERTIES: Final = {
    prop.name: prop
    for prop in (
        _p("request.required.acks", "P", INT, (-1, 1000), "-1"),
        _p("request.timeout.ms", "P", INT, (1, 900_000), "30000"),
        _p("message.timeout.ms", "P", INT, (0, 2_147_483_647), "300000"),
        _p("queuing.strategy", "P", ENUM, ("fifo", "lifo"), "fifo"),
        _p("produce.offset.report", "P", BOOL, (), "false"),
        _p("partitioner", "P", STR, _PARTITIONERS, "consistent_random"),
        _p("partitioner_cb", "P", C_API),
        _p("msg_order_cmp", "P", C_API),
        _p("opaque", "*", C_API),
        _p(
            "compression.codec",
            "P",
            ENUM,
            ("none", "gzip", "snappy", "lz4", "zstd", "inherit"),
            "inherit",
        ),
        _p("compression.level", "P", INT, (-1, 12), "-1"),
        _p("auto.commit.enable", "C", BOOL, (), "true"),
        _p("auto.commit.interval.ms", "C", INT, (10, 86_400_000), "60000"),
        _p(
            "auto.offset.reset",
            "C",
            ENUM,
            ("smallest", "earliest", "beginning", "largest", "latest", "end", "error"),
            "largest",
        ),
        _p("offset.store.path", "C", STR, (), "."),
        _p("offset.store.sync.interval.ms", "C", INT, (-1, 86_400_000), "-1"),
        _p("offset.store.method", "C", ENUM, ("file", "broker"), "broker"),
        _p("consume.callback.max.messages", "C", INT, (0, 1_000_000), "0"),
    )
}
TOPIC_ALIASES: Final = {
    "acks": "request.required.acks",
    "delivery.timeout.ms": "message.timeout.ms",
    "compression.type": "compression.codec",
    "enable.auto.commit": "auto.commit.enable",
}

# The words an INT also takes, in any case.
INT_WORDS: Final = {"request.required.acks": {"all": -1}}

# Java client keys librdkafka knows only to refuse, with its reason (src/rdkafka_conf.c).
JAVA_ONLY: Final = {
    "ssl.truststore.location": "Java TrustStores are not supported, use `ssl.ca.location` "
    "and a certificate file instead",
    "sasl.jaas.config": "Java JAAS configuration is not supported",
}


def find(name: str) -> Property | None:
    """The property librdkafka sets for `name` (an alias gives its target), or None for a
    name librdkafka does not know."""
    found = _find(GLOBAL_PROPERTIES, GLOBAL_ALIASES, name)
    if found is None:
        found = _find(TOPIC_PROPERTIES, TOPIC_ALIASES, name.removeprefix("topic."))
    return found


def _find(properties: dict[str, Property], aliases: dict[str, str], name: str) -> Property | None:
    return properties.get(aliases.get(name, name))
