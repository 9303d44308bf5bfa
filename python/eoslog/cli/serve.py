"""`eoslog serve DIR [--listen [PROTOCOL://]HOST:PORT]`: open a log directory (taking its lock)
and serve it to Kafka clients over the wire protocol (Broker.serve; docs/api.md "Wire
protocol") until SIGTERM or SIGINT. PROTOCOL is PLAINTEXT (the default), SSL,
SASL_PLAINTEXT or SASL_SSL; SSL needs --ssl-certificate and --ssl-key (PEM files), SASL
(PLAIN) needs --sasl-users (a file of user:password lines). It prints one line,
`eoslog serve: listening on HOST:PORT (DIR)`, once it listens; on the signal it stops
accepting, answers the requests being served, closes the directory cleanly and exits 0.
After a SIGKILL the next open recovers as any open does.
"""

from __future__ import annotations

import signal
import threading

import click

import eoslog
from eoslog.broker import DURABILITY_MODES
from eoslog.errors import InvalidConfigError
from eoslog.serve.address import split_address
from eoslog.serve.security import security, split_listener

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _checked_address(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """A usage error (status 2) for a malformed address, before the directory is opened."""
    try:
        split_address(split_listener(value)[1])
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    return value


@click.command("serve", help=__doc__)
@click.argument("directory", type=click.Path(file_okay=False))
@click.option(
    "--listen",
    default="127.0.0.1:9092",
    show_default=True,
    callback=_checked_address,
    help="[PROTOCOL://]HOST:PORT to listen on (port 0: a free one; the line printed says which)",
)
@click.option("--ssl-certificate", help="PEM certificate chain of an SSL/SASL_SSL listener")
@click.option("--ssl-key", help="PEM private key of an SSL/SASL_SSL listener")
@click.option("--sasl-users", help="file of user:password lines (SASL/PLAIN)")
@click.option(
    "--durability",
    type=click.Choice(DURABILITY_MODES),
    default="commit",
    show_default=True,
    help='the broker\'s durability (docs/design.md "Durability")',
)
def serve(
    directory: str,
    listen: str,
    durability: str,
    ssl_certificate: str | None,
    ssl_key: str | None,
    sasl_users: str | None,
) -> int:
    options = {
        "ssl.certificate.location": ssl_certificate,
        "ssl.key.location": ssl_key,
        "sasl.plain.users.file": sasl_users,
    }
    config = {key: value for key, value in options.items() if value is not None}
    try:  # a usage error before the directory is opened
        security(split_listener(listen)[0], config)
    except InvalidConfigError as error:
        raise click.UsageError(str(error)) from None
    # Python runs signal handlers in the main thread, whichever thread the signal hits;
    # installed before the open, so a signal from then on ends the wait below.
    stop = threading.Event()
    previous = {number: signal.signal(number, lambda *_: stop.set()) for number in _STOP_SIGNALS}
    try:
        broker = eoslog.open(directory, durability)
        try:
            server = broker.serve(listen, config)
            click.echo(f"eoslog serve: listening on {server.address} ({broker.path})")
            stop.wait()
        finally:
            broker.close()  # closes the server first (Broker.close)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return 0
