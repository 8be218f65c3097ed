"""widetable's own remote client: ``widetable.connect(endpoint, access_key_id=, access_key_secret=)``.

It speaks Tablestore's wire protocol (the server's PlainBuffer and protobuf
code, reused) and gives the embedded API: a RemoteDatabase with the methods
of :class:`widetable.Database`, RemoteTable with those of
:class:`widetable.Table`, and the library's own result and error objects.

* ``database.py``: connect(), RemoteDatabase: catalog, batches, transactions
* ``table.py``: RemoteTable, RemoteTransaction: row reads and writes
* ``transport.py``: signed requests, keep-alive connections, throttling retries
"""

from .database import RemoteDatabase, connect
from .table import RemoteTable, RemoteTransaction

__all__ = ["RemoteDatabase", "RemoteTable", "RemoteTransaction", "connect"]
