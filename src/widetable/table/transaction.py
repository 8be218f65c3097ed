"""Local transactions: atomic reads and writes of the rows that share one partition-key value.

``db.start_local_transaction(table, value)`` returns a :class:`LocalTransaction`
holding the lock of one partition-key value (the first primary-key column) of
one table, as Tablestore's StartLocalTransaction does:

* **Writes are buffered.** Each write runs, at the time of the call, against
  the committed row plus the transaction's own earlier writes: conditions are
  checked and increments computed then. The resulting row is kept in memory.
  ``commit()`` writes every buffered row in one engine batch, so the
  transaction lands whole or not at all; ``abort()`` drops the buffer.
* **Read committed.** Reads in the transaction see committed data plus its own
  writes; everyone else sees committed data only, and reads never wait.
* **Pessimistic locking.** While the transaction is open, other writers to the
  same partition-key value wait up to ``conflict_wait`` seconds (50 ms) for it
  to end, then fail with ``OTSRowOperationConflict``; so does a second
  transaction on that value.
* **Timeout.** A transaction idle for ``timeout`` seconds (60, as in
  Tablestore) is aborted; using it afterwards raises ``OTSSessionNotExist``.

The transaction runs Table's own code for every operation, on a copy of the
Table whose engine is an overlay: reads merge the buffer over the engine, and
writes go to the buffer.

Writers see a lock through ``TransactionRegistry.check``, called under the
row's lock when any transaction is open. A new transaction passes through
every row-lock stripe once after registering, so a writer that missed the
registration has finished before the transaction's first read.
"""

from __future__ import annotations

import copy
import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Self

from ..errors import (
    ParameterInvalid,
    RowOperationConflict,
    SessionNotExist,
    WidetableError,
    describe,
)
from ..keys import codec
from .row import RangeResult, Row, WriteResult
from .table import scan_partition

if TYPE_CHECKING:
    from ..context import StoreContext
    from .table import Table

DEFAULT_TIMEOUT = 60.0  # seconds idle, as in Tablestore
DEFAULT_CONFLICT_WAIT = 0.05  # seconds a plain writer waits for a transaction to end
MAX_TIMEOUT = 86_400  # seconds idle a transaction may be given: a day


def _slot_value(value: object) -> object:
    """A partition-key value as the lock table holds it: bytes-like values as bytes
    (hashable, and equal to the same key given as bytes)."""
    return bytes(value) if isinstance(value, (bytearray, memoryview)) else value  # type: ignore[arg-type]

ACTIVE, COMMITTED, ABORTED, TIMED_OUT = "active", "committed", "aborted", "timed out"


_TXN_ID = re.compile(r"[0-9A-F]{32}")  # uuid4().hex.upper(): what start() hands out


class TransactionRegistry:
    """The open transactions of one Database and the partition-key values they lock."""

    def __init__(self, ctx: StoreContext) -> None:
        self._row_locks = ctx.row_locks
        # (Table, partition-key value) -> its transaction. Writers test it for
        # emptiness on every write, so it holds open transactions only.
        self.locks: dict[tuple[Table, object], LocalTransaction] = {}
        self._by_id: dict[str, LocalTransaction] = {}
        self._cond = threading.Condition(threading.Lock())
        self._reaper: threading.Thread | None = None
        self._closed = False
        self.conflict_wait = DEFAULT_CONFLICT_WAIT

    # -- transactions ---------------------------------------------------------

    def start(self, table: Table, value: object, timeout: float) -> LocalTransaction:
        if type(timeout) not in (int, float) or not 0 < timeout <= MAX_TIMEOUT:
            raise ParameterInvalid(
                f"timeout must be seconds > 0 and at most {MAX_TIMEOUT}, got {describe(timeout)}")
        if table.schema.auto_increment:
            raise ParameterInvalid(
                f"table {table.name!r} has an auto-increment column; as in Tablestore, local "
                "transactions and auto-increment cannot be used together"
            )
        schema = table.schema
        value = _slot_value(value)
        element = codec.encode_element(value, schema.pk_types[0], schema.pk_names[0])  # type: ignore[arg-type]
        slot = (table, value)
        with self._cond:
            self._wait_free(slot, f"start a transaction on partition key {describe(value)}")
            txn = LocalTransaction(self, table, value, table._prefix + element, float(timeout))
            self.locks[slot] = txn
            self._by_id[txn.transaction_id] = txn
            if self._reaper is None:
                self._reaper = threading.Thread(
                    target=self._reap_loop, name="widetable-txn-reaper", daemon=True
                )
                self._reaper.start()
        # A writer that checked the lock table before we registered holds its
        # row's stripe until its write is done: wait for every such writer.
        self._row_locks.barrier()
        return txn

    def get(self, transaction_id: object) -> LocalTransaction:
        """The open transaction ``transaction_id``; ``OTSSessionNotExist`` if there is none,
        ``OTSParameterInvalid`` ("TransactionID is invalid.", as the service answers) if it
        is not a transaction id at all (32 upper-case hex digits, as this store makes them)."""
        if not (isinstance(transaction_id, str) and _TXN_ID.fullmatch(transaction_id)):
            raise ParameterInvalid(
                f"TransactionID is invalid. {describe(transaction_id)} is not a transaction id "
                "(32 hexadecimal digits)")
        with self._cond:
            txn = self._by_id.get(transaction_id) if isinstance(transaction_id, str) else None
        if txn is None:
            raise SessionNotExist(
                f"transaction {describe(transaction_id)} does not exist: it was never started, "
                "or was committed, aborted or timed out"
            )
        return txn

    def release(self, txn: LocalTransaction) -> None:
        """Unlock ``txn``'s partition-key value and wake writers waiting for it."""
        with self._cond:
            self._release_locked(txn)

    def _release_locked(self, txn: LocalTransaction) -> None:
        if self.locks.get(txn._slot) is txn:
            del self.locks[txn._slot]
        self._by_id.pop(txn.transaction_id, None)
        self._cond.notify_all()

    def close(self) -> None:
        """Abort every open transaction and stop the reaper (the database is closing).

        Each transaction is ended under its own lock, so a commit running now finishes
        first (its rows, change records and index entries in one batch), and none
        starts after: nothing is cleared under a commit."""
        with self._cond:
            self._closed = True
            txns = list(self._by_id.values())
        for txn in txns:
            # Not under _cond: a commit that holds txn's lock takes _cond to release.
            if txn._lock.acquire(timeout=max(txn.timeout, 5.0)):
                try:
                    if txn.state == ACTIVE:
                        txn._end(ABORTED, "the database was closed")
                finally:
                    txn._lock.release()
            # else: a call stuck in it still runs; it meets the closed store when it writes.
            self.release(txn)
        reaper = self._reaper
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join(timeout=5)

    # -- writers ----------------------------------------------------------------

    def wait_for(self, table: Table, value: object) -> None:
        """Wait (up to ``conflict_wait``) until no transaction holds ``value`` of ``table``.

        Plain writers call this before taking the row's lock, and only while
        some transaction is open. Raises ``OTSRowOperationConflict`` on timeout,
        and the table's own error if it was dropped (or its store closed).
        """
        if table._unusable:
            table._check_open()
        value = _slot_value(value)
        slot = (table, value)
        if slot not in self.locks:
            return
        with self._cond:
            self._wait_free(slot, f"write partition key {describe(value)}")

    def check(self, table: Table, value: object) -> None:
        """Raise ``OTSRowOperationConflict`` if a transaction holds ``value`` of ``table``.

        Plain writers call this under the row's lock, so a transaction that
        starts later waits for their write (see ``start``).
        """
        if table._unusable:
            table._check_open()
        value = _slot_value(value)
        owner = self.locks.get((table, value))
        if owner is None:
            return
        with self._cond:
            if self._reap_if_expired(owner):
                return
        raise _conflict(owner, f"write partition key {describe(value)}")

    def _wait_free(self, slot: tuple, what: str) -> None:
        """Under ``_cond``: wait until ``slot`` is free, or raise RowOperationConflict."""
        deadline = time.monotonic() + self.conflict_wait
        while True:
            owner = self.locks.get(slot)
            if owner is None or self._reap_if_expired(owner):
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _conflict(owner, what)
            self._cond.wait(min(remaining, max(owner._deadline - time.monotonic(), 0.001)))

    # -- timeouts ---------------------------------------------------------------

    def _reap_if_expired(self, txn: LocalTransaction) -> bool:
        """Under ``_cond``: abort ``txn`` if it is idle past its timeout; True if it ended."""
        if txn.state != ACTIVE:
            self._release_locked(txn)
            return True
        if time.monotonic() < txn._deadline or not txn._lock.acquire(blocking=False):
            return False  # not idle long enough, or busy in an operation right now
        try:
            if time.monotonic() < txn._deadline:
                return False
            txn._end(TIMED_OUT, f"it was idle for more than {txn.timeout:g} s")
        finally:
            txn._lock.release()
        self._release_locked(txn)
        return True

    def _reap_loop(self) -> None:
        with self._cond:
            while not self._closed and self._by_id:
                for txn in list(self._by_id.values()):
                    self._reap_if_expired(txn)
                if not self._by_id:
                    break
                wake = min(t._deadline for t in self._by_id.values()) - time.monotonic()
                self._cond.wait(min(max(wake, 0.005), 1.0))
            self._reaper = None


def _conflict(owner: LocalTransaction, what: str) -> RowOperationConflict:
    return RowOperationConflict(
        f"cannot {what} of table {owner.table.name!r}: transaction {owner.transaction_id} holds it"
    )


class _Overlay:
    """An engine view for one transaction: its buffered rows over the committed ones."""

    def __init__(self, engine, writes: dict[bytes, bytes | None], lo: bytes, hi: bytes) -> None:
        self._engine = engine
        self._writes = writes
        self._lo, self._hi = lo, hi  # the partition's keys: [lo, hi)

    def get(self, key: bytes) -> bytes | None:
        writes = self._writes
        return writes[key] if key in writes else self._engine.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self._writes[key] = value

    def delete(self, key: bytes) -> None:
        self._writes[key] = None

    def scan(self, start: bytes, end: bytes, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """Merge committed rows and buffered ones in ``[start, end)``; buffered win, None hides."""
        start, end = max(start, self._lo), min(end, self._hi)
        if start >= end:
            return
        mine = sorted(((k, v) for k, v in self._writes.items() if start <= k < end), reverse=reverse)
        before = (lambda a, b: a > b) if reverse else (lambda a, b: a < b)
        i = 0
        for key, blob in self._engine.scan(start, end, reverse):
            while i < len(mine) and before(mine[i][0], key):
                if mine[i][1] is not None:
                    yield mine[i]  # type: ignore[misc]
                i += 1
            if i < len(mine) and mine[i][0] == key:
                if mine[i][1] is not None:
                    yield mine[i]  # type: ignore[misc]
                i += 1
                continue
            yield key, blob
        for key, value in mine[i:]:
            if value is not None:
                yield key, value

    def values(self, start: bytes, end: bytes) -> Iterator[bytes]:
        return (value for _, value in self.scan(start, end))


class LocalTransaction:
    """A transaction on one partition-key value of one table. Not shared between threads.

    Row operations take the same arguments as :class:`Table`'s, and every
    primary key must carry the transaction's partition-key value
    (``OTSParameterInvalid`` otherwise). Use it as a context manager to commit
    on success and abort on an exception.
    """

    def __init__(self, registry: TransactionRegistry, table: Table, value: object,
                 prefix: bytes, timeout: float) -> None:
        self.transaction_id = uuid.uuid4().hex.upper()
        self.table = table
        self.partition_key = value
        self.timeout = timeout
        self.state = ACTIVE
        self._registry = registry
        self._slot = (table, value)
        self._writes: dict[bytes, bytes | None] = {}
        self._overlay = _Overlay(table._engine, self._writes, prefix, codec.prefix_end(prefix))
        self._reason = ""
        self._lock = threading.Lock()
        self._deadline = time.monotonic() + timeout

    def __repr__(self) -> str:
        return (f"<LocalTransaction {self.transaction_id} {self.table.name!r} "
                f"{describe(self.partition_key)} {self.state}>")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.state != ACTIVE:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    # -- reads ------------------------------------------------------------------

    def get_row(self, pk: object, columns: list[str] | None = None, max_versions: int | None = None,
                time_range: object = None, filter: object = None) -> Row | None:
        """``Table.get_row``, seeing this transaction's writes."""
        with self._operation():
            return self._view().get_row(self._pk(pk), columns, max_versions, time_range, filter)

    def get_range(self, start: object, end: object, direction: str = "forward",
                  limit: int | None = None, columns: list[str] | None = None,
                  max_versions: int | None = None, time_range: object = None,
                  filter: object = None) -> RangeResult:
        """``Table.get_range`` within the partition key, seeing this transaction's writes.

        Both bounds must start with the partition-key value.
        """
        with self._operation():
            for bound in (start, end):
                self._check_value(_first(bound, self.table._names[0]), bound)
            return self._view().get_range(
                start, end, direction, limit, columns, max_versions, time_range, filter
            )

    def scan(self, direction: str = "forward", **options) -> Iterator[Row]:
        """Every row of the partition key (with this transaction's writes), page by page."""
        return scan_partition(self, self.table._names, self.partition_key, direction, **options)

    # -- writes (buffered until commit) -----------------------------------------

    def put_row(self, pk: object, columns: object = None, condition: object = None) -> WriteResult:
        """``Table.put_row``, buffered; the condition is checked now."""
        with self._operation():
            return self._view().put_row(self._pk(pk), columns, condition)

    def update_row(self, pk: object, put: object = None, delete_version: object = None,
                   delete_column: object = None, increment: object = None,
                   condition: object = None) -> WriteResult:
        """``Table.update_row``, buffered; the condition and increments are evaluated now."""
        with self._operation():
            return self._view().update_row(
                self._pk(pk), put, delete_version, delete_column, increment, condition
            )

    def delete_row(self, pk: object, condition: object = None) -> WriteResult:
        """``Table.delete_row``, buffered; the condition is checked now."""
        with self._operation():
            return self._view().delete_row(self._pk(pk), condition)

    # -- end --------------------------------------------------------------------

    def commit(self) -> None:
        """Write every buffered row in one atomic engine batch, then unlock.

        Raises ``OTSSessionNotExist`` if the transaction already ended. If the
        write fails, nothing is written and the transaction is aborted.
        """
        with self._operation(end=True):
            try:
                if self._writes:
                    self._write()
                self._end(COMMITTED, "it was committed")
            except BaseException:
                self._end(ABORTED, "its commit failed")
                raise
            finally:
                self._registry.release(self)

    def abort(self) -> None:
        """Drop every buffered write and unlock. Raises ``OTSSessionNotExist`` if already ended."""
        with self._operation(end=True):
            self._end(ABORTED, "it was aborted")
            self._registry.release(self)

    def _write(self) -> None:
        table = self.table
        table._check_open()
        ctx = table._ctx
        engine = ctx.engine
        batch = engine.batch()
        writes = list(self._writes.items())  # one snapshot: the batch and the feed see the same rows
        for key, blob in writes:
            if blob is None:
                batch.delete(key)
            else:
                batch.put(key, blob)
        # Row locks keep the purge thread from rewriting a row under the commit.
        locks = ctx.row_locks.acquire([k for k, _ in writes])
        try:
            if table._unusable:  # dropped since the check above: see Catalog.delete_table
                table._check_open()
            feed = table._changes  # a stream or an index: records and entries join the batch
            if feed is None:
                engine.write(batch)
            else:
                feed.commit_rows(batch, writes)
        finally:
            ctx.row_locks.release(locks)

    def _end(self, state: str, reason: str) -> None:
        self.state = state
        self._reason = reason
        self._writes.clear()

    # -- helpers ----------------------------------------------------------------

    def _operation(self, end: bool = False) -> _Operation:
        return _Operation(self, end)

    def _view(self) -> Table:
        """A copy of the table that reads through the overlay and writes into it."""
        view = copy.copy(self.table)
        view._engine = self._overlay  # type: ignore[assignment]
        view._get = self._overlay.get  # type: ignore[method-assign]
        view._txn_locks = {}  # this transaction holds the lock; nothing to check
        view._changes = None  # change capture happens once, at commit
        return view

    def _pk(self, pk: object) -> tuple:
        values = self.table.normalize_pk(pk)
        if values:
            self._check_value(values[0], pk)
        return values

    def _check_value(self, first: object, what: object) -> None:
        value = self.partition_key
        first = _slot_value(first)
        if type(first) is not type(value) or first != value:
            raise ParameterInvalid(
                f"{describe(what)} is outside transaction {self.transaction_id}: its partition key "
                f"{describe(first)} is not {describe(value)}"
            )


class _Operation:
    """Runs one transaction call: checks it is open and not timed out, then re-arms the timeout."""

    __slots__ = ("_end", "_txn")

    def __init__(self, txn: LocalTransaction, end: bool) -> None:
        self._txn = txn
        self._end = end

    def __enter__(self) -> None:
        txn = self._txn
        if not txn._lock.acquire(timeout=txn.timeout):
            raise RowOperationConflict(f"transaction {txn.transaction_id} is busy in another call")
        try:
            if txn.state == ACTIVE and time.monotonic() >= txn._deadline:
                txn._end(TIMED_OUT, f"it was idle for more than {txn.timeout:g} s")
                txn._registry.release(txn)
            if txn.state != ACTIVE:
                raise SessionNotExist(
                    f"transaction {txn.transaction_id} has ended ({txn.state}): {txn._reason}"
                )
        except WidetableError:
            txn._lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        txn = self._txn
        if not self._end:
            txn._deadline = time.monotonic() + txn.timeout
        txn._lock.release()


def _first(bound: object, name: str) -> object:
    """The partition-key column of a range bound in any of the forms get_range accepts."""
    if isinstance(bound, Mapping):
        return bound.get(name, codec.INF_MIN)
    if isinstance(bound, (tuple, list)):
        return bound[0] if bound else codec.INF_MIN
    return bound
