"""The broker's wake-up for readers in its process (eoslog.log.append_signal): a waiter blocks
until a writer publishes past the generation it took, and no wake-up is lost between its
look and its wait."""

from __future__ import annotations

import threading

from eoslog.log.append_signal import AppendSignal

# Long enough that a waiter only returns in time if it was woken; a failure costs this much.
NEVER_S = 30.0


def test_a_wait_with_nothing_published_ends_at_its_timeout_unchanged() -> None:
    signal = AppendSignal()
    assert signal.wait_for_change(signal.generation, 0.01) is False


def test_a_publication_before_the_wait_returns_at_once() -> None:
    signal = AppendSignal()
    seen = signal.generation
    signal.bump()
    assert signal.wait_for_change(seen, NEVER_S) is True


def test_a_publication_from_another_thread_wakes_every_waiter() -> None:
    signal = AppendSignal()
    seen = signal.generation
    results: list[bool] = []
    waiters = [
        threading.Thread(
            target=lambda: results.append(signal.wait_for_change(seen, NEVER_S)), daemon=True
        )
        for _ in range(3)
    ]
    for waiter in waiters:
        waiter.start()
    signal.bump()
    for waiter in waiters:
        waiter.join(NEVER_S)
    assert results == [True, True, True]


def test_no_wake_up_is_lost_between_a_look_and_a_wait() -> None:
    """A writer bumps while the reader is between taking the generation and waiting, 2,000
    times in a row; a lost wake-up would block the reader for NEVER_S and fail the join."""
    signal = AppendSignal()
    rounds = 2_000
    taken = threading.Semaphore(0)
    woken: list[bool] = []

    def reader() -> None:
        for _ in range(rounds):
            seen = signal.generation
            taken.release()
            woken.append(signal.wait_for_change(seen, NEVER_S))

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    for _ in range(rounds):
        assert taken.acquire(timeout=NEVER_S)
        signal.bump()
    thread.join(NEVER_S)
    assert not thread.is_alive()
    assert woken == [True] * rounds
