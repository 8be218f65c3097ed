"""Bigtable's protobuf messages <-> widetable.bigtable's values, both directions.

``decode_*`` turns a message a client sent into the library's value (the server's
direction), ``encode_*`` the reverse (the client adapter's direction). A message that
cannot be turned into a valid value raises ParameterInvalid naming the field and the
value (INVALID_ARGUMENT on the wire); a feature the library lacks raises NotSupported.
Rows travel as ReadRows chunks: ``rows.py``.
"""

from __future__ import annotations

from ...bigtable import filters as F
from ...bigtable import gc as G
from ...bigtable.types import (
    AddToCell,
    DeleteFromColumn,
    DeleteFromFamily,
    DeleteFromRow,
    FamilySpec,
    MergeToCell,
    ReadModifyWriteRule,
    RowRange,
    RowSet,
    SetCell,
    TableInfo,
    make_set_cell,
)
from ...errors import NotSupported, ParameterInvalid, WidetableError, describe
from . import admin, v2

MAX_FILTER_DEPTH = 64  # nesting of chains, interleaves and conditions

# ---- row sets ---------------------------------------------------------------------------


def decode_row_range(r) -> RowRange:
    """A ``RowRange``: an empty key on either side, or none, is unbounded there."""
    start_kind, end_kind = r.WhichOneof("start_key"), r.WhichOneof("end_key")
    start = getattr(r, start_kind) if start_kind else b""
    end = getattr(r, end_kind) if end_kind else b""
    return RowRange(start or None, end or None,
                    start_kind != "start_key_open", end_kind == "end_key_closed")


def decode_row_set(rows) -> RowSet | None:
    """A request's ``rows`` (None for the whole table: no keys and no ranges)."""
    if not rows.row_keys and not rows.row_ranges:
        return None
    return RowSet(tuple(rows.row_keys), tuple(decode_row_range(r) for r in rows.row_ranges))


def encode_row_range(r: RowRange):
    msg = v2.RowRange()
    if r.start is not None:
        if r.start_inclusive:
            msg.start_key_closed = r.start
        else:
            msg.start_key_open = r.start
    if r.end is not None:
        if r.end_inclusive:
            msg.end_key_closed = r.end
        else:
            msg.end_key_open = r.end
    return msg


def encode_row_set(rs: RowSet | None):
    msg = v2.RowSet()
    if rs is not None:
        msg.row_keys.extend(rs.keys)
        msg.row_ranges.extend(encode_row_range(r) for r in rs.ranges)
    return msg


# ---- filters ----------------------------------------------------------------------------


def _bound(msg, closed: str, open_: str):
    """(value, inclusive) of a oneof bound that is ``closed`` or ``open_`` or unset."""
    if msg.HasField(closed):
        return getattr(msg, closed), True
    if msg.HasField(open_):
        return getattr(msg, open_), False
    return None, True


# RowFilter's boolean fields and the library filter each stands for, both directions.
_FLAGS = {"sink": F.Sink, "pass_all_filter": F.PassAll, "block_all_filter": F.BlockAll,
          "strip_value_transformer": F.StripValue}
_FLAG_BY_CLASS = {cls: field for field, cls in _FLAGS.items()}
# RowFilter's one-value fields: the library filter and the attribute that holds the value.
_SCALARS = (
    ("row_key_regex_filter", F.RowKeyRegex, "pattern"),
    ("family_name_regex_filter", F.FamilyNameRegex, "pattern"),
    ("column_qualifier_regex_filter", F.QualifierRegex, "pattern"),
    ("value_regex_filter", F.ValueRegex, "pattern"),
    ("row_sample_filter", F.RowSample, "probability"),
    ("cells_per_row_offset_filter", F.CellsPerRowOffset, "n"),
    ("cells_per_row_limit_filter", F.CellsPerRowLimit, "n"),
    ("cells_per_column_limit_filter", F.CellsPerColumnLimit, "n"),
    ("apply_label_transformer", F.ApplyLabel, "label"),
)
_SCALAR_BY_FIELD = {field: cls for field, cls, _ in _SCALARS}
_SCALAR_BY_CLASS = {cls: (field, attr) for field, cls, attr in _SCALARS}


def _flag(f, name: str) -> None:
    if not getattr(f, name):
        raise ParameterInvalid(f"RowFilter.{name} must be true if set")


def decode_filter(f):
    """A ``RowFilter``, or None when no filter kind is set (every cell passes).

    The result is checked by ``filters.check_filter``: a bad regex, a negative count or
    label are ParameterInvalid naming them."""
    out = _decode_filter(f, 0)
    if out is not None:
        F.check_filter(out)
    return out


def _decode_filter(f, depth: int):
    if depth > MAX_FILTER_DEPTH:
        raise ParameterInvalid(f"RowFilter nests deeper than {MAX_FILTER_DEPTH} levels")
    kind = f.WhichOneof("filter")
    if kind is None:
        return None
    if kind == "chain":
        return F.Chain(tuple(_decode_filter(x, depth + 1) or F.PassAll() for x in f.chain.filters))
    if kind == "interleave":
        return F.Interleave(tuple(_decode_filter(x, depth + 1) or F.PassAll()
                                  for x in f.interleave.filters))
    if kind == "condition":
        c = f.condition
        if not c.HasField("predicate_filter"):
            raise ParameterInvalid("RowFilter.condition has no predicate_filter")
        pred = _decode_filter(c.predicate_filter, depth + 1) or F.PassAll()
        true_f = (_decode_filter(c.true_filter, depth + 1) or F.PassAll()
                  if c.HasField("true_filter") else None)
        false_f = (_decode_filter(c.false_filter, depth + 1) or F.PassAll()
                   if c.HasField("false_filter") else None)
        return F.Condition(pred, true_f, false_f)
    if kind in _FLAGS:
        _flag(f, kind)
        return _FLAGS[kind]()
    scalar = _SCALAR_BY_FIELD.get(kind)
    if scalar is not None:
        return scalar(getattr(f, kind))
    if kind == "column_range_filter":
        r = f.column_range_filter
        start, start_inc = _bound(r, "start_qualifier_closed", "start_qualifier_open")
        end, end_inc = _bound(r, "end_qualifier_closed", "end_qualifier_open")
        return F.ColumnRange(r.family_name, start, end, start_inc,
                             end_inc if end is not None else False)
    if kind == "value_range_filter":
        r = f.value_range_filter
        start, start_inc = _bound(r, "start_value_closed", "start_value_open")
        end, end_inc = _bound(r, "end_value_closed", "end_value_open")
        return F.ValueRange(start, end, start_inc, end_inc if end is not None else False)
    if kind == "timestamp_range_filter":
        r = f.timestamp_range_filter
        return F.TimestampRange(r.start_timestamp_micros, r.end_timestamp_micros or None)
    if kind == "value_bitmask_filter":
        return F.ValueBitmask(f.value_bitmask_filter.mask)
    raise NotSupported(f"RowFilter.{kind} is not supported")


def _set_bounds(r, flt, what: str) -> None:
    """Set ``start_<what>_closed|open`` and ``end_<what>_closed|open`` of a range message from
    a ColumnRange or ValueRange (the inverse of ``_bound``)."""
    if flt.start is not None:
        setattr(r, f"start_{what}_{'closed' if flt.start_inclusive else 'open'}", flt.start)
    if flt.end is not None:
        setattr(r, f"end_{what}_{'closed' if flt.end_inclusive else 'open'}", flt.end)


def encode_filter(flt):
    """The ``RowFilter`` of a library filter (None: an empty RowFilter, every cell passes)."""
    RF = v2.RowFilter
    if flt is None:
        return RF()
    t = type(flt)
    if t is F.Chain:
        return RF(chain=RF.Chain(filters=[encode_filter(x) for x in flt.filters]))
    if t is F.Interleave:
        return RF(interleave=RF.Interleave(filters=[encode_filter(x) for x in flt.filters]))
    if t is F.Condition:
        c = RF.Condition(predicate_filter=encode_filter(flt.predicate))
        if flt.true_filter is not None:
            c.true_filter.CopyFrom(encode_filter(flt.true_filter))
        if flt.false_filter is not None:
            c.false_filter.CopyFrom(encode_filter(flt.false_filter))
        return RF(condition=c)
    flag = _FLAG_BY_CLASS.get(t)
    if flag is not None:
        return RF(**{flag: True})
    scalar = _SCALAR_BY_CLASS.get(t)
    if scalar is not None:
        return RF(**{scalar[0]: getattr(flt, scalar[1])})
    if t is F.ColumnRange:
        r = v2.ColumnRange(family_name=flt.family)
        _set_bounds(r, flt, "qualifier")
        return RF(column_range_filter=r)
    if t is F.ValueRange:
        r = v2.ValueRange()
        _set_bounds(r, flt, "value")
        return RF(value_range_filter=r)
    if t is F.TimestampRange:
        return RF(timestamp_range_filter=v2.TimestampRange(
            start_timestamp_micros=flt.start, end_timestamp_micros=flt.end or 0))
    if t is F.ValueBitmask:
        return RF(value_bitmask_filter=v2.ValueBitmask(mask=flt.mask))
    raise ParameterInvalid(f"not a row filter: {describe(flt)}")


# ---- mutations --------------------------------------------------------------------------


def _value_bytes(v, what: str) -> bytes:
    kind = v.WhichOneof("kind")
    if kind in ("raw_value", "bytes_value"):
        return getattr(v, kind)
    if kind == "string_value":
        return v.string_value.encode()
    raise ParameterInvalid(f"{what} must be raw_value or bytes_value, got {kind or 'nothing'}")


def _value_timestamp(v, what: str) -> int:
    kind = v.WhichOneof("kind")
    if kind == "raw_timestamp_micros":
        return v.raw_timestamp_micros
    if kind == "timestamp_value":
        return v.timestamp_value.seconds * 1_000_000 + v.timestamp_value.nanos // 1000
    if kind is None:
        return 0
    raise ParameterInvalid(f"{what} must be raw_timestamp_micros, got {kind}")


def _value_input(v, what: str) -> int | bytes:
    kind = v.WhichOneof("kind")
    if kind == "int_value":
        return v.int_value
    if kind in ("raw_value", "bytes_value"):
        return getattr(v, kind)
    if kind == "string_value":
        return v.string_value.encode()
    raise ParameterInvalid(f"{what} must be int_value or raw_value, got {kind or 'nothing'}")


def decode_mutation(m):
    """One ``Mutation`` -> SetCell / AddToCell / MergeToCell / DeleteFromColumn /
    DeleteFromFamily / DeleteFromRow. The library checks names, sizes and timestamps."""
    kind = m.WhichOneof("mutation")
    if kind == "set_cell":
        s = m.set_cell
        return SetCell(s.family_name, s.column_qualifier, s.timestamp_micros, s.value)
    if kind == "delete_from_column":
        d = m.delete_from_column
        start = end = None
        if d.HasField("time_range"):
            start = d.time_range.start_timestamp_micros or None
            end = d.time_range.end_timestamp_micros or None
        return DeleteFromColumn(d.family_name, d.column_qualifier, start, end)
    if kind == "delete_from_family":
        return DeleteFromFamily(m.delete_from_family.family_name)
    if kind == "delete_from_row":
        return DeleteFromRow()
    if kind in ("add_to_cell", "merge_to_cell"):
        a = getattr(m, kind)
        qualifier = _value_bytes(a.column_qualifier, f"{kind}.column_qualifier")
        ts = _value_timestamp(a.timestamp, f"{kind}.timestamp")
        if kind == "add_to_cell":
            return AddToCell(a.family_name, qualifier, ts, _value_input(a.input, "add_to_cell.input"))
        return MergeToCell(a.family_name, qualifier, ts,
                           _value_bytes(a.input, "merge_to_cell.input"))
    raise ParameterInvalid("Mutation has no mutation set")


def decode_mutations(mutations, what: str = "mutations", allow_empty: bool = False) -> list:
    if not mutations and not allow_empty:
        raise ParameterInvalid(f"No mutations provided ({what} is empty)")
    return [decode_mutation(m) for m in mutations]


def decode_entries(entries) -> tuple[list, list[int], dict[int, WidetableError], int]:
    """A MutateRowsRequest's ``entries`` -> ``(pairs, where, errors, total)``: the
    ``(row key, mutations)`` pairs the library takes, the index of each in the request,
    the error of each entry that does not decode (``entries[i].mutations`` named), and
    how many mutations the request holds. An entry of one SetCell, the common one, is
    decoded in line."""
    pairs: list = []
    where: list[int] = []
    errors: dict[int, WidetableError] = {}
    total = 0
    for i, e in enumerate(entries):
        mutations = e.mutations
        n = len(mutations)
        total += n
        if n == 1:
            m = mutations[0]
            if m.HasField("set_cell"):
                s = m.set_cell
                pairs.append((e.row_key, [make_set_cell(s.family_name, s.column_qualifier,
                                                        s.timestamp_micros, s.value)]))
                where.append(i)
                continue
        try:
            pairs.append((e.row_key, decode_mutations(mutations, f"entries[{i}].mutations")))
            where.append(i)
        except WidetableError as exc:
            errors[i] = exc
    return pairs, where, errors, total


def encode_mutation(mut):
    M = v2.Mutation
    t = type(mut)
    if t is SetCell:
        return M(set_cell=M.SetCell(family_name=mut.family, column_qualifier=mut.qualifier,
                                    timestamp_micros=mut.timestamp, value=mut.value))
    if t is DeleteFromColumn:
        d = M.DeleteFromColumn(family_name=mut.family, column_qualifier=mut.qualifier)
        if mut.start is not None or mut.end is not None:
            d.time_range.start_timestamp_micros = mut.start or 0
            d.time_range.end_timestamp_micros = mut.end or 0
        return M(delete_from_column=d)
    if t is DeleteFromFamily:
        return M(delete_from_family=M.DeleteFromFamily(family_name=mut.family))
    if t is DeleteFromRow:
        return M(delete_from_row=M.DeleteFromRow())
    if t in (AddToCell, MergeToCell):
        inp = (v2.Value(int_value=mut.input) if isinstance(mut.input, int)
               else v2.Value(raw_value=bytes(mut.input)))
        body = dict(family_name=mut.family, column_qualifier=v2.Value(raw_value=mut.qualifier),
                    timestamp=v2.Value(raw_timestamp_micros=mut.timestamp), input=inp)
        if t is AddToCell:
            return M(add_to_cell=M.AddToCell(**body))
        return M(merge_to_cell=M.MergeToCell(**body))
    raise ParameterInvalid(f"not a mutation: {describe(mut)}")


def decode_rule(r) -> ReadModifyWriteRule:
    kind = r.WhichOneof("rule")
    if kind == "append_value":
        return ReadModifyWriteRule(r.family_name, r.column_qualifier, append=r.append_value)
    if kind == "increment_amount":
        return ReadModifyWriteRule(r.family_name, r.column_qualifier,
                                   increment=r.increment_amount)
    raise ParameterInvalid(f"ReadModifyWriteRule for {r.family_name}:{r.column_qualifier!r} "
                           "sets neither append_value nor increment_amount")


def encode_rule(rule: ReadModifyWriteRule):
    if rule.increment is not None:
        return v2.ReadModifyWriteRule(family_name=rule.family, column_qualifier=rule.qualifier,
                                      increment_amount=rule.increment)
    return v2.ReadModifyWriteRule(family_name=rule.family, column_qualifier=rule.qualifier,
                                  append_value=rule.append or b"")


# ---- GC rules, families, tables ---------------------------------------------------------


def decode_gc(rule, _depth: int = 0):
    """A ``GcRule`` (None when no rule is set: keep everything)."""
    if _depth > G.MAX_DEPTH:
        raise ParameterInvalid(f"GcRule nests deeper than {G.MAX_DEPTH} levels")
    kind = rule.WhichOneof("rule")
    if kind is None:
        return None
    if kind == "max_num_versions":
        return G.MaxVersions(rule.max_num_versions)
    if kind == "max_age":
        d = rule.max_age
        if d.nanos % 1000:
            raise ParameterInvalid(f"GcRule.max_age {d.seconds}s {d.nanos}ns is not a whole "
                                   "number of microseconds")
        return G.MaxAge(d.seconds * 1_000_000 + d.nanos // 1000)
    parts = [decode_gc(r, _depth + 1) for r in getattr(rule, kind).rules]
    if any(p is None for p in parts):
        raise ParameterInvalid(f"GcRule.{kind} holds an empty rule")
    return (G.Union if kind == "union" else G.Intersection)(tuple(parts))


def encode_gc(rule):
    """The ``GcRule`` message of a library rule (None: an empty GcRule)."""
    msg = admin.GcRule()
    if rule is None:
        return msg
    t = type(rule)
    if t is G.MaxVersions:
        msg.max_num_versions = rule.n
    elif t is G.MaxAge:
        msg.max_age.seconds, micros = divmod(rule.micros, 1_000_000)
        msg.max_age.nanos = micros * 1000
    elif t is G.Union:
        msg.union.rules.extend(encode_gc(r) for r in rule.rules)
    elif t is G.Intersection:
        msg.intersection.rules.extend(encode_gc(r) for r in rule.rules)
    else:
        raise ParameterInvalid(f"not a GC rule: {describe(rule)}")
    return msg


_AGGREGATORS = {"sum": "sum", "min": "min", "max": "max", "hllpp_unique_count": "hll"}


def _decode_value_type(family: str, t) -> str | None:
    kind = t.WhichOneof("kind")
    if kind is None:
        return None
    if kind != "aggregate_type":
        raise NotSupported(f"family {family!r}: value_type {kind} is not supported "
                           "(only aggregate types)")
    agg = t.aggregate_type
    which = agg.WhichOneof("aggregator")
    if which is None:
        raise ParameterInvalid(f"family {family!r}: aggregate_type has no aggregator")
    input_kind = agg.input_type.WhichOneof("kind")
    if which != "hllpp_unique_count" and input_kind not in (None, "int64_type"):
        raise ParameterInvalid(f"family {family!r}: a {which} aggregate takes int64 input, "
                               f"not {input_kind}")
    return _AGGREGATORS[which]


def decode_family(name: str, cf) -> FamilySpec:
    """A ``ColumnFamily`` named ``name`` -> FamilySpec (storage options stay default:
    Bigtable's API has none)."""
    return FamilySpec(name, gc=decode_gc(cf.gc_rule) if cf.HasField("gc_rule") else None,
                      aggregate=_decode_value_type(name, cf.value_type)
                      if cf.HasField("value_type") else None)


def encode_family(spec: FamilySpec):
    cf = admin.ColumnFamily()
    if spec.gc is not None:
        cf.gc_rule.CopyFrom(encode_gc(spec.gc))
    if spec.aggregate is not None:
        agg = cf.value_type.aggregate_type
        which = {v: k for k, v in _AGGREGATORS.items()}[spec.aggregate]
        if which == "hllpp_unique_count":
            agg.input_type.bytes_type.SetInParent()
        else:
            agg.input_type.int64_type.SetInParent()
        getattr(agg, which).SetInParent()
    return cf


def encode_table(info: TableInfo, name: str, view: int = 0):
    """The admin ``Table`` of ``info``, named ``name`` (its full resource name). ``view``:
    NAME_ONLY (1) gives the name alone; unspecified and the others add the families."""
    table = admin.Table(name=name)
    if view != 1:
        for fam, spec in sorted(info.families.items()):
            table.column_families[fam].CopyFrom(encode_family(spec))
        table.granularity = 1  # MILLIS
    return table


def decode_splits(splits) -> tuple[bytes, ...]:
    """``CreateTableRequest.initial_splits`` -> split keys (each non-empty)."""
    keys = []
    for i, s in enumerate(splits):
        if not s.key:
            raise ParameterInvalid(f"initial_splits[{i}].key is empty")
        keys.append(s.key)
    return tuple(keys)


__all__ = [
    "decode_family", "decode_filter", "decode_gc", "decode_mutation", "decode_mutations",
    "decode_row_range", "decode_row_set", "decode_rule", "decode_splits", "encode_family",
    "encode_filter", "encode_gc", "encode_mutation", "encode_row_range", "encode_row_set",
    "encode_rule", "encode_table",
]
