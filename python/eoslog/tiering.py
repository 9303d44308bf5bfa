"""Tiered storage inside a running broker (KIP-405's `remote.storage.enable`, docs/design.md
"Tiered storage"): a broker opened with an archive (`eoslog.open(path, archive=URL)`) copies
the archivable segments of its tiered topics there at each maintenance pass, off the append
path (eoslog.archive, reading the directory lock-free as any reader does), then tells each
partition log where the archive ends, so that local retention (`local.retention.ms|bytes`)
deletes only segments the archive holds. A pass that fails (the store unreachable, a hole
refused) is logged and retried at the next pass; retention meanwhile deletes nothing the
archive does not hold."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from eoslog import archive
from eoslog.errors import KafkaException
from eoslog.log.partition import PartitionLog

_log = logging.getLogger(__name__)


def archive_pass(path: str, url: str, logs: Iterable[PartitionLog]) -> None:
    """Archive the tiered topics' segments of the log directory `path` to `url`, then set
    each tiered log's archived_end from the archive's recovery-point checkpoint."""
    tiered = [log for log in logs if log.config.remote_storage_enable]
    if not tiered:
        return
    try:
        archive.archive(path, url, sorted({log.topic for log in tiered}))
        ends = archive.archived_ends(url)
    except (KafkaException, OSError, ValueError) as error:
        _log.warning("archiving %s failed; the next maintenance pass retries: %s", path, error)
        return
    for log in tiered:
        log.archived_end = max(log.archived_end, ends.get((log.topic, log.partition), 0))
