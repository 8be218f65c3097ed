"""Error codes on the wire: each Tablestore code with its HTTP status, and the Error body.

The official SDKs read the status and the protobuf ``Error{code, message}``
and retry the throttling codes (``OTSServerBusy``, ``OTSPartitionUnavailable``,
``OTSRowOperationConflict``, ...) by themselves.
"""

from __future__ import annotations

from ..errors import WidetableError
from .proto import pb

AUTH_FAILED = "OTSAuthFailed"
REQUEST_TOO_LARGE = "OTSRequestBodyTooLarge"
METHOD_NOT_ALLOWED = "OTSMethodNotAllowed"
UNSUPPORTED_OPERATION = "OTSUnsupportOperation"
NO_PERMISSION = "OTSNoPermissionAccess"  # a read-only access key's write or DDL
INTERNAL_ERROR = "OTSInternalServerError"

STATUS = {
    "OTSParameterInvalid": 400,
    "OTSInvalidPK": 400,
    "OTSOutOfColumnCountLimit": 400,
    "OTSOutOfRowSizeLimit": 400,
    "OTSNotSupported": 400,
    "OTSTrimmedDataAccess": 400,
    UNSUPPORTED_OPERATION: 400,
    AUTH_FAILED: 403,
    NO_PERMISSION: 403,
    "OTSConditionCheckFail": 403,
    "OTSObjectNotExist": 404,
    "OTSSessionNotExist": 404,
    METHOD_NOT_ALLOWED: 405,
    "OTSObjectAlreadyExist": 409,
    "OTSRowOperationConflict": 409,
    REQUEST_TOO_LARGE: 413,
    INTERNAL_ERROR: 500,
    "OTSServerBusy": 503,
    "OTSPartitionUnavailable": 503,
    "OTSTimeout": 503,  # a SQL statement past its time limit
}

# Tablestore's own wording for the two errors every SDK user meets.
MESSAGES = {
    "OTSObjectNotExist": "Requested table does not exist.",
    "OTSConditionCheckFail": "Condition check failed.",
}


class ProtocolError(WidetableError):
    """A request the protocol layer rejects before it reaches the library."""


def status_of(code: str) -> int:
    return STATUS.get(code, 500)


def internal_message(request_id: str) -> str:
    """The message of a 500: the request id only. What went wrong is in the server's
    log under that id; an exception's text may carry what a caller must not see."""
    return f"Internal server error; the server's log has it under request id {request_id}."


def error_body(code: str, message: str) -> bytes:
    return pb.Error(code=code, message=message).SerializeToString()


def wire_message(exc: WidetableError) -> str:
    """The message sent for ``exc``: Tablestore's wording where it has one, then our detail."""
    fixed = MESSAGES.get(exc.code)
    message = exc.message
    if fixed is None or message == fixed or not message.startswith(_DETAIL_PREFIXES[exc.code]):
        return message
    detail = message[len(_DETAIL_PREFIXES[exc.code]):].strip(" :")
    return f"{fixed} {detail}" if detail else fixed


# What the library's messages start with, for the codes that have a fixed wording.
_DETAIL_PREFIXES = {"OTSObjectNotExist": "table ", "OTSConditionCheckFail": "Condition check failed"}


def error_message(exc: WidetableError):
    """An ``Error`` message for a per-row result of a batch."""
    return pb.Error(code=exc.code, message=wire_message(exc))
