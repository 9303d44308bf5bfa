"""The listen address of `eoslog serve` and the host it advertises; light to import (the
command line checks an address before it opens anything)."""

from __future__ import annotations

import socket


def split_address(address: str) -> tuple[str, int]:
    """("host", port) of "host:port" ("[v6]:port" for IPv6); ValueError otherwise."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"listen address must be HOST:PORT, not {address!r}")
    host = host.removeprefix("[").removesuffix("]")
    if not host:
        raise ValueError(f"listen address must name a host: {address!r}")
    return host, int(port)


def advertised(host: str) -> str:
    """The host clients are told to connect to: the bound one, or for a wildcard bind the
    machine's name."""
    if host in ("0.0.0.0", "::"):
        return socket.getfqdn()
    return host
