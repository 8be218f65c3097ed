"""Which calls widetable.connect may send again after a connection drops mid-call.

A call that may have reached the server is sent again only if running it twice
leaves the store as running it once: reads, and blind writes (puts and deletes,
and updates that only put or delete columns) with no condition, no increment and
no auto-increment key. Every other call (a conditional write, an increment, an
auto-increment put, a batch holding any of these, a commit, an abort, DDL, the
start of a transaction) that loses its connection after it was sent raises
``OutcomeUnknown`` instead (``errors.OUTCOME_UNKNOWN``). A call that provably
never left the client (its connection was seen closed before the send, or the
send itself failed, so the server never had the whole request) is sent again
whatever it is.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import OutcomeUnknown
from ..table.filters import as_condition
from ..table.schema import AUTO_INCREMENT

# Tablestore APIs that change nothing, or set what they set however often they run.
IDEMPOTENT_APIS = frozenset({
    "GetRow", "GetRange", "BatchGetRow", "ListTable", "DescribeTable", "UpdateTable",
    "ListStream", "DescribeStream", "GetShardIterator", "GetStreamRecord",
    "ComputeSplitPointsBySize", "ListSearchIndex", "DescribeSearchIndex",
})


def blind(condition: object) -> bool:
    """Whether ``condition`` checks nothing (None, IGNORE without a column condition)."""
    try:
        cond = as_condition(condition)
    except Exception:  # noqa: BLE001 - the call itself refuses it; never resend a guess
        return False
    return cond is None or not cond.needs_row


def _auto(pk: object) -> bool:
    values = pk.values() if isinstance(pk, Mapping) else pk
    if isinstance(values, (str, bytes, int)):
        return False
    try:
        return any(v is AUTO_INCREMENT or (isinstance(v, tuple) and len(v) == 2
                                           and v[1] is AUTO_INCREMENT) for v in values)
    except TypeError:
        return pk is AUTO_INCREMENT


def write(op: str, pk: object, payload: object, condition: object) -> bool:
    """Whether one row write (``put``, ``update``, ``delete``) may run twice."""
    if condition is not None and not blind(condition):
        return False
    if op == "put":
        if type(pk) is tuple:  # the usual key: its values (no (name, value) pairs)
            return AUTO_INCREMENT not in pk
        return not _auto(pk)
    if op == "update":
        return not (isinstance(payload, Mapping) and payload.get("increment"))
    return op == "delete"


def batch(requests: object) -> bool:
    """Whether every row of a batch_write_row may run twice."""
    if not isinstance(requests, (list, tuple)):
        return False
    for item in requests:
        if not isinstance(item, (list, tuple)) or len(item) < 3:
            return False
        payload = item[3] if len(item) > 3 else None
        if not write(item[1], item[2], payload, item[4] if len(item) > 4 else None):
            return False
    return True


def outcome_unknown(api: str, endpoint: str, what: str) -> OutcomeUnknown:
    return OutcomeUnknown(
        f"{api}: {what} after the request was sent to {endpoint}; the server may or may "
        "not have applied it, and the call is not idempotent, so it was not sent again. "
        "Read the data to find out what happened.")
