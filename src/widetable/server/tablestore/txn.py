"""Local transaction APIs: StartLocalTransaction, CommitTransaction, AbortTransaction.

Reads and writes join a transaction through the ``transaction_id`` field of
the row APIs (see rows.py) and of BatchWriteRow (see batch.py).
"""

from __future__ import annotations

from ...db import Database
from ...errors import ParameterInvalid
from ...wire import plainbuffer
from ...wire.proto import pb


def start_local_transaction(db: Database, req) -> object:
    table = db.table(req.table_name)
    key = plainbuffer.decode_row(req.key).primary_key
    first = table._names[0]
    if len(key) != 1 or key[0][0] != first:
        raise ParameterInvalid(
            f"a transaction key names the partition key {first!r} only, got {[n for n, _ in key]}"
        )
    txn = db.start_local_transaction(req.table_name, key[0][1])
    return pb.StartLocalTransactionResponse(transaction_id=txn.transaction_id)


def commit_transaction(db: Database, req) -> object:
    db.commit_transaction(req.transaction_id)
    return pb.CommitTransactionResponse()


def abort_transaction(db: Database, req) -> object:
    db.abort_transaction(req.transaction_id)
    return pb.AbortTransactionResponse()
