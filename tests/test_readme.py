"""README.md's examples run as written (issue 16: the exactly-once copier failed at first
contact with real data). Every ```python block of README.md is executed as a user would copy
it: each in a fresh working directory, with the input it reads prepared first, and what it
promises checked afterwards. A block is known by the heading it sits under; CHECKS holds what
each block promises, and a block without an entry there fails, so a new example gets a check.

Blocks run in this process (their variables are checked), except the Spark one, which runs
as a script in a child process without PYSPARK_PYTHON set, as a user's would (marker spark).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import eoslog
from eoslog.client.producer import Producer
from eoslog.record.columns import spark_schema

ROOT = Path(__file__).resolve().parents[1]
SPARK_SECONDS_MAX = 600


@dataclass(frozen=True)
class Block:
    name: str  # the heading it sits under, "(2)" after it for the second block there
    code: str
    line: int  # of its first code line in README.md


def readme_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text, named by their headings (a `#` line inside
    a code block is not a heading)."""
    blocks: list[Block] = []
    heading, fence, first, code = "", None, 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        if fence is None and line.startswith("```"):
            fence, first, code = line[3:].strip(), number + 1, []
        elif fence is not None and line.startswith("```"):
            if fence == "python":
                seen = sum(block.name.split(" (")[0] == heading for block in blocks)
                name = heading if seen == 0 else f"{heading} ({seen + 1})"
                blocks.append(Block(name, "\n".join(code) + "\n", first))
            fence = None
        elif fence is not None:
            code.append(line)
        elif line.startswith("#"):
            heading = line.lstrip("#").strip()
    return blocks


BLOCKS = readme_blocks((ROOT / "README.md").read_text())


def execute(block: Block, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run the block in `workdir` (its "data/" is workdir/data); its variables."""
    monkeypatch.chdir(workdir)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(block.code, f"README.md:{block.line}", "exec"), namespace)
    return namespace


def read_all(path: Path, topic: str) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
    """(key, value) of every committed record of the topic, per partition."""
    with eoslog.open(str(path)) as broker:
        partitions = broker.list_topics()[topic].num_partitions
        consumer = broker.consumer({"auto.offset.reset": "earliest"})
        records: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        for partition in range(partitions):
            consumer.assign([eoslog.TopicPartition(topic, partition, eoslog.OFFSET_BEGINNING)])
            records[partition] = []
            while messages := consumer.consume(1000, timeout=0.2):
                records[partition] += [(m.key(), m.value()) for m in messages]
        consumer.close()
        return records


Check = Callable[[Block, Path, pytest.MonkeyPatch, pytest.CaptureFixture[str]], None]

# --- what each block promises -------------------------------------------------------------------


def copier(
    block: Block, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The exactly-once copier: its output topic, created by its first record, holds every
    input record transformed, each key's records in their input order, and the group's
    committed offsets are the inputs' ends. The input spreads over two partitions and is
    read 500 records at a time, so some batches come from one partition only and the other's
    position is OFFSET_INVALID (the second failure the issue reported)."""
    inputs = {"orders": 2, "audit-eu": 1}
    expected: dict[bytes, list[bytes]] = {}
    with eoslog.open(str(workdir / "data")) as broker:
        producer = broker.producer()
        for topic, partitions in inputs.items():
            broker.create_topic(topic, partitions)
            for number in range(1200 if topic == "orders" else 50):
                key, value = b"%s-key-%d" % (topic.encode(), number % 10), b"%d" % number
                producer.produce(topic, value, key=key)
                expected.setdefault(key, []).append(b"copied:" + value)
        producer.flush()
    sent: list[eoslog.TopicPartition] = []
    send_offsets = Producer.send_offsets_to_transaction

    def spy(self: Producer, offsets: list[eoslog.TopicPartition], *args: Any) -> None:
        sent.extend(offsets)
        send_offsets(self, offsets, *args)

    monkeypatch.setattr(Producer, "send_offsets_to_transaction", spy)
    execute(block, workdir, monkeypatch)
    assert any(tp.offset == eoslog.OFFSET_INVALID for tp in sent), "no batch left one unread"
    output = read_all(workdir / "data", "orders-enriched")
    assert list(output) == [0]  # created with the broker's num.partitions
    copied: dict[bytes, list[bytes]] = {}
    for key, value in output[0]:
        assert key is not None and value is not None
        copied.setdefault(key, []).append(value)
    assert copied == expected
    with eoslog.open(str(workdir / "data")) as broker:
        group = broker.consumer({"group.id": "copier"})
        wanted = [
            eoslog.TopicPartition(topic, partition)
            for topic, partitions in inputs.items()
            for partition in range(partitions)
        ]
        ends = [broker.log(tp.topic, tp.partition).log_end_offset for tp in wanted]
        assert [tp.offset for tp in group.committed(wanted)] == ends
        group.close()


def transactions(
    block: Block, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both writes of the committed transaction are readable, with their keys."""
    execute(block, workdir, monkeypatch)
    debits = [r for records in read_all(workdir / "data", "debits").values() for r in records]
    credits = [r for records in read_all(workdir / "data", "credits").values() for r in records]
    assert (debits, credits) == ([(b"acct-1", b"-10")], [(b"acct-2", b"+10")])


def producing_and_consuming(
    block: Block, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """consume() gets produce_batch's records from partition 0, in order; consume_arrow gives
    Spark's schema."""
    namespace = execute(block, workdir, monkeypatch)
    unkeyed = [m.value() for m in namespace["messages"] if m.key() is None]
    assert unkeyed == [b"a", b"b", b"c"]
    assert all(m.partition() == 0 for m in namespace["messages"])
    assert namespace["table"].schema == spark_schema()
    everything = read_all(workdir / "data", "orders")
    assert Counter(r for records in everything.values() for r in records) == Counter(
        [(None, b"a"), (None, b"b"), (None, b"c"), (b"k", b"v")]
    )


def coming_from_confluent(
    block: Block, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The confluent-style producer's delivery report and the consumer's first message are
    printed, and the directory is released once both clients are closed."""
    execute(block, workdir, monkeypatch)
    assert capsys.readouterr().out.splitlines() == ["events-0@0", "b'user-1' b'signed-in'"]
    eoslog.open(str(workdir / "data")).close()


def other_processes(
    block: Block, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The record produced through the server is the one the server's consumer prints, and
    the directory holds it after the broker is closed."""
    capsys.readouterr()
    execute(block, workdir, monkeypatch)
    assert capsys.readouterr().out == "b'user-1' b'/home'\n"
    assert read_all(workdir / "data", "clicks")[0] == [(b"user-1", b"/home")]


def partition_log(
    block: Block, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The appended batch gets offset 0 and is read back; its segment file is Kafka's name."""
    namespace = execute(block, workdir, monkeypatch)
    assert (namespace["info"].base_offset, namespace["info"].last_offset) == (0, 0)
    assert namespace["fetched"].high_watermark == 1
    assert (workdir / "data" / "orders-0" / "00000000000000000000.log").stat().st_size > 0
    assert read_all(workdir / "data", "orders")[0] == [(b"key", b"value")]


def codec(
    block: Block, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lz4 batch decodes to one row in Spark's schema."""
    table = execute(block, workdir, monkeypatch)["table"]
    assert table.schema == spark_schema()
    row = table.to_pylist()[0]
    assert (row["key"], row["value"], row["topic"], row["offset"]) == (
        b"key",
        b"value",
        "orders",
        0,
    )


def offline_scan(
    block: Block, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The scan from offset 100 prints what its comment says."""
    capsys.readouterr()
    execute(block, workdir, monkeypatch)
    assert capsys.readouterr().out == "100 100\n"


def spark(
    block: Block, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Spark block as a script of its own, without PYSPARK_PYTHON in its environment: the
    block must set it (its Python workers import eoslog), and prints the count it promises."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    done = subprocess.run(
        [sys.executable, "-c", block.code],
        cwd=workdir,
        env=environment,
        capture_output=True,
        text=True,
        timeout=SPARK_SECONDS_MAX,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.splitlines()[-1] == "100"


CHECKS: dict[str, Check] = {
    "Consumer groups and exactly-once pipelines": copier,
    "Transactions (exactly-once writes across partitions)": transactions,
    "Producing and consuming (idempotent producer, consumer)": producing_and_consuming,
    "Coming from confluent-kafka": coming_from_confluent,
    "Other processes: `eoslog serve`": other_processes,
    "Opening a log directory (the partition log)": partition_log,
    "The Kafka v2 record-batch codec": codec,
    "Offline scans and Spark": offline_scan,
    "Offline scans and Spark (2)": spark,
}


def test_every_readme_block_has_a_check_and_every_check_a_block() -> None:
    assert [block.name for block in BLOCKS] == list(CHECKS)


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(
            block, id=block.name, marks=[pytest.mark.spark] if "pyspark" in block.code else []
        )
        for block in BLOCKS
    ],
)
def test_readme_block_runs_and_keeps_its_promise(
    block: Block,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert block.name in CHECKS, f"README.md:{block.line}: add what this block promises to CHECKS"
    CHECKS[block.name](block, tmp_path, monkeypatch, capsys)


def test_blocks_are_found_under_their_headings() -> None:
    text = "# A\n```python\nx = 1\n```\n```sh\n# not a heading\n```\n```python\ny = 2\n```\n"
    assert readme_blocks(text) == [Block("A", "x = 1\n", 3), Block("A (2)", "y = 2\n", 9)]
