"""SaslHandshake and SaslAuthenticate (docs/api.md "Wire protocol", "Security"): Kafka's
SASL/PLAIN flow on a SASL_PLAINTEXT or SASL_SSL listener (eoslog.serve.security). A step
out of order, an unknown mechanism or a wrong password is answered with its error code and
the connection closes after that answer, as Kafka closes it. SaslHandshake is served from
version 1, the version after which tokens travel inside SaslAuthenticate requests."""

from __future__ import annotations

from typing import Any

from eoslog.errors import KafkaError
from eoslog.serve.messages import build, error_code, response_module
from eoslog.serve.registry import Context, api
from eoslog.serve.security import MECHANISMS, Session


def _session(ctx: Context) -> Session | None:
    """The connection's SASL state if its listener is a SASL one and the step is allowed."""
    session = ctx.session
    if session is None or not session.security.sasl or session.user is not None:
        return None
    return session


@api(17, 1, 1)
async def sasl_handshake(ctx: Context, request: Any) -> Any:
    module = response_module(17, request.__version__)
    session = _session(ctx)
    code = KafkaError.NO_ERROR
    if session is None or session.handshaken:
        code = KafkaError.ILLEGAL_SASL_STATE
    elif request.mechanism.upper() not in MECHANISMS:
        code = KafkaError.UNSUPPORTED_SASL_MECHANISM
    if code != KafkaError.NO_ERROR:
        _close_after_answer(ctx)
    else:
        assert session is not None
        session.handshaken = True
    return build(module.SaslHandshakeResponse, error_code=error_code(code), mechanisms=MECHANISMS)


@api(36, 0, 2)
async def sasl_authenticate(ctx: Context, request: Any) -> Any:
    module = response_module(36, request.__version__)
    session = _session(ctx)
    code, message = KafkaError.NO_ERROR, None
    if session is None or not session.handshaken:
        code, message = KafkaError.ILLEGAL_SASL_STATE, "SaslAuthenticate out of order"
    else:
        session.user = session.security.plain_user(request.auth_bytes)
        if session.user is None:
            code = KafkaError.SASL_AUTHENTICATION_FAILED
            message = "Authentication failed: invalid username or password"
    if code != KafkaError.NO_ERROR:
        _close_after_answer(ctx)
    return build(
        module.SaslAuthenticateResponse,
        error_code=error_code(code),
        error_message=message,
        auth_bytes=b"",
    )


def _close_after_answer(ctx: Context) -> None:
    if ctx.session is not None:
        ctx.session.closing = True
