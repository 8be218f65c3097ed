"""A fuzzer of both of ``widetable serve``'s protocols (``python -m bench.fuzz``).

It sends malformed requests -- Tablestore's HTTP protocol (headers, framing,
protobuf bodies, PlainBuffer rows, filters) and widetable's native frames
(lengths, MessagePack, argument types) -- to a fresh server while valid clients
keep using it, and checks four properties:

* the server never crashes: its process stays up, exits 0 on SIGTERM, and its
  log holds no traceback or error line;
* every answer is a well-formed error of the protocol: an HTTP 4xx (505 for an
  HTTP version it does not speak) whose body is an ``Error`` with an ``OTS``
  code, or a native ``[1, code, message]``; never a 500, never
  ``OTSInternalServerError``, never exception text; never a hang;
* nothing is written: a raw dump of every key before and after the run differs
  only where an accepted request could have written (a mutation may be valid by
  chance; such writes are recorded and their rows checked one by one, and
  mutations that must be rejected are flagged if accepted, among them every
  write sent with the read-only key the server is given);
* valid clients (the official SDK and ``widetable.connect``) are served during
  and after the run, and read back what they wrote.

The seeds are recorded from real clients (``record.py``); the cases are their
mutations (``mutate.py``), sent over plain sockets (``wire.py``), which know the
protocols from their definitions and import nothing of widetable's server, so
the fuzzer keeps working however the server's code is laid out. ``run.py``
judges the answers and checks the store (``store.py``).
"""
