"""``widetable serve``: the store over the network.

The official Tablestore SDKs work against it unchanged, and
``widetable.connect`` (``widetable.client``) gives the embedded API remotely.

* ``app.py``: :class:`WidetableServer`: puts the core and the protocols together
* ``core/``: listener, connections, where a request runs (inline or on the pool),
  drain, access keys: what every protocol shares
* ``tablestore/``: Tablestore's HTTP protocol, one handler per API
* ``native/``: widetable's own frames, on an upgraded HTTP connection

The codecs the client shares (PlainBuffer, rowshape, native frames, signatures,
protocol conversions, the vendored protobuf pool) are in ``widetable.wire``. Two
protocol packages never import each other.
"""

from .app import DEFAULT_INSTANCE, MAX_BODY, WidetableServer
from .core.auth import KeyStore, load_keys

__all__ = ["DEFAULT_INSTANCE", "MAX_BODY", "KeyStore", "WidetableServer", "load_keys"]
