"""The codecs the client and the server share; nothing here opens a store or a socket.

* ``proto/``: Tablestore's .proto files, their compiled descriptors, a private pool
* ``plainbuffer.py``: the PlainBuffer row encoding, both directions
* ``rowshape.py``: rows of a learned layout encoded and decoded in one step each
* ``convert.py``: protocol values <-> library values, filters, capacity units
* ``signing.py``: V2 / V4 request signatures, response signatures, content MD5
* ``errors.py``: Tablestore's codes with their HTTP status, and its wording
* ``native.py``: widetable's own protocol: frames, calls, MessagePack both ways
* ``busypoll.py``: the busy-poll window of a loop (the server's and the client's)
"""
