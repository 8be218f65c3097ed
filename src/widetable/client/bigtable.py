"""A small Bigtable gRPC client with the embedded API: ``connect_bigtable("host:port")``.

``RemoteBigtable`` has the methods of ``widetable.bigtable``'s instance (create_table,
get_table, list_tables, delete_table, modify_families, drop_row_range, table) and
``RemoteBigtableTable`` those of its tables, with the library's own values and errors;
the messages are Bigtable's (``wire/bigtable``), so it talks to any server of Bigtable's
API that sends no credentials challenge: ``widetable serve --bigtable-port``, or
Google's emulator. It is the ``widetable bt --endpoint`` commands' transport; user code
would use the official client. This module, and only it in ``client/``, imports grpc.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from ..bigtable.types import BigtableRow, Cell, FamilySpec, RowSet, TableInfo
from ..errors import ParameterInvalid
from ..wire.bigtable import DATA, TABLE_ADMIN, admin, methods, v2
from ..wire.bigtable.convert import (
    decode_family,
    encode_family,
    encode_filter,
    encode_mutation,
    encode_row_set,
    encode_rule,
)
from ..wire.bigtable.errors import error_of
from ..wire.bigtable.query import decode_rows, decode_type, encode_param, encode_type, type_text
from ..wire.bigtable.rows import merge_rows

DEFAULT_PROJECT = "widetable"
DEFAULT_INSTANCE = "widetable"
TIMEOUT = 60.0  # seconds a call may take


class _Stubs:
    def __init__(self, channel: grpc.Channel, metadata: tuple) -> None:
        self._calls = {}
        self._metadata = metadata
        for service in (DATA, TABLE_ADMIN):
            for name, m in methods(service).items():
                make = channel.unary_stream if m.server_streaming else channel.unary_unary
                self._calls[name] = (make(m.path, request_serializer=m.request.SerializeToString,
                                          response_deserializer=m.response.FromString),
                                     m.server_streaming)

    def call(self, name: str, request):
        fn, streaming = self._calls[name]
        try:
            if streaming:
                return _Stream(fn(request, timeout=TIMEOUT, metadata=self._metadata))
            return fn(request, timeout=TIMEOUT, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise _error(exc) from None


class _Stream:
    """A streamed answer whose gRPC errors leave as widetable errors."""

    def __init__(self, it) -> None:
        self._it = it

    def __iter__(self):
        try:
            yield from self._it
        except grpc.RpcError as exc:
            raise _error(exc) from None


def _error(exc: grpc.RpcError):
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    return error_of(code.value[0], exc.details() if hasattr(exc, "details") else str(exc))


def connect_bigtable(endpoint: str, project: str = DEFAULT_PROJECT,
                     instance: str = DEFAULT_INSTANCE, token: str | None = None,
                     root_certificates: bytes | None = None) -> RemoteBigtable:
    """A client of the Bigtable API at ``endpoint`` (``host:port``). ``token``: sent as
    ``authorization: Bearer <token>``; ``root_certificates`` (PEM): use TLS, trusting them."""
    if not endpoint or "/" in endpoint:
        raise ParameterInvalid(f"endpoint {endpoint!r} must be host:port")
    if root_certificates is not None:
        channel = grpc.secure_channel(endpoint, grpc.ssl_channel_credentials(root_certificates))
    else:
        channel = grpc.insecure_channel(endpoint)
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    return RemoteBigtable(channel, project, instance, metadata)


class RemoteBigtable:
    """The instance's tables over gRPC (see the module docstring)."""

    def __init__(self, channel: grpc.Channel, project: str, instance: str,
                 metadata: tuple = ()) -> None:
        self._channel = channel
        self._stubs = _Stubs(channel, metadata)
        self.parent = f"projects/{project}/instances/{instance}"

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> RemoteBigtable:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _name(self, table: str) -> str:
        return f"{self.parent}/tables/{table}"

    def create_table(self, name: str, families=(), split_keys=()) -> None:
        specs = families.values() if isinstance(families, dict) else families
        table = admin.Table()
        for spec in specs:
            table.column_families[spec.name].CopyFrom(encode_family(spec))
        req = admin.CreateTableRequest(parent=self.parent, table_id=name, table=table,
                                       initial_splits=[admin.CreateTableRequest.Split(key=k)
                                                       for k in split_keys])
        self._stubs.call("CreateTable", req)

    def get_table(self, name: str) -> TableInfo:
        t = self._stubs.call("GetTable", admin.GetTableRequest(name=self._name(name),
                                                               view=4))  # FULL
        families = {f: decode_family(f, cf) for f, cf in sorted(t.column_families.items())}
        return TableInfo(name, families)

    def list_tables(self) -> list[str]:
        out, token = [], ""
        while True:
            resp = self._stubs.call("ListTables", admin.ListTablesRequest(
                parent=self.parent, page_token=token))
            out.extend(t.name.rpartition("/")[2] for t in resp.tables)
            token = resp.next_page_token
            if not token:
                return out

    def delete_table(self, name: str) -> None:
        self._stubs.call("DeleteTable", admin.DeleteTableRequest(name=self._name(name)))

    def modify_families(self, name: str, create=(), update=(), drop=()) -> None:
        M = admin.ModifyColumnFamiliesRequest.Modification
        mods = [M(id=s.name, create=encode_family(s)) for s in create]
        mods += [M(id=s.name, update=encode_family(s)) for s in update]
        mods += [M(id=n, drop=True) for n in drop]
        self._stubs.call("ModifyColumnFamilies", admin.ModifyColumnFamiliesRequest(
            name=self._name(name), modifications=mods))

    def drop_row_range(self, name: str, prefix: bytes | None = None,
                       all_rows: bool = False) -> None:
        if all_rows:
            req = admin.DropRowRangeRequest(name=self._name(name), delete_all_data_from_table=True)
        else:
            req = admin.DropRowRangeRequest(name=self._name(name), row_key_prefix=prefix or b"")
        self._stubs.call("DropRowRange", req)

    def table(self, name: str) -> RemoteBigtableTable:
        return RemoteBigtableTable(self, name)

    def execute_query(self, query: str, params: dict | None = None,
                      param_types: dict | None = None) -> QueryAnswer:
        """GoogleSQL ``query`` through PrepareQuery and ExecuteQuery (as
        ``db.bigtable.execute_query``; parameter types inferred from the values unless
        ``param_types`` gives them). The whole answer is read."""
        from ..sql.googlesql.types import infer_type  # as the embedded store infers them

        params = params or {}
        types = dict(param_types or {})
        for name, value in params.items():
            types.setdefault(name, infer_type(name, value))
        prep = v2.PrepareQueryRequest(instance_name=self.parent, query=query)
        prep.proto_format.SetInParent()
        for name, t in types.items():
            prep.param_types[name].CopyFrom(encode_type(t))
        prepared = self._stubs.call("PrepareQuery", prep)
        columns = [(c.name, decode_type(c.type, c.name)) for c in prepared.metadata.proto_schema.columns]
        req = v2.ExecuteQueryRequest(instance_name=self.parent,
                                     prepared_query=prepared.prepared_query)
        for name, value in params.items():
            req.params[name].CopyFrom(encode_param(value, types[name]))
        rows: list[tuple] = []
        buffer = b""
        for m in self._stubs.call("ExecuteQuery", req):
            buffer += m.results.proto_rows_batch.batch_data
            if m.results.HasField("batch_checksum"):
                rows += decode_rows(buffer, [t for _, t in columns], m.results.batch_checksum)
                buffer = b""
        return QueryAnswer([(n, type_text(t)) for n, t in columns], rows)


class QueryAnswer:
    """A query's answer read through the wire: ``columns`` [(name, type)], ``rows``."""

    def __init__(self, columns: list[tuple[str, str]], rows: list[tuple]) -> None:
        self.columns = columns
        self.rows = rows

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


class RemoteBigtableTable:
    """One table's data calls over gRPC, with the embedded table's signatures."""

    def __init__(self, instance: RemoteBigtable, name: str) -> None:
        self._instance = instance
        self._stubs = instance._stubs
        self.name = name
        self._path = instance._name(name)

    def read_row(self, key: bytes, filter=None) -> BigtableRow | None:
        for row in self.read_rows(RowSet(keys=(key,)), filter, limit=1):
            return row
        return None

    def read_rows(self, row_set: RowSet | None = None, filter=None, limit: int = 0,
                  reverse: bool = False) -> Iterator[BigtableRow]:
        req = v2.ReadRowsRequest(table_name=self._path, rows_limit=limit, reversed=reverse)
        if row_set is not None:
            req.rows.CopyFrom(encode_row_set(row_set))
        if filter is not None:
            req.filter.CopyFrom(encode_filter(filter))
        return merge_rows(self._stubs.call("ReadRows", req))

    def mutate_row(self, key: bytes, mutations: list) -> None:
        self._stubs.call("MutateRow", v2.MutateRowRequest(
            table_name=self._path, row_key=key, mutations=[encode_mutation(m) for m in mutations]))

    def mutate_rows(self, entries: list) -> list:
        req = v2.MutateRowsRequest(table_name=self._path, entries=[
            v2.MutateRowsRequest.Entry(row_key=k, mutations=[encode_mutation(m) for m in ms])
            for k, ms in entries])
        out: list = [None] * len(entries)
        for resp in self._stubs.call("MutateRows", req):
            for e in resp.entries:
                if e.status.code:
                    out[e.index] = error_of(e.status.code, e.status.message)
        return out

    def check_and_mutate_row(self, key: bytes, predicate=None, true_mutations=(),
                             false_mutations=()) -> bool:
        req = v2.CheckAndMutateRowRequest(
            table_name=self._path, row_key=key,
            true_mutations=[encode_mutation(m) for m in true_mutations],
            false_mutations=[encode_mutation(m) for m in false_mutations])
        if predicate is not None:
            req.predicate_filter.CopyFrom(encode_filter(predicate))
        return self._stubs.call("CheckAndMutateRow", req).predicate_matched

    def read_modify_write_row(self, key: bytes, rules: list) -> BigtableRow:
        resp = self._stubs.call("ReadModifyWriteRow", v2.ReadModifyWriteRowRequest(
            table_name=self._path, row_key=key, rules=[encode_rule(r) for r in rules]))
        cells = [Cell(f.name, c.qualifier, x.timestamp_micros, x.value, tuple(x.labels))
                 for f in resp.row.families for c in f.columns for x in c.cells]
        return BigtableRow(resp.row.key, tuple(cells))

    def sample_row_keys(self) -> list[tuple[bytes, int]]:
        return [(r.row_key, r.offset_bytes) for r in self._stubs.call(
            "SampleRowKeys", v2.SampleRowKeysRequest(table_name=self._path))]

    def drop_row_range(self, prefix: bytes | None = None, all_rows: bool = False) -> None:
        self._instance.drop_row_range(self.name, prefix, all_rows)


__all__ = ["FamilySpec", "RemoteBigtable", "RemoteBigtableTable", "connect_bigtable"]
