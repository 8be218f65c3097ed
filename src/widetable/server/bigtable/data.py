"""Bigtable's data API (``google.bigtable.v2.Bigtable``) over ``db.bigtable``.

Each handler decodes its request (``wire/bigtable/convert.py``), makes one library call
and encodes the answer. Single-row calls and reads run on the server's event loop: a
row is tens of microseconds of store work, less than a thread handoff costs. A
MutateRows of more than ``INLINE_ENTRIES`` rows runs on the worker pool, so that the
loop keeps serving other calls meanwhile.
"""

from __future__ import annotations

from ...errors import ParameterInvalid, WidetableError
from ...wire.bigtable import DATA, v2
from ...wire.bigtable.convert import (
    decode_entries,
    decode_filter,
    decode_mutations,
    decode_row_range,
    decode_row_set,
    decode_rule,
)
from ...wire.bigtable.errors import status_of
from ...wire.bigtable.rows import encode_mutate_rows_response, encode_rows
from .query import QueryService
from .service import Registry, details, instance_name, no_views, table_id

INLINE_ENTRIES = 100  # rows of a MutateRows run on the loop
MAX_ENTRIES = 100_000  # Bigtable's limit of mutations in one MutateRows

class DataService:
    """The data API's handlers over ``bt`` (a BigtableInstance)."""

    def __init__(self, bt) -> None:
        self.bt = bt

    def register(self, reg: Registry) -> None:
        reg.service(DATA)
        reg.add(DATA, "ReadRows", self.read_rows, raw_response=True)
        reg.add(DATA, "MutateRow", self.mutate_row)
        reg.add(DATA, "MutateRows", self.mutate_rows, raw_response=True,
                pooled=lambda req: len(req.entries) > INLINE_ENTRIES)
        reg.add(DATA, "CheckAndMutateRow", self.check_and_mutate_row)
        reg.add(DATA, "ReadModifyWriteRow", self.read_modify_write_row)
        reg.add(DATA, "SampleRowKeys", self.sample_row_keys)
        reg.add(DATA, "PingAndWarm", self.ping_and_warm)
        QueryService(self.bt).register(reg)  # PrepareQuery, ExecuteQuery (query.py)

    def table(self, request, what: str):
        """The library table a request names (ObjectNotExist if there is none)."""
        no_views(request, what)
        return self.bt.table(table_id(request.table_name))

    # -- reads ------------------------------------------------------------------------------

    def read_rows(self, req, context):
        """The answer's messages, lazily: the scan runs as they are written."""
        table = self.table(req, "ReadRows")
        if req.rows_limit < 0:
            raise ParameterInvalid(f"rows_limit {req.rows_limit} is negative")
        flt = decode_filter(req.filter) if req.HasField("filter") else None
        if req.HasField("rows") and req.rows.row_keys and not req.rows.row_ranges:
            # keys only: point reads (a key set is no range scan)
            keys = sorted(set(req.rows.row_keys), reverse=req.reversed)
            if len(keys) == 1:
                row = table.read_row(keys[0], flt)
                return encode_rows(() if row is None else (row,))
            return encode_rows(_limited(_points(table, keys, flt), req.rows_limit))
        rows = decode_row_set(req.rows) if req.HasField("rows") else None
        return encode_rows(table.read_rows(rows, flt, limit=req.rows_limit, reverse=req.reversed))

    def sample_row_keys(self, req, context):
        table = self.table(req, "SampleRowKeys")
        samples = table.sample_row_keys()
        if req.HasField("row_range"):
            samples = _within(samples, decode_row_range(req.row_range))
        return [v2.SampleRowKeysResponse(row_key=key, offset_bytes=offset)
                for key, offset in samples]

    def ping_and_warm(self, req, context):
        instance_name(req.name, "name")
        return v2.PingAndWarmResponse()

    # -- writes -----------------------------------------------------------------------------

    def mutate_row(self, req, context):
        table = self.table(req, "MutateRow")
        table.mutate_row(req.row_key, decode_mutations(req.mutations))
        return v2.MutateRowResponse()

    def mutate_rows(self, req, context):
        """One message with every entry's status."""
        table = self.table(req, "MutateRows")
        n = len(req.entries)
        if not n:
            raise ParameterInvalid("MutateRows has no entries")
        entries, where, errors, total = decode_entries(req.entries)
        if total > MAX_ENTRIES:
            raise ParameterInvalid(f"MutateRows holds {total} mutations, over the limit of "
                                   f"{MAX_ENTRIES}")
        statuses: list = [None] * n
        for i, err in errors.items():
            statuses[i] = err
        if entries:
            done = table.mutate_rows(entries)
            if not errors and len(done) == n:
                statuses = done
            else:
                for i, err in zip(where, done):
                    statuses[i] = err
        return (encode_mutate_rows_response(
            [None if err is None else (status_of(err), details(err.message)) for err in statuses]),)

    def check_and_mutate_row(self, req, context):
        table = self.table(req, "CheckAndMutateRow")
        pred = decode_filter(req.predicate_filter) if req.HasField("predicate_filter") else None
        true_m = decode_mutations(req.true_mutations, "true_mutations", allow_empty=True)
        false_m = decode_mutations(req.false_mutations, "false_mutations", allow_empty=True)
        if not true_m and not false_m:
            raise ParameterInvalid("No mutations provided (true_mutations and false_mutations "
                                   "are both empty)")
        matched = table.check_and_mutate_row(req.row_key, pred, true_m, false_m)
        return v2.CheckAndMutateRowResponse(predicate_matched=bool(matched))

    def read_modify_write_row(self, req, context):
        table = self.table(req, "ReadModifyWriteRow")
        if not req.rules:
            raise ParameterInvalid("ReadModifyWriteRow has no rules")
        row = table.read_modify_write_row(req.row_key, [decode_rule(r) for r in req.rules])
        return v2.ReadModifyWriteRowResponse(row=encode_row(row, req.row_key))


def encode_row(row, key: bytes):
    """A library row -> ``google.bigtable.v2.Row`` (families, columns, cells nested)."""
    out = v2.Row(key=key if row is None else row.key)
    if row is None:
        return out
    family = column = None
    for cell in row.cells:
        if family is None or family.name != cell.family:
            family = out.families.add(name=cell.family)
            column = None
        if column is None or column.qualifier != cell.qualifier:
            column = family.columns.add(qualifier=cell.qualifier)
        column.cells.add(timestamp_micros=cell.timestamp, value=cell.value, labels=cell.labels)
    return out


def _points(table, keys, flt):
    for key in keys:
        row = table.read_row(key, flt)
        if row is not None:
            yield row


def _limited(rows, limit: int):
    if not limit:
        yield from rows
        return
    for n, row in enumerate(rows, 1):
        yield row
        if n >= limit:
            return


def _within(samples, r):
    """The samples whose keys fall in the range ``r``, then the first one past it (the
    sample that ends the range's last section), as Bigtable restricts them."""
    out = []
    for key, offset in samples:
        if r.start is not None and key and (key < r.start or (key == r.start and not r.start_inclusive)):
            continue
        out.append((key, offset))
        if r.end is not None and (not key or key > r.end or (key == r.end and not r.end_inclusive)):
            break
    return out
