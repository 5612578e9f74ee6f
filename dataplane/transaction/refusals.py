"""How the transaction coordinator refuses a request: the answer clients get (`Answer`,
`FAILED`), the error code as a client of an older API version knows it, and the log lines
that tell operators why — a client only sees the code, so the epochs on both sides and the
likely cause are logged here.
"""

from __future__ import annotations

import logging

from dataplane.protocol.errors import ErrorCode
from dataplane.transaction.state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TransactionMetadata

log = logging.getLogger("rafka.transaction")

Answer = tuple[ErrorCode, int, int]
"""(error, producer id, producer epoch), as InitProducerId and EndTxn answer."""
FAILED = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

_REFUSAL_CAUSES = {
    ErrorCode.producer_fenced: (
        "a newer producer with this transactional.id has initialized, or the coordinator "
        "aborted the transaction after transaction.timeout.ms; this producer is fenced: close "
        "it (a new one with the same transactional.id continues)"
    ),
    ErrorCode.invalid_producer_id_mapping: (
        "the transactional id has another producer id now (a newer producer initialized "
        "after the epochs ran out, or the id expired after transactional.id.expiration.ms); "
        "this producer must initialize again"
    ),
}


def log_refused(
    what: str,
    meta: TransactionMetadata,
    code: ErrorCode,
    producer_id: int,
    producer_epoch: int,
    expected: str,
) -> None:
    """Log a fencing decision with the epochs on both sides: the client only sees the code."""
    log.info(
        "%s of %r refused with %s: the request has producer %d epoch %d; the coordinator has "
        "producer %d epoch %d (previous producer %d, last epoch %d, state %s) and expects %s. "
        "Likely cause: %s",
        what,
        meta.transactional_id,
        code.name.upper(),
        producer_id,
        producer_epoch,
        meta.producer_id,
        meta.producer_epoch,
        meta.previous_producer_id,
        meta.last_producer_epoch,
        meta.state.kafka_name,
        expected,
        _REFUSAL_CAUSES[code],
    )


def illegal_state(meta: TransactionMetadata, what: str) -> Answer:
    """UNKNOWN_SERVER_ERROR for a state the request should never find, logged as the bug it is."""
    log.error(
        "%s: transactional id %r is in state %s (pending %s), which this request should "
        "never find: a coordinator bug",
        what,
        meta.transactional_id,
        meta.state.kafka_name,
        meta.pending_state,
    )
    return (ErrorCode.unknown_server_error, *FAILED)


def for_client_version(code: ErrorCode, version: int, fenced_since: int) -> ErrorCode:
    """PRODUCER_FENCED (KIP-588) as a client of an older API version knows it:
    INVALID_PRODUCER_EPOCH below `fenced_since`, the version that introduced it."""
    if code == ErrorCode.producer_fenced and version < fenced_since:
        return ErrorCode.invalid_producer_epoch
    return code
