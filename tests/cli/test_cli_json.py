"""`--json` on the file commands, as a script consumes it: `eoslog dump-log --json` prints one
JSON object a line (JSON Lines, streamed), the same facts as Kafka's text lines; `eoslog
verify --json` prints one document with the status, each problem and each path's summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import eoslog
from tests.cli.shell import run

FIRST = f"{0:020d}"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Topic t (one partition): a committed and an aborted transaction and a group's offset
    committed in the first; shut down cleanly."""
    directory = tmp_path_factory.mktemp("json") / "data"
    with eoslog.open(str(directory), background=False) as broker:
        broker.create_topic("t", 1)
        producer = broker.producer({"transactional.id": "tx", "linger.ms": 0})
        producer.init_transactions()
        consumer = broker.consumer({"group.id": "g", "enable.auto.commit": False})
        for commit in (True, False):
            producer.begin_transaction()
            producer.produce("t", b"value", key=b"k", partition=0, headers=[("h", b"1")])
            if commit:
                offsets = [eoslog.TopicPartition("t", 0, 1)]
                producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata())
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    return directory


def _lines(*arguments: str) -> tuple[int, list[dict[str, object]]]:
    done = run("dump-log", "--json", *arguments)
    assert done.stderr == "", done.stderr
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def test_dump_log_json_gives_every_batch_and_record_as_an_object(root: Path) -> None:
    log = root / "t-0" / f"{FIRST}.log"
    status, lines = _lines(str(log), "--print-data-log")
    assert status == 0
    assert lines[:2] == [
        {"type": "file", "path": str(log)},
        {"type": "logStartingOffset", "offset": 0},
    ]
    batches = [line for line in lines if line["type"] == "batch"]
    records = [line for line in lines if line["type"] == "record"]
    assert [b["baseOffset"] for b in batches] == [0, 1, 2, 3]
    assert [b["isControl"] for b in batches] == [False, True, False, True]
    assert all(b["isvalid"] is True and b["compresscodec"] == "none" for b in batches)
    assert records[0] | {"timestamp": 0} == {
        "type": "record",
        "offset": 0,
        "timestampType": "CreateTime",
        "timestamp": 0,
        "keySize": 1,
        "valueSize": 5,
        "sequence": 0,
        "headerKeys": ["h"],
        "key": "k",
        "payload": "value",
    }
    assert [(r["endTxnMarker"], r["offset"]) for r in records if "endTxnMarker" in r] == [
        ("COMMIT", 1),
        ("ABORT", 3),
    ]
    # The text dump says the same of each batch.
    text = run("dump-log", str(log)).stdout.splitlines()
    batch_lines = [line for line in text if line.startswith("baseOffset:")]
    for batch, line in zip(batches, batch_lines, strict=True):
        assert f"crc: {batch['crc']} isvalid: true" in line
        assert f"position: {batch['position']} CreateTime: {batch['maxTimestamp']}" in line


def test_dump_log_json_decodes_the_offsets_topic_into_objects(root: Path) -> None:
    (log,) = (root / "__consumer_offsets-0").glob("*.log")
    _, lines = _lines(str(log), "--offsets-decoder")
    committed = [line for line in lines if line["type"] == "record" and "payload" in line]
    assert committed, lines
    key, payload = committed[0]["key"], committed[0]["payload"]
    assert isinstance(key, dict) and isinstance(payload, dict)
    assert key["data"] == {"group": "g", "topic": "t", "partition": 0}
    assert payload["data"]["offset"] == 1  # type: ignore[index]


def test_dump_log_json_reports_damage_and_carries_on(root: Path, tmp_path: Path) -> None:
    log = tmp_path / f"{FIRST}.log"
    data = bytearray((root / "t-0" / f"{FIRST}.log").read_bytes())
    data[30] ^= 0xFF  # inside the first batch: its CRC fails
    log.write_bytes(bytes(data))
    status, lines = _lines(str(log))
    assert status == 1
    damage = [line for line in lines if line["type"] == "damage"]
    assert len(damage) == 1 and damage[0]["byte"] == 0
    assert isinstance(damage[0]["resumeAt"], int) and damage[0]["resumeAt"] > 0
    later = [line["baseOffset"] for line in lines if line["type"] == "batch"]
    assert later[-3:] == [1, 2, 3]


def test_dump_log_json_gives_index_txnindex_and_snapshot_entries(root: Path) -> None:
    directory = root / "t-0"
    (snapshot,) = directory.glob("*.snapshot")
    status, lines = _lines(
        str(directory / f"{FIRST}.timeindex"), str(directory / f"{FIRST}.txnindex"), str(snapshot)
    )
    assert status == 0
    kinds = [line["type"] for line in lines if line["type"] != "file"]
    assert "abortedTransaction" in kinds and "producer" in kinds
    (aborted,) = [line for line in lines if line["type"] == "abortedTransaction"]
    assert (aborted["firstOffset"], aborted["lastOffset"]) == (2, 3)
    (producer,) = [line for line in lines if line["type"] == "producer"]
    assert producer["currentTxnFirstOffset"] == -1


def test_verify_json_is_one_document_with_the_status_problems_and_summaries(
    root: Path, tmp_path: Path
) -> None:
    done = run("verify", "--json", str(root))
    assert done.returncode == 0
    document = json.loads(done.stdout)
    assert document["status"] == 0 and document["problems"] == []
    (summary,) = document["paths"]
    assert (summary["path"], summary["errors"], summary["warnings"]) == (str(root), 0, 0)
    assert summary["summary"].endswith("all valid") and summary["batches"] > 4
    log = tmp_path / f"{FIRST}.log"
    data = bytearray((root / "t-0" / f"{FIRST}.log").read_bytes())
    data[30] ^= 0xFF
    log.write_bytes(bytes(data))
    done = run("verify", "--json", str(log))
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert document["status"] == 1
    (problem,) = document["problems"]
    assert (problem["file"], problem["byte"], problem["severity"]) == (str(log), 0, "error")
    assert f"eoslog repair {log} --truncate-at 0" in problem["text"]
