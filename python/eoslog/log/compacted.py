"""What a compacted topic (cleanup.policy with "compact") asks of an append: every record
has a key, since the cleaner keeps the latest record per key and a record without one has
nothing to be kept by (Kafka's LogValidator.validateKey)."""

from __future__ import annotations

import numpy as np
from typing_extensions import Buffer

from eoslog.errors import InvalidRecordError
from eoslog.record import codec


def check_keyed(batch: Buffer, topic: str, partition: int) -> None:
    """Raise InvalidRecordError (Kafka's INVALID_RECORD, which refuses the whole batch) when
    a record of the client batch `batch`, already validated, has a null key. The records are
    decoded natively into columns (no Python object per record); only the key validity
    bitmap is read. Changes nothing."""
    columns = codec.decode_columns(batch, verify_crc=False)
    count = columns.count
    present = np.unpackbits(columns.key_validity, bitorder="little", count=count)
    if count and not present.all():
        raise InvalidRecordError(
            "Compacted topic cannot accept message without key in topic partition "
            f"{topic}-{partition}."
        )
