"""What every Bigtable RPC shares: resource names, status answers, the shared token, and
the registration of handlers as gRPC generic handlers.

Requests arrive as bytes and are parsed here (not by grpc's deserializer), so that a
malformed message is answered INVALID_ARGUMENT naming the message, not INTERNAL.
A ``WidetableError`` leaves as the status Bigtable gives the same failure
(``wire/bigtable/errors.py``); anything else is INTERNAL and logged.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable

import grpc
from google.protobuf.message import DecodeError

from ...errors import NotSupported, ParameterInvalid, WidetableError, describe
from ...wire.bigtable import Method, methods
from ...wire.bigtable.errors import UNAUTHENTICATED, status_of

log = logging.getLogger("widetable.server.bigtable")

CODES = {c.value[0]: c for c in grpc.StatusCode}
MAX_DETAILS = 2000  # characters of a status message: it travels in a header (8 KiB cap)


def details(message: str) -> str:
    """A status message short enough for the trailers (a value it names may be huge)."""
    return message if len(message) <= MAX_DETAILS else message[:MAX_DETAILS - 3] + "..."


# why some methods are not served, added to their UNIMPLEMENTED message
WHY_NOT = {
    "ReadChangeStream": ": change streams of Bigtable tables are not served",
    "GenerateInitialChangeStreamPartitions": ": change streams of Bigtable tables are not served",
}


def _identity(b: bytes) -> bytes:
    return b


def table_id(name: str, field: str = "table_name") -> str:
    """``projects/{p}/instances/{i}/tables/{t}`` -> ``t``; ParameterInvalid naming the value.

    The project and instance are not checked: one store is one instance, whatever the
    client calls it (as Google's emulator answers any)."""
    parts = name.split("/")
    if len(parts) != 6 or parts[0] != "projects" or parts[2] != "instances" \
            or parts[4] != "tables" or not all(parts[1::2]):
        raise ParameterInvalid(
            f"{field} {describe(name, 200)} is not of the form projects/<project>/instances/<instance>/tables/<table>")
    return parts[5]


def instance_name(name: str, field: str = "parent") -> str:
    """Checks ``projects/{p}/instances/{i}`` and returns it."""
    parts = name.split("/")
    if len(parts) != 4 or parts[0] != "projects" or parts[2] != "instances" \
            or not parts[1] or not parts[3]:
        raise ParameterInvalid(
            f"{field} {describe(name, 200)} is not of the form projects/<project>/instances/<instance>")
    return name


def no_views(request, what: str) -> None:
    """NotSupported if the request reads through an authorized or materialized view."""
    for field in ("authorized_view_name", "materialized_view_name"):
        if getattr(request, field, ""):
            raise NotSupported(f"{what}: {field} is not supported (views are not served)")


def _status(exc: BaseException, what: str) -> tuple[grpc.StatusCode, str]:
    if isinstance(exc, WidetableError):
        return CODES[status_of(exc)], details(exc.message)
    log.exception("%s failed", what)
    return grpc.StatusCode.INTERNAL, f"{what}: internal error: {type(exc).__name__}"


class Registry:
    """The handlers of one grpc asyncio server: ``add(service, name, fn)``; every method
    of a registered service without a handler answers UNIMPLEMENTED naming it. Handlers
    run on the server's loop; those ``pooled`` for a request on ``pool``."""

    def __init__(self, token: str | None = None, pool=None) -> None:
        self.token = None if token is None else f"Bearer {token}".encode()
        self.pool = pool
        self._handlers: dict[str, dict[str, grpc.RpcMethodHandler]] = {}
        self._methods: dict[str, dict[str, Method]] = {}

    def service(self, service: str) -> None:
        self._methods[service] = methods(service)
        self._handlers.setdefault(service, {})

    def add(self, service: str, name: str, fn: Callable, raw_response: bool = False,
            pooled: Callable | None = None) -> None:
        """``fn(request, context)`` returns the answer (a message; for a streamed method
        an iterable of them). ``raw_response``: the messages are serialized bytes.
        ``pooled(request)``: true when the call may run long (it goes to the pool, so
        that the loop keeps serving)."""
        method = self._methods[service][name]
        wrapped = self._wrap(method, fn, pooled)
        serialize = _identity if raw_response else method.response.SerializeToString
        make = (grpc.unary_stream_rpc_method_handler if method.server_streaming
                else grpc.unary_unary_rpc_method_handler)
        self._handlers[service][name] = make(wrapped, request_deserializer=_identity,
                                             response_serializer=serialize)

    def _authorized(self, context) -> bool:
        if self.token is None:
            return True
        for key, value in context.invocation_metadata() or ():
            if key == "authorization":
                v = value.encode() if isinstance(value, str) else value
                return hmac.compare_digest(v, self.token)
        return False

    @staticmethod
    def _parser(method: Method) -> Callable:
        parse = method.request.FromString

        def request_of(data: bytes):
            try:
                return parse(data)
            except (DecodeError, RuntimeError, ValueError) as exc:
                raise ParameterInvalid(
                    f"malformed {method.request.DESCRIPTOR.name}: {exc}") from None
        return request_of

    def _wrap(self, method: Method, fn: Callable, pooled: Callable | None) -> Callable:
        request_of, what, pool = self._parser(method), method.name, self.pool

        async def answer(data: bytes, context):
            req = request_of(data)
            if pooled is not None and pooled(req):
                run = (lambda: list(fn(req, context))) if method.server_streaming else (
                    lambda: fn(req, context))
                return await asyncio.get_running_loop().run_in_executor(pool, run)
            return fn(req, context)

        if method.server_streaming:
            async def streamed(data: bytes, context):
                # context.write, not an async generator: a generator costs grpc's asyncio
                # server a task per message
                if not self._authorized(context):
                    await context.abort(CODES[UNAUTHENTICATED], "missing or wrong bearer token")
                try:
                    for item in await answer(data, context):
                        await context.write(item)
                except Exception as exc:  # noqa: BLE001 - every failure becomes a status
                    await context.abort(*_status(exc, what))
            return streamed

        async def unary(data: bytes, context):
            if not self._authorized(context):
                await context.abort(CODES[UNAUTHENTICATED], "missing or wrong bearer token")
            try:
                return await answer(data, context)
            except Exception as exc:  # noqa: BLE001
                await context.abort(*_status(exc, what))
        return unary

    def handlers(self) -> list[grpc.GenericRpcHandler]:
        out = []
        for service, handlers in self._handlers.items():
            full = dict(handlers)
            for name, method in self._methods[service].items():
                if name not in full:
                    full[name] = self._unimplemented(service, method)
            out.append(grpc.method_handlers_generic_handler(service, full))
        return out

    def _unimplemented(self, service: str, method: Method) -> grpc.RpcMethodHandler:
        message = f"{service.rpartition('.')[2]}.{method.name} is not implemented by widetable"
        message += WHY_NOT.get(method.name, "")
        code = grpc.StatusCode.UNIMPLEMENTED

        async def refuse(data, context):
            await context.abort(code, message)

        make = (grpc.unary_stream_rpc_method_handler if method.server_streaming
                else grpc.unary_unary_rpc_method_handler)
        return make(refuse, request_deserializer=_identity, response_serializer=_identity)
