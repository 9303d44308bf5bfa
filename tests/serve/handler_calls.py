"""Helpers for the wire handlers' tests: kio request entities built by API key and version,
a handler Context over a real Broker (its blocking calls run in a thread, as the server's
worker threads run them), and every answer passed through kio's encoder and decoder, so that a
response the server could not put on the wire fails the test."""

from __future__ import annotations

import asyncio
import importlib
import io
from typing import Any

from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer

import eoslog
from eoslog.serve.registry import APIS, HANDLER_MODULES, Context

for _module in HANDLER_MODULES:  # their import registers the handlers, as the server's does
    importlib.import_module(_module)


def request(key: int, version: int, **fields: Any) -> Any:
    return load_request_schema(key, version)(**fields)


def nested(key: int, version: int, name: str) -> Any:
    """A nested entity class of a request version (a topic, a partition, ...)."""
    schema = load_request_schema(key, version)
    return getattr(importlib.import_module(schema.__module__), name)


async def _in_thread(function: Any, *args: Any) -> Any:
    return await asyncio.to_thread(function, *args)


def context(broker: eoslog.Broker) -> Context:
    return Context(
        broker=broker,
        node_id=0,
        host="127.0.0.1",
        port=9092,
        peer="127.0.0.1:50000",
        client_id="test",
        call=_in_thread,
    )


def answer(broker: eoslog.Broker, sent: Any, *, decode: bool = True) -> Any:
    """The response the registered handler gives `sent`, after an encode and (`decode`) a
    decode. kio's decoder refuses the -1 Kafka writes for a missing time (DescribeTransactions'
    start time of an id at rest): answers holding one are checked encoded only."""
    entry = APIS[int(sent.__api_key__)]
    assert entry.min_version <= sent.__version__ <= entry.max_version, "version not served"

    async def handle() -> Any:
        return await entry.handler(context(broker), sent)

    response = asyncio.run(handle())
    buffer = io.BytesIO()
    entity_writer(type(response))(buffer, response)
    encoded = buffer.getvalue()
    if not decode:
        return response
    decoded, size = entity_reader(type(response))(encoded, 0)
    assert size == len(encoded), "the response decodes with bytes left over"
    return decoded
