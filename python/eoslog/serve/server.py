"""`Broker.serve` and `eoslog serve`: the Kafka wire protocol in front of a broker, on one
asyncio loop in one background thread (docs/design.md "Wire protocol").

The loop reads requests, parses them with kio and runs their handlers (eoslog.serve.registry);
an engine call that may block runs on a small pool of worker threads (Context.call), so the
loop never waits on a disk or a lock. A Fetch with nothing to return waits on the loop: one
watcher thread sleeps on the broker's AppendSignal while any fetch waits and wakes them all
when a partition log publishes something (AppendWaiters).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from eoslog import limits
from eoslog.client.metadata import NODE_ID
from eoslog.serve import registry
from eoslog.serve.address import advertised, split_address
from eoslog.serve.connection import Connection
from eoslog.serve.security import Security, Session, is_loopback

if TYPE_CHECKING:
    from eoslog.broker import Broker
    from eoslog.log.append_signal import AppendSignal

log = logging.getLogger("eoslog.serve")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Limits:
    """The broker settings the server enforces (eoslog.broker_config)."""

    request_bytes_max: int
    connections_max: int
    queued_requests_max: int
    queued_bytes_max: int


class AppendWaiters:
    """Fetches waiting for new data, woken from the broker's AppendSignal. Loop thread only,
    except the watcher, which is its own thread.

    No wake-up is lost: a waiter registers on the loop, then looks at the generation; the
    watcher reads the generation, hands it to the loop (which wakes every waiter holding
    another one), then sleeps until it moves. A bump before the watcher's read is seen by
    the loop's comparison; one after it ends the watcher's sleep."""

    def __init__(self, signal: AppendSignal, loop: asyncio.AbstractEventLoop) -> None:
        self._signal = signal
        self._loop = loop
        self._waiting: dict[asyncio.Future[None], int] = {}
        self._wanted = threading.Event()  # set while a waiter may be registered
        self._stopping = False
        self._watcher = threading.Thread(
            target=self._watch, name="eoslog-serve-appends", daemon=True
        )
        self._watcher.start()

    async def wait(self, generation: int, timeout_s: float) -> bool:
        """Wait until the signal's generation is no longer `generation` or timeout_s passes
        (or the server stops); whether it moved."""
        if self._signal.generation != generation or self._stopping:
            return self._signal.generation != generation
        woken = self._loop.create_future()
        self._waiting[woken] = generation
        self._wanted.set()
        try:
            await asyncio.wait_for(woken, timeout_s)
        except TimeoutError:
            pass
        finally:
            self._waiting.pop(woken, None)
        return self._signal.generation != generation

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _wake_changed(self, generation: int) -> None:
        for woken, held in list(self._waiting.items()):
            if held != generation and not woken.done():
                woken.set_result(None)
        if not self._waiting:
            self._wanted.clear()

    def wake_all(self) -> None:
        """End every wait now (the server is stopping). Loop thread."""
        self._stopping = True
        for woken in self._waiting:
            if not woken.done():
                woken.set_result(None)

    def _watch(self) -> None:
        while True:
            self._wanted.wait()
            if self._stopping:
                return
            generation = self._signal.generation
            self._loop.call_soon_threadsafe(self._wake_changed, generation)
            # A long sleep: a bump ends it, and so does close() (it bumps once).
            self._signal.wait_for_change(generation, 3600.0)

    def close(self) -> None:
        """Stop the watcher (any thread, after wake_all)."""
        self._stopping = True
        self._wanted.set()
        self._signal.bump()  # wakes the watcher; a reader woken by it finds nothing new
        self._watcher.join()


class Server:
    """A Kafka listener in front of `broker`, serving from a background thread until
    close(). Create with Broker.serve(); `address` is the "host:port" bound."""

    def __init__(self, broker: Broker, address: str, security: Security | None = None) -> None:
        host, port = split_address(address)
        self.security = security or Security()
        if not self.security.sasl and self.security.tls is None and not is_loopback(host):
            log.warning(
                "eoslog serve: %s is not a loopback address and the listener has neither TLS "
                "nor SASL: anyone who reaches it can read and write the log",
                address,
            )
        for module in registry.HANDLER_MODULES:
            importlib.import_module(module)
        settings = broker.settings
        self.broker = broker
        self.limits = Limits(
            request_bytes_max=settings["socket.request.max.bytes"],
            connections_max=settings["max.connections"],
            queued_requests_max=max(1, settings["queued.max.requests"]),
            queued_bytes_max=settings["queued.max.request.bytes"],
        )
        self.stopping = False
        self.host: str = advertised(host)  # what Metadata tells clients to connect to
        self.port: int = port  # the port bound, once bound
        self._connections: dict[Connection, asyncio.Task[None]] = {}
        self._pool = ThreadPoolExecutor(
            max_workers=limits.serve_worker_threads_max, thread_name_prefix="eoslog-serve"
        )
        self._loop = asyncio.new_event_loop()
        self._listener: asyncio.Server | None = None
        self._closed = False
        self._close_lock = threading.Lock()
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._run, args=(host, port, ready, failure), name="eoslog-serve", daemon=True
        )
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._loop.close()
            self._pool.shutdown()
            raise failure[0]
        assert self._listener is not None
        bound = self._listener.sockets[0].getsockname()
        self.port = int(bound[1])
        self.address: str = f"{host}:{self.port}" if ":" not in host else f"[{host}]:{self.port}"

    def _run(
        self, host: str, port: int, ready: threading.Event, failure: list[BaseException]
    ) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._listener = self._loop.run_until_complete(
                asyncio.start_server(
                    self._accept, host, port, reuse_address=True, ssl=self.security.tls
                )
            )
            self._waiters = AppendWaiters(self.broker.append_signal, self._loop)
        except BaseException as error:
            failure.append(error)
            ready.set()
            return
        ready.set()
        self._loop.run_forever()

    # --- connections (loop thread) ---------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(self, reader, writer)
        if self.stopping or len(self._connections) >= self.limits.connections_max:
            reason = "stopping" if self.stopping else "at max.connections"
            log.warning("refusing a connection from %s: the server is %s", connection.peer, reason)
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._connections[connection] = task
        try:
            await connection.run()
        finally:
            self._connections.pop(connection, None)

    def context(
        self, peer: str, client_id: str | None, session: Session | None = None
    ) -> registry.Context:
        return registry.Context(
            broker=self.broker,
            node_id=NODE_ID,
            host=self.host,
            port=self.port,
            peer=peer,
            client_id=client_id,
            call=self.call,
            wait_for_append=self._waiters.wait,
            session=session,
        )

    def connections_open(self) -> int:
        """How many client connections are open now (for tests and monitoring)."""
        return len(self._connections)

    def fetches_waiting(self) -> int:
        """How many Fetch requests are waiting for data now (for tests and monitoring)."""
        return self._waiters.waiting

    async def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking engine call on a worker thread and return its result."""
        bound = functools.partial(function, *args, **kwargs)
        return await self._loop.run_in_executor(self._pool, bound)

    # --- close -----------------------------------------------------------------------------

    async def _stop(self, timeout_s: float) -> None:
        """Stop accepting, answer the requests being served (a waiting fetch answers at
        once), refuse the ones read ahead, close every connection."""
        self.stopping = True
        assert self._listener is not None
        self._listener.close()
        self._waiters.wake_all()
        if self._connections:
            idle = [asyncio.ensure_future(c.idle.wait()) for c in self._connections]
            await asyncio.wait(idle, timeout=timeout_s)
            for waiting in idle:
                waiting.cancel()
        for connection in self._connections:
            connection.stop()
        tasks = list(self._connections.values())
        _, late = await asyncio.wait(tasks, timeout=timeout_s) if tasks else (set(), set())
        for task in late:
            task.cancel()  # a client that does not read its answers: its connection ends

    def close(self, timeout_s: float = limits.serve_close_timeout_s) -> None:
        """Stop serving (module docstring of eoslog.serve.connection for what happens to a
        connection's requests) and join the server's threads. Idempotent; any thread but the
        server's own."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        asyncio.run_coroutine_threadsafe(self._stop(timeout_s), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._waiters.close()
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()
        self._pool.shutdown(wait=True)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
