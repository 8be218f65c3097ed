"""Tablestore's wire protocol over HTTP: the official SDKs work against it unchanged.

* ``http.py``: HTTP/1.1 framing, one asyncio protocol per connection
* ``service.py``: request checks, dispatch (inline or on the pool), signed answers
* ``tables.py``, ``rows.py``, ``batch.py``, ``txn.py``, ``streams.py``: one handler per API
"""
