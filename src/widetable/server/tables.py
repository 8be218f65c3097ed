"""Table APIs: CreateTable, ListTable, DescribeTable, UpdateTable, DeleteTable,
ComputeSplitPointsBySize; CreateIndex / DropIndex answer "not supported" until
the library has secondary indexes."""

from __future__ import annotations

from ..db import Database, TableDescription
from ..errors import NotSupported, ParameterInvalid
from ..keys.codec import INF_MIN
from ..table.schema import AUTO_INCREMENT, FOREVER
from . import convert, plainbuffer
from .proto import pb


def create_table(db: Database, req) -> object:
    meta = req.table_meta
    if len(meta.defined_column):
        raise NotSupported("defined columns are not supported yet (they come with secondary indexes)")
    if len(req.index_metas):
        raise NotSupported("secondary indexes are not supported yet")
    primary_key: list[tuple] = []
    for col in meta.primary_key:
        kind = convert.PK_TYPES.get(col.type)
        if kind is None:
            raise ParameterInvalid(f"primary key column {col.name!r}: type {col.type} is not supported")
        if col.HasField("option"):
            if col.option != convert.AUTO_INCREMENT_OPTION:
                raise ParameterInvalid(f"primary key column {col.name!r}: unknown option {col.option}")
            primary_key.append((col.name, kind, AUTO_INCREMENT))
        else:
            primary_key.append((col.name, kind))
    opts = req.table_options
    kwargs: dict = {}
    if opts.HasField("max_versions"):
        kwargs["max_versions"] = opts.max_versions
    if opts.HasField("time_to_live"):
        kwargs["ttl"] = opts.time_to_live
    if opts.HasField("deviation_cell_version_in_sec"):
        kwargs["max_time_deviation"] = opts.deviation_cell_version_in_sec
    split_points = [plainbuffer.decode_value(p.begin) for p in req.partitions][1:]
    if split_points:
        kwargs["split_points"] = split_points
    db.create_table(meta.table_name, primary_key, **kwargs)
    return pb.CreateTableResponse()


def list_table(db: Database, req) -> object:
    return pb.ListTableResponse(table_names=db.list_tables())


def _fill_options(msg, d: TableDescription) -> None:
    msg.time_to_live = d.options.ttl if d.options.ttl != FOREVER else -1
    msg.max_versions = d.options.max_versions
    msg.deviation_cell_version_in_sec = d.options.max_time_deviation
    msg.allow_update = True


def _fill_throughput(msg, d: TableDescription) -> None:
    msg.capacity_unit.read = 0
    msg.capacity_unit.write = 0
    msg.last_increase_time = int(d.created_at)


def describe_table(db: Database, req) -> object:
    d = db.describe_table(req.table_name)
    resp = pb.DescribeTableResponse()
    resp.table_meta.table_name = d.name
    for name, kind in d.primary_key:
        col = resp.table_meta.primary_key.add(name=name, type=convert.PK_TYPE_CODES[kind])
        if name == d.auto_increment:
            col.option = convert.AUTO_INCREMENT_OPTION
    _fill_throughput(resp.reserved_throughput_details, d)
    _fill_options(resp.table_options, d)
    resp.sse_details.enable = False
    return resp


def update_table(db: Database, req) -> object:
    opts = req.table_options
    d = db.update_table(
        req.table_name,
        max_versions=opts.max_versions if opts.HasField("max_versions") else None,
        ttl=opts.time_to_live if opts.HasField("time_to_live") else None,
        max_time_deviation=(
            opts.deviation_cell_version_in_sec if opts.HasField("deviation_cell_version_in_sec") else None
        ),
    )
    resp = pb.UpdateTableResponse()
    _fill_throughput(resp.reserved_throughput_details, d)
    _fill_options(resp.table_options, d)
    return resp


def delete_table(db: Database, req) -> object:
    db.delete_table(req.table_name)
    return pb.DeleteTableResponse()


def compute_split_points_by_size(db: Database, req) -> object:
    unit = req.split_size_unit_in_byte if req.HasField("split_size_unit_in_byte") else 100 * 2**20
    if req.split_size <= 0 or unit <= 0:
        raise ParameterInvalid(f"split_size must be > 0, got {req.split_size} x {unit} bytes")
    table = db.table(req.table_name)
    ranges = db.compute_split_points_by_size(req.table_name, req.split_size * unit)
    resp = pb.ComputeSplitPointsBySizeResponse()
    resp.consumed.CopyFrom(convert.consumed(read=1))
    for name, kind in table.schema.primary_key:
        resp.schema.add(name=name, type=convert.PK_TYPE_CODES[kind])
    names = table._names
    for r in ranges[1:]:
        values = list(r.start)
        while values and values[-1] is INF_MIN:
            values.pop()  # trailing -inf is omitted, as the service does
        resp.split_points.append(plainbuffer.encode_primary_key(list(zip(names, values))))
    for r in ranges:
        resp.locations.add(location=str(r.location), repeat=1)
    return resp


def create_index(db: Database, req) -> object:
    raise NotSupported("secondary indexes (CreateIndex) are not supported yet")


def drop_index(db: Database, req) -> object:
    raise NotSupported("secondary indexes (DropIndex) are not supported yet")
