"""widetable's error codes <-> gRPC status codes, as Bigtable answers them.

Numbers, not grpc's enum: ``wire/`` imports no grpc (the server and the client adapter
turn them into ``grpc.StatusCode``).
"""

from __future__ import annotations

from ... import errors as E

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
UNAUTHENTICATED = 16

# widetable's code -> the status Bigtable answers for the same failure
STATUS = {
    E.PARAMETER_INVALID: INVALID_ARGUMENT,
    E.INVALID_PK: INVALID_ARGUMENT,
    E.OUT_OF_COLUMN_COUNT_LIMIT: INVALID_ARGUMENT,
    E.OUT_OF_ROW_SIZE_LIMIT: INVALID_ARGUMENT,
    E.OBJECT_NOT_EXIST: NOT_FOUND,
    E.OBJECT_ALREADY_EXIST: ALREADY_EXISTS,
    E.CONDITION_CHECK_FAIL: FAILED_PRECONDITION,
    E.SERVER_BUSY: RESOURCE_EXHAUSTED,  # throttled
    E.PARTITION_UNAVAILABLE: UNAVAILABLE,  # a split or merge: retried by the client
    E.SERVER_UNAVAILABLE: UNAVAILABLE,
    E.ROW_OPERATION_CONFLICT: ABORTED,
    E.NOT_SUPPORTED: UNIMPLEMENTED,
    E.INTERNAL_SERVER_ERROR: INTERNAL,
}

# a status a client receives -> the widetable error it raises
ERRORS = {
    INVALID_ARGUMENT: E.ParameterInvalid,
    OUT_OF_RANGE: E.ParameterInvalid,
    NOT_FOUND: E.ObjectNotExist,
    ALREADY_EXISTS: E.ObjectAlreadyExist,
    FAILED_PRECONDITION: E.ConditionCheckFail,
    RESOURCE_EXHAUSTED: E.ServerBusy,
    UNAVAILABLE: E.PartitionUnavailable,
    UNIMPLEMENTED: E.NotSupported,
    ABORTED: E.RowOperationConflict,
}


def status_of(err: E.WidetableError) -> int:
    """The gRPC status code for ``err``."""
    return STATUS.get(err.code, INTERNAL)


def error_of(code: int, message: str) -> E.WidetableError:
    """The widetable error a client raises for a status ``code`` with ``message``."""
    cls = ERRORS.get(code)
    if cls is None:
        return E.WidetableError(f"gRPC status {code}: {message}")
    return cls(message)


__all__ = ["ERRORS", "STATUS", "error_of", "status_of"]
