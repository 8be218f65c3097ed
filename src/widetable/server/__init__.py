"""``widetable serve``: the store over HTTP, speaking Tablestore's wire protocol.

The official Tablestore SDKs work against it unchanged, and
``widetable.connect`` (``widetable.client``) gives the embedded API remotely.

* ``app.py``: the server: event loop, worker pool, idle connections, graceful drain
* ``http.py``: HTTP/1.1 framing, one asyncio protocol per connection
* ``service.py``: request checks, dispatch (inline or on the pool), signed answers
* ``auth.py``: V2 / V4 request signatures, response signatures, access keys
* ``tables.py``, ``rows.py``, ``batch.py``, ``txn.py``: one handler per API
* ``convert.py``: protocol values <-> library values, capacity units
* ``plainbuffer.py``: the PlainBuffer row encoding, both directions
* ``rowshape.py``: rows of a learned layout encoded and decoded in one step each
* ``proto/``: Tablestore's .proto files and their compiled descriptors
"""

from .app import DEFAULT_INSTANCE, MAX_BODY, WidetableServer
from .auth import KeyStore, load_keys

__all__ = ["DEFAULT_INSTANCE", "MAX_BODY", "KeyStore", "WidetableServer", "load_keys"]
