"""Family 6 (docs/reliability.md): the exactly-once copier under kill -9.

A child process runs the pipeline's copier (eoslog.demo_pipeline.copy: a consumer in a group
reads the input topic, each record is transformed and produced to the output topic, the
consumed offsets sent in the same transaction; about a third of the transactions aborted at
random and redone), while a reader thread in the same process reads the output read_committed
from the start and reports every record it sees. The parent SIGKILLs the child at random
moments, at least three times, restarting it in the same directory until it finishes, and
after every run reopens the directory and checks:

- the output is a prefix of the transformed input in every partition: no duplicate, nothing
  skipped, order kept;
- the group's committed offset of every input partition equals the number of output records
  committed for it: offsets are visible exactly when their transaction committed, across
  crashes (a transaction the kill left open is invisible on both sides);
- every commit the child acknowledged (commit_transaction returned) is there;
- everything the concurrent reader saw is in the committed output, at the same offset.

At the end the output is the whole transformed input, and the union of the readers' views is
the whole output.
"""

from __future__ import annotations

import os
import random
import textwrap

import pytest

import eoslog
from eoslog import demo_pipeline
from eoslog.demo_pipeline import GROUP, INPUT, OUTPUT, PARTITIONS, read_partition, transform
from tests.support.killharness import run_child

CI_MESSAGES = 10_000
SOAK_MESSAGES = 100_000
KILLS_MIN = 3
RUNS_MAX = 40

CHILD = textwrap.dedent(
    """
    import json, sys, threading
    import eoslog
    from eoslog.demo_pipeline import OUTPUT, PARTITIONS, copy

    root, seed, per_transaction = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    broker = eoslog.open(root, durability="commit")
    printing = threading.Lock()
    stop = threading.Event()

    def say(fields):
        with printing:  # two threads report: one whole line at a time
            print(json.dumps(fields), flush=True)

    def read():
        consumer = broker.consumer({"isolation.level": "read_committed"})
        consumer.assign([eoslog.TopicPartition(OUTPUT, p, 0) for p in range(PARTITIONS)])
        while True:
            finishing = stop.is_set()
            messages = consumer.consume(1000, timeout=0 if finishing else 0.01)
            if messages:
                say({"seen": [[m.partition(), m.offset(), m.value().decode()] for m in messages]})
            elif finishing:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    copy(root, records_per_transaction=per_transaction, abort_fraction=1 / 3, seed=seed,
         report=say, broker=broker)
    stop.set()
    reader.join()
    say({"done": True})
    broker.close()
    """
)


def check_run(
    root: str,
    inputs: dict[int, list[bytes]],
    lines: list[dict[str, object]],
    seed: int,
    run: int,
) -> tuple[dict[int, list[tuple[int, bytes]]], set[tuple[int, int, bytes]]]:
    """The invariants after one run (module doc); returns the output and what the reader saw."""
    where = f"seed={seed} run {run}"
    with eoslog.open(root, background=False) as broker:
        outputs = {p: read_partition(broker, OUTPUT, p) for p in range(PARTITIONS)}
        committed = broker.groups.fetch_offsets(
            GROUP, [(INPUT, p) for p in range(PARTITIONS)], require_stable=False
        )
    for partition, records in outputs.items():
        values = [value for _, value in records]
        expected = [transform(value) for value in inputs[partition][: len(values)]]
        assert values == expected, f"{where}: partition {partition} is not a prefix of the input"
        stored = committed[(INPUT, partition)]
        offset = 0 if stored is None else stored.offset
        assert offset == len(values), (
            f"{where}: partition {partition}: committed offset {offset} for {len(values)} "
            "committed output records"
        )
    for line in lines:
        for partition, offset in dict(line.get("offsets", {})).items():  # type: ignore[call-overload]
            assert offset <= len(outputs[int(partition)]), f"{where}: acknowledged commit lost"
    pairs = {(p, offset, value) for p, records in outputs.items() for offset, value in records}
    seen = {
        (int(p), int(offset), str(value).encode())
        for line in lines
        for p, offset, value in line.get("seen", [])  # type: ignore[attr-defined]
    }
    assert seen <= pairs, (
        f"{where}: the reader saw records not committed: {sorted(seen - pairs)[:5]}"
    )
    return outputs, seen


def run_copier(root: str, messages: int, seed: int) -> None:
    rng = random.Random(seed)
    per_transaction = max(10, messages // 200)
    print(f"seed={seed} messages={messages} per_transaction={per_transaction}")
    demo_pipeline.fill_input(root, messages)
    with eoslog.open(root, background=False) as broker:
        inputs = {p: [v for _, v in read_partition(broker, INPUT, p)] for p in range(PARTITIONS)}
    assert sum(map(len, inputs.values())) == messages
    kills = commits = aborts = 0
    seen_all: set[tuple[int, int, bytes]] = set()
    finished = False
    for run in range(RUNS_MAX):
        # The first KILLS_MIN runs are killed a few reports in (then a random moment later, so
        # the kill lands mid-transaction): a timer alone can miss a copier that has grown fast
        # enough to finish first. Later runs are killed now and then at a random moment.
        if kills < KILLS_MIN:
            kill_after, arm_after = rng.uniform(0.0, 0.05), rng.randint(1, 8)
        else:
            kill_after, arm_after = (rng.uniform(0.05, 0.8) if rng.random() < 0.3 else None), 1
        child = run_child(
            CHILD,
            [root, str(rng.randrange(1 << 30)), str(per_transaction)],
            rng,
            kill_after,
            arm_after_lines=arm_after,
        )
        kills += child.killed
        commits += sum("committed" in line for line in child.lines)
        aborts += sum("aborted" in line for line in child.lines)
        outputs, seen = check_run(root, inputs, child.lines, seed, run)
        seen_all |= seen
        if any("done" in line for line in child.lines):
            finished = True
            break
    print(f"seed={seed}: {run + 1} runs, {kills} kills, {commits} commits, {aborts} aborts")
    assert finished and kills >= KILLS_MIN, f"seed={seed}: finished={finished} kills={kills}"
    assert aborts > 0 and commits > 0
    for partition in range(PARTITIONS):
        values = [value for _, value in outputs[partition]]
        assert values == [transform(v) for v in inputs[partition]], f"seed={seed}: output != input"
    pairs = {(p, offset, value) for p, records in outputs.items() for offset, value in records}
    assert seen_all == pairs, f"seed={seed}: the concurrent view differs from the output"


@pytest.mark.parametrize("seed", [11])
def test_the_copier_output_is_its_input_exactly_once_under_kill_9(
    tmp_path: os.PathLike[str], seed: int
) -> None:
    run_copier(os.path.join(tmp_path, "data"), CI_MESSAGES, seed)


@pytest.mark.soak
@pytest.mark.parametrize("seed", [12])
def test_the_copier_output_is_its_input_exactly_once_under_kill_9_soak(
    tmp_path: os.PathLike[str], seed: int
) -> None:
    run_copier(os.path.join(tmp_path, "data"), SOAK_MESSAGES, seed)
