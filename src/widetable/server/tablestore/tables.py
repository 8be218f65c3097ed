"""Table APIs: CreateTable, ListTable, DescribeTable, UpdateTable, DeleteTable,
ComputeSplitPointsBySize, CreateIndex, DropIndex.

Predefined columns (``defined_column``) and secondary indexes (``IndexMeta``:
IT_GLOBAL_INDEX with IUM_ASYNC_INDEX, IT_LOCAL_INDEX with IUM_SYNC_INDEX) map
to the library's. An index is read by its name (GetRow, GetRange); writes to it
fail with ``OTSParameterInvalid``. Reserved throughput: the library keeps one
pool of operations per second per table, for reads and writes alike, that a
partition over its capacity may draw on; CreateTable / UpdateTable set it to
read + write CUs (UpdateTable: of the fields sent), and DescribeTable reports
the pool as both the read and the write figure, since either may use all of it.
The change stream (``stream_spec``, ``stream_details``) maps to ``stream`` and
``stream_retention``; Tablestore counts the retention in hours, widetable in
seconds, so DescribeTable rounds a retention set in seconds up to whole hours.
"""

from __future__ import annotations

from ...db import Database, TableDescription
from ...errors import ParameterInvalid
from ...keys.codec import INF_MIN
from ...table.schema import AUTO_INCREMENT, FOREVER
from ...wire import convert, plainbuffer
from ...wire.proto import pb


def _index_args(meta) -> dict:
    """``db.create_index`` arguments of an ``IndexMeta``: GLOBAL goes with IUM_ASYNC_INDEX,
    LOCAL with IUM_SYNC_INDEX, as Tablestore requires."""
    kind = convert.INDEX_TYPES.get(meta.index_type)
    if kind is None:
        raise ParameterInvalid(f"index {meta.name!r}: unknown index type {meta.index_type}")
    if meta.index_update_mode != kind[1]:
        raise ParameterInvalid(
            f"index {meta.name!r}: a {kind[0].lower()} index must use "
            f"{'IUM_ASYNC_INDEX' if kind[0] == 'GLOBAL' else 'IUM_SYNC_INDEX'}"
        )
    return {
        "name": meta.name, "primary_key": list(meta.primary_key),
        "defined_columns": list(meta.defined_column), "index_type": kind[0],
    }


def reserved_units(cu, old=None) -> dict:
    """The table options of a ``CapacityUnit``. Throttling pools reads and writes:
    ``reserved_throughput`` is read + write units. The split is stored apart
    (``reserved_read``, ``reserved_write``) and described as given; a pool of read units
    alone (write 0, as widetable.connect sends the library's pool) stores the pool alone,
    which describes the same (``_fill_throughput``). A unit left out keeps its value in
    ``old`` (UpdateTable's options), or is 0."""
    old_read, old_write = _units(old) if old is not None else (0, 0)
    read = cu.read if cu.HasField("read") else old_read
    write = cu.write if cu.HasField("write") else old_write
    if read < 0 or write < 0:
        raise ParameterInvalid(f"Invalid Capacity Unit: read {read}, write {write}. Capacity "
                               "Unit must be nonnegative.")
    split = (read, write) if write else (0, 0)
    return {"reserved_throughput": read + write, "reserved_read": split[0],
            "reserved_write": split[1]}


def _units(o) -> tuple[int, int]:
    """``(read, write)`` reserved units of table options: the stored split while it adds
    up to the pool, else the pool as read units (a pool the library set, a split a later
    ``reserved_throughput`` replaced, or a store of an earlier release, which kept only
    the sum)."""
    if o.reserved_write and o.reserved_read + o.reserved_write == o.reserved_throughput:
        return int(o.reserved_read), int(o.reserved_write)
    return int(o.reserved_throughput), 0


def create_table(db: Database, req, capacity: int | None = None) -> object:
    """CreateTable; ``capacity`` (the server's ``--capacity``) is each partition's
    operations per second (None: the library's default, 0: off)."""
    meta = req.table_meta
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
    defined = []
    for col in meta.defined_column:
        kind = convert.DEFINED_TYPES.get(col.type)
        if kind is None:
            raise ParameterInvalid(f"defined column {col.name!r}: type {col.type} is not supported")
        defined.append((col.name, kind))
    indexes = [_index_args(m) for m in req.index_metas]  # all checked before anything is made
    opts = req.table_options
    kwargs: dict = {}
    if defined:
        kwargs["defined_columns"] = defined
    if opts.HasField("max_versions"):
        kwargs["max_versions"] = opts.max_versions
    if opts.HasField("time_to_live"):
        kwargs["ttl"] = opts.time_to_live
    if opts.HasField("deviation_cell_version_in_sec"):
        kwargs["max_time_deviation"] = opts.deviation_cell_version_in_sec
    if req.HasField("reserved_throughput"):
        units = reserved_units(req.reserved_throughput.capacity_unit)
        kwargs.update({k: v for k, v in units.items() if v})  # defaults stay out of the catalog
    if capacity is not None:
        kwargs["capacity"] = capacity
    split_points = [plainbuffer.decode_value(p.begin) for p in req.partitions][1:]
    if split_points:
        kwargs["split_points"] = split_points
    if req.HasField("stream_spec"):
        kwargs.update(_stream_args(req.stream_spec))
    db.create_table(meta.table_name, primary_key, **kwargs)
    try:
        for index in indexes:  # the table is empty: nothing to backfill
            db.create_index(meta.table_name, include_base_data=False, progress=False, **index)
    except BaseException:
        db.delete_table(meta.table_name)  # all or nothing, as the service does
        raise
    return pb.CreateTableResponse()


def list_table(db: Database, req) -> object:
    return pb.ListTableResponse(table_names=db.list_tables())


def _fill_options(msg, d: TableDescription) -> None:
    msg.time_to_live = d.options.ttl if d.options.ttl != FOREVER else -1
    msg.max_versions = d.options.max_versions
    msg.deviation_cell_version_in_sec = d.options.max_time_deviation
    msg.allow_update = True


def _fill_throughput(msg, d: TableDescription) -> None:
    msg.capacity_unit.read, msg.capacity_unit.write = _units(d.options)
    msg.last_increase_time = int(d.created_at)


def describe_table(db: Database, req) -> object:
    d = db.describe_table(req.table_name)
    resp = pb.DescribeTableResponse()
    resp.table_meta.table_name = d.name
    for name, kind in d.primary_key:
        col = resp.table_meta.primary_key.add(name=name, type=convert.PK_TYPE_CODES[kind])
        if name == d.auto_increment:
            col.option = convert.AUTO_INCREMENT_OPTION
    for name, kind in d.defined_columns:
        resp.table_meta.defined_column.add(name=name, type=convert.DEFINED_TYPE_CODES[kind])
    for index in d.indexes:
        index_type, mode = convert.INDEX_TYPE_CODES[index.index_type]
        resp.index_metas.add(
            name=index.name, primary_key=list(index.primary_key),
            defined_column=list(index.defined_columns), index_type=index_type,
            index_update_mode=mode,
        )
    _fill_throughput(resp.reserved_throughput_details, d)
    _fill_options(resp.table_options, d)
    _fill_stream(resp.stream_details, d)
    resp.sse_details.enable = False
    return resp


def update_table(db: Database, req) -> object:
    db.table(req.table_name)  # as the store: the table is looked up before the changes are checked
    opts = req.table_options
    extra: dict = {}
    if req.HasField("reserved_throughput"):
        extra.update(reserved_units(req.reserved_throughput.capacity_unit,
                                    db.table(req.table_name).schema.options))
    d = db.update_table(
        req.table_name, **extra,
        max_versions=opts.max_versions if opts.HasField("max_versions") else None,
        ttl=opts.time_to_live if opts.HasField("time_to_live") else None,
        max_time_deviation=(
            opts.deviation_cell_version_in_sec if opts.HasField("deviation_cell_version_in_sec") else None
        ),
        **(_stream_args(req.stream_spec) if req.HasField("stream_spec") else {}),
    )
    resp = pb.UpdateTableResponse()
    _fill_throughput(resp.reserved_throughput_details, d)
    _fill_options(resp.table_options, d)
    _fill_stream(resp.stream_details, d)
    return resp


def _stream_args(spec) -> dict:
    """``stream`` and ``stream_retention`` of a StreamSpecification, whose
    ``expiration_time`` is in hours (widetable keeps seconds)."""
    args: dict = {"stream": spec.enable_stream}
    if spec.HasField("expiration_time"):
        if spec.expiration_time <= 0:
            raise ParameterInvalid(f"stream expiration_time must be hours > 0, got {spec.expiration_time}")
        args["stream_retention"] = spec.expiration_time * 3600
    return args


def _fill_stream(msg, d: TableDescription) -> None:
    """StreamDetails: the retention in whole hours, rounded up (widetable keeps seconds)."""
    msg.enable_stream = d.stream
    msg.expiration_time = convert.retention_hours(d.stream_retention)
    if d.stream_id is not None:
        msg.stream_id = d.stream_id


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
    args = _index_args(req.index_meta)
    db.create_index(req.main_table_name, include_base_data=req.include_base_data, progress=False,
                    **args)
    return pb.CreateIndexResponse()


def drop_index(db: Database, req) -> object:
    db.drop_index(req.main_table_name, req.index_name)
    return pb.DropIndexResponse()


def apply_capacity(db: Database, capacity: int) -> list[str]:
    """Set every table's per-partition ``capacity`` (0 = off); returns the tables changed."""
    changed = []
    for name in db.list_tables():
        if db.table(name).schema.options.capacity != capacity:
            db.update_table(name, capacity=capacity)
            changed.append(name)
    return changed
