"""Library calls that more than one protocol makes the same way: a row call's target
(a table, or a transaction on it), and a batch's rows written through a transaction.

Here, not in a protocol package, because two protocols never import each other."""

from __future__ import annotations

from ...db import Database
from ...errors import ParameterInvalid, SessionNotExist, WidetableError
from ...table.row import WriteResult


def target(db: Database, table_name: str, transaction_id: str):
    """``(table, reader/writer)``: the transaction if one is named, else the table."""
    table = db.table(table_name)
    if not transaction_id:
        return table, table
    txn = db.transaction(transaction_id)
    if txn.table is not table:
        raise ParameterInvalid(
            f"transaction {transaction_id} is on table {txn.table.name!r}, not {table_name!r}"
        )
    return table, txn


def write_target(db: Database, table_name: str, transaction_id: str):
    """``target`` of a write. The store refuses every write to an index before it looks
    at the row (``IndexTable``), so this refuses it before the row's key is decoded: a
    key that does not fit the index is refused as any other write to it."""
    table, writer = target(db, table_name, transaction_id)
    if table.read_only:
        raise table.write_refused()
    return table, writer


def in_transaction(db: Database, transaction_id: str, requests: list) -> list:
    """Each row through the transaction's own writes, in order. A row fails as the same
    row call in the transaction would (``target``): a table that does not exist is
    OTSObjectNotExist (as it is outside a transaction too), another table
    OTSParameterInvalid.

    A transaction that ends under the batch (it was idle past its timeout, and nothing
    had reaped it yet) fails the whole batch with OTSSessionNotExist, as one already
    reaped does: its buffered writes, those of this batch's earlier rows too, are gone."""
    txn = db.transaction(transaction_id)
    out: list[tuple[WriteResult | None, WidetableError | None]] = []
    for name, op, key, payload, cond in requests:
        try:
            db.table(name)
            if name != txn.table.name:
                raise ParameterInvalid(
                    f"transaction {transaction_id} is on table {txn.table.name!r}, not {name!r}"
                )
            if op == "put":
                result = txn.put_row(key, payload, cond)
            elif op == "delete":
                result = txn.delete_row(key, cond)
            else:
                result = txn.update_row(key, condition=cond, **payload)  # type: ignore[arg-type]
            out.append((result, None))
        except SessionNotExist:
            raise
        except WidetableError as exc:
            out.append((None, exc))
    return out
