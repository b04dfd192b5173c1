"""Error codes an older version of an API does not know, and what Kafka answers instead.

PRODUCER_FENCED (90) came with KIP-588: only InitProducerId v4+, AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn v2+ carry it; below those, and in every TxnOffsetCommit (whose
fencing Kafka reports from the log append), a fenced producer gets INVALID_PRODUCER_EPOCH (47),
which every transactional client knows. KafkaJS, on EndTxn v1, reported "Unknown error code 90".
"""

from __future__ import annotations

from typing import Any

from logstore.server import error_codes as ec

NEVER = 1 << 15  # a version no request carries

# api key -> ((code, first version that knows it, what older versions get), ...)
OLDER_CODES: dict[int, tuple[tuple[int, int, int], ...]] = {
    22: ((ec.PRODUCER_FENCED, 4, ec.INVALID_PRODUCER_EPOCH),),  # InitProducerId
    24: ((ec.PRODUCER_FENCED, 2, ec.INVALID_PRODUCER_EPOCH),),  # AddPartitionsToTxn
    25: ((ec.PRODUCER_FENCED, 2, ec.INVALID_PRODUCER_EPOCH),),  # AddOffsetsToTxn
    26: ((ec.PRODUCER_FENCED, 2, ec.INVALID_PRODUCER_EPOCH),),  # EndTxn
    28: ((ec.PRODUCER_FENCED, NEVER, ec.INVALID_PRODUCER_EPOCH),),  # TxnOffsetCommit
    # OffsetCommit: a KIP-848 member's commit at an old member epoch, in a version before KIP-848's
    8: ((ec.STALE_MEMBER_EPOCH, 9, ec.ILLEGAL_GENERATION),),
}


def for_version(api_key: int, version: int, response: Any) -> Any:
    """`response` with every error code `version` of the API does not know replaced by the
    one Kafka answers there (in place; the response is returned)."""
    mapping = {code: older for code, since, older in OLDER_CODES.get(api_key, ()) if version < since}
    if mapping:
        _replace(response, mapping)
    return response


def _replace(message: Any, mapping: dict[int, int]) -> None:
    """Rewrite the error-code fields of `message` and of the structs nested in it."""
    for name in message.fields:
        value = getattr(message, name, None)
        if name.endswith("error_code"):
            setattr(message, name, mapping.get(value, value))
        elif isinstance(value, list):
            for item in value:
                if hasattr(item, "fields"):
                    _replace(item, mapping)
        elif hasattr(value, "fields"):
            _replace(value, mapping)
