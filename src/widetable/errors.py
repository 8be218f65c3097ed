"""One error root for widetable, carrying Tablestore's error codes.

Every public operation raises :class:`WidetableError` (or a subclass) on bad
input or a failed precondition. The message names the offending value, and a
rejected request changes nothing.
"""

from __future__ import annotations

# Tablestore error codes, as the official SDKs expose them.
PARAMETER_INVALID = "OTSParameterInvalid"
INVALID_PK = "OTSInvalidPK"
OBJECT_NOT_EXIST = "OTSObjectNotExist"
OBJECT_ALREADY_EXIST = "OTSObjectAlreadyExist"
CONDITION_CHECK_FAIL = "OTSConditionCheckFail"
OUT_OF_COLUMN_COUNT_LIMIT = "OTSOutOfColumnCountLimit"
OUT_OF_ROW_SIZE_LIMIT = "OTSOutOfRowSizeLimit"
SERVER_BUSY = "OTSServerBusy"
PARTITION_UNAVAILABLE = "OTSPartitionUnavailable"
ROW_OPERATION_CONFLICT = "OTSRowOperationConflict"
SESSION_NOT_EXIST = "OTSSessionNotExist"
INTERNAL_SERVER_ERROR = "OTSInternalServerError"
SERVER_UNAVAILABLE = "OTSServerUnavailable"
NOT_SUPPORTED = "OTSNotSupported"
TRIMMED_DATA_ACCESS = "OTSTrimmedDataAccess"
# widetable's own code, never sent by a server: widetable.connect lost the connection after
# a call that is not idempotent may have reached the server (see OutcomeUnknown).
OUTCOME_UNKNOWN = "WidetableOutcomeUnknown"


class WidetableError(Exception):
    """The root of every widetable error. ``code`` is a Tablestore error code."""

    code: str = INTERNAL_SERVER_ERROR

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __reduce__(self):  # keep code and message across pickling (process pools)
        return (type(self), (self.message, self.code))


class ParameterInvalid(WidetableError):
    code = PARAMETER_INVALID


class InvalidPK(WidetableError):
    code = INVALID_PK


class PrimaryKeyTooLong(ParameterInvalid, InvalidPK):
    """A primary-key value over 1 KB. Tablestore answers it ``OTSParameterInvalid`` ("The
    length of primary key column: 'k' exceeds the MaxLength:1024 with CurrentLength:1025."),
    so that is its code; it is still an :class:`InvalidPK` to code that catches keys which
    cannot be encoded (an index entry skipped, a row that predates an index)."""

    code = PARAMETER_INVALID


class ObjectNotExist(WidetableError):
    code = OBJECT_NOT_EXIST


class ObjectAlreadyExist(WidetableError):
    code = OBJECT_ALREADY_EXIST


class ConditionCheckFail(WidetableError):
    code = CONDITION_CHECK_FAIL

    def __init__(self, message: str = "Condition check failed.", code: str | None = None) -> None:
        super().__init__(message, code)


class OutOfColumnCountLimit(WidetableError):
    code = OUT_OF_COLUMN_COUNT_LIMIT


class OutOfRowSizeLimit(WidetableError):
    code = OUT_OF_ROW_SIZE_LIMIT


class ServerBusy(WidetableError):
    code = SERVER_BUSY


class PartitionUnavailable(WidetableError):
    """The partition is being split or merged; retry shortly."""

    code = PARTITION_UNAVAILABLE


class StorageError(WidetableError):
    """The storage engine failed. ``kind`` says how, and picks the code:

    * ``"closed"``: the store is closed (``OTSServerUnavailable``);
    * ``"busy"``: the engine asks to try again (RocksDB Busy, TryAgain, TimedOut;
      ``OTSServerBusy``, which retriers retry);
    * ``"io"``: reading or writing the disk failed (RocksDB IO error, such as a full
      disk; ``OTSInternalServerError``);
    * ``"corruption"``: stored data failed its checks (``OTSInternalServerError``);
    * ``"other"``: any other engine error (``OTSInternalServerError``).
    """

    CODES = {"closed": SERVER_UNAVAILABLE, "busy": SERVER_BUSY, "io": INTERNAL_SERVER_ERROR,
             "corruption": INTERNAL_SERVER_ERROR, "other": INTERNAL_SERVER_ERROR}

    def __init__(self, message: str, code: str | None = None, kind: str = "other") -> None:
        super().__init__(message, code or self.CODES.get(kind, INTERNAL_SERVER_ERROR))
        self.kind = kind

    def __reduce__(self):
        return (type(self), (self.message, self.code, self.kind))


class RowOperationConflict(WidetableError):
    code = ROW_OPERATION_CONFLICT


class SessionNotExist(WidetableError):
    """A local transaction that is unknown, or already committed, aborted or timed out."""

    code = SESSION_NOT_EXIST


class NotSupported(WidetableError):
    code = NOT_SUPPORTED


class TrimmedDataAccess(WidetableError):
    """A stream iterator whose next records were dropped from the change log (retention):
    start again from TRIM_HORIZON, knowing that records were missed."""

    code = TRIMMED_DATA_ACCESS


class OutcomeUnknown(WidetableError):
    """widetable.connect lost the connection after sending a call that is not idempotent
    (an increment, an auto-increment put, a conditional write, a commit, DDL, ...): the
    server may have applied it before the connection dropped, or not. The client does
    not send such a call again, since a second run could double an increment, add a
    row or fail a condition the first run met; read the data to learn what happened.
    Calls that are idempotent, and calls that provably never left the client, are sent
    again on a fresh connection instead."""

    code = OUTCOME_UNKNOWN


def describe(value: object, limit: int = 64) -> str:
    """A short printable form of ``value`` for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
