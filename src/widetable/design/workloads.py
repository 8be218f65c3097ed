"""Workloads for the simulator: logical records, operations and candidate key designs.

A workload describes what an application does, independent of any key design:
the *fields* of its records (how each is drawn), the *operations* it issues
(writes, point reads, range reads over a field), their rate and duration.
Each *design* maps a record to a primary key (columns built from fields by
the key builders of ``widetable.keys``). The same operation stream, under a
fixed seed, is replayed against every design.

A workload file (YAML or JSON) has the same shape as :func:`Workload.to_dict`::

    name: monitoring
    rate: 400            # operations per simulated second
    duration: 120        # simulated seconds
    fields:
      ts: {kind: clock}                          # the virtual time, in seconds
      ip: {kind: uniform, count: 200, format: "10.10.{hi}.{lo}"}
    operations:
      - {op: write, weight: 9}
      - {op: range, weight: 1, eq: [ip], range: ts, span: 300}
    designs:
      ip-first: [{name: MachineIp, from: ip}, {name: Timestamp, type: INTEGER, from: ts}]
      md5-prefix: [{name: Hash, from: ip, transform: hash_prefix}, {name: Timestamp, type: INTEGER, from: ts}]

Field kinds: ``clock`` (virtual time; ``unit`` s or ms), ``uniform`` / ``zipf``
(one of ``count`` values, zipf with exponent ``s``), ``sequence`` (increasing,
per value of field ``per``), ``of`` (the group of field ``of``'s value:
``index * count // count_of``), ``int`` (uniform in ``[lo, hi)``), ``choice``
(``values`` with ``weights``). ``format`` renders an index with ``{i}``,
``{hi}`` (i // 256) and ``{lo}`` (i % 256). Key-column transforms: none, ``pad``
(zero-pad an integer to ``param`` digits), ``hash_prefix`` (``param`` hex
digits), ``salted`` / ``bucket`` / ``mod`` (``param`` buckets), ``reverse_digits``,
``reverse_domain``, ``reverse_timestamp``, ``concat`` (``from`` is a list).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import ParameterInvalid, describe

FIELD_KINDS = ("clock", "uniform", "zipf", "sequence", "of", "int", "choice")
TRANSFORMS = (
    None, "pad", "hash_prefix", "salted", "bucket", "mod", "reverse_digits",
    "reverse_domain", "reverse_timestamp", "concat",
)
OPS = ("write", "read", "range")


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """How one field of a record is drawn (see the module docstring for kinds)."""

    name: str
    kind: str
    count: int = 0
    format: str | None = None
    s: float = 0.99
    per: str | None = None
    of: str | None = None
    lo: int = 0
    hi: int = 0
    unit: str = "s"
    values: tuple = ()
    weights: tuple = ()


@dataclass(frozen=True, slots=True)
class KeyColumn:
    """One primary-key column: ``type`` STRING/INTEGER/BINARY built from field(s) ``source``."""

    name: str
    source: str | tuple[str, ...]
    type: str = "STRING"
    transform: str | None = None
    param: int | None = None


@dataclass(frozen=True, slots=True)
class KeyDesign:
    name: str
    columns: tuple[KeyColumn, ...]
    note: str = ""

    @property
    def primary_key(self) -> list[tuple[str, str]]:
        return [(c.name, c.type) for c in self.columns]


@dataclass(frozen=True, slots=True)
class Operation:
    """``write`` puts a record; ``read`` gets one; ``range`` reads the records whose
    ``eq`` fields are fixed and whose ``range`` field lies in a window of ``span``."""

    op: str
    weight: float = 1.0
    eq: tuple[str, ...] = ()
    range: str | None = None
    span: int = 60
    limit: int = 100


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    fields: tuple[FieldSpec, ...]
    operations: tuple[Operation, ...]
    designs: tuple[KeyDesign, ...]
    rate: float = 200.0
    duration: float = 120.0
    value_bytes: int = 100
    description: str = ""
    seed_rule: str = ""

    @property
    def planned_ops(self) -> int:
        """Operations one design replays by default: ``rate x duration``, rounded down.
        (How many a run may replay is the simulator's limit, not the workload's.)"""
        ops = self.rate * self.duration
        if not math.isfinite(ops):
            raise ParameterInvalid(f"workload {self.name!r}: rate {describe(self.rate)} x duration "
                                   f"{describe(self.duration)} is not a finite number of operations")
        return int(ops)

    def design(self, name: str) -> KeyDesign:
        for d in self.designs:
            if d.name == name:
                return d
        names = ", ".join(d.name for d in self.designs)
        raise ParameterInvalid(f"workload {self.name!r} has no design {name!r}; it has {names}")

    def to_dict(self) -> dict:
        """Plain data in the workload-file shape (defaults left out)."""
        defaults = {f: FieldSpec.__dataclass_fields__[f].default for f in FieldSpec.__dataclass_fields__}
        fields = {}
        for f in self.fields:
            d = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(f).items()
                 if k != "name" and v != defaults[k]}
            d["kind"] = f.kind
            fields[f.name] = d
        designs = {}
        for d in self.designs:
            cols = []
            for c in d.columns:
                col = {"name": c.name, "from": list(c.source) if isinstance(c.source, tuple) else c.source,
                       "type": c.type}
                if c.transform:
                    col["transform"] = c.transform
                if c.param is not None:
                    col["param"] = c.param
                cols.append(col)
            designs[d.name] = {"note": d.note, "key": cols} if d.note else cols
        ops = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(o).items()} for o in self.operations]
        return {
            "name": self.name, "description": self.description, "seed_rule": self.seed_rule,
            "rate": self.rate, "duration": self.duration, "value_bytes": self.value_bytes,
            "fields": fields, "operations": ops, "designs": designs,
        }


# -- parsing ----------------------------------------------------------------------


KEY_TYPES = ("STRING", "INTEGER", "BINARY")
UNITS = ("s", "ms")
MAX_ZIPF_S = 100.0
INDEXED_KINDS = ("uniform", "zipf", "of")  # fields with a count another field can group
INT_TRANSFORMS = ("pad", "mod", "reverse_timestamp")  # transforms of an integer value
PARAM_RANGES = {"pad": (1, None), "hash_prefix": (1, 32), "salted": (1, None), "bucket": (1, None),
                "mod": (1, None)}


def _is_number(v: object) -> bool:
    try:
        return type(v) in (int, float) and math.isfinite(v)
    except OverflowError:  # an int too large for a float
        return False


def _is_int(v: object) -> bool:
    return type(v) is int


def _check_format(name: str, fmt: object) -> None:
    if fmt is None:
        return
    if not isinstance(fmt, str):
        raise ParameterInvalid(f"field {name!r}: format must be a string, got {describe(fmt)}")
    try:
        fmt.format(i=0, hi=0, lo=0)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError) as exc:
        raise ParameterInvalid(
            f"field {name!r}: format {describe(fmt)} does not render an index with {{i}}, {{hi}} "
            f"and {{lo}}: {exc!r}"
        ) from None


def _check_zipf(name: str, spec: FieldSpec) -> None:
    s = spec.s
    if not _is_number(s) or not 0 <= s <= MAX_ZIPF_S:
        raise ParameterInvalid(f"field {name!r}: zipf s must be a number in [0, {MAX_ZIPF_S:g}], got {describe(s)}")
    try:
        1.0 / spec.count**s  # the weight of the rarest value must be a float
    except OverflowError:
        raise ParameterInvalid(f"field {name!r}: zipf s {describe(s)} is too large for count {spec.count}") from None


def _check_choice(name: str, spec: FieldSpec) -> None:
    values, weights = spec.values, spec.weights
    if not isinstance(values, tuple) or not values:
        raise ParameterInvalid(f"field {name!r}: choice needs a list of values, got {describe(values)}")
    bad = [v for v in values if v is None or isinstance(v, (tuple, dict))]
    if bad:
        raise ParameterInvalid(f"field {name!r}: choice value {describe(bad[0])} is not a key value")
    if weights == ():
        return
    if not isinstance(weights, tuple) or len(weights) != len(values):
        raise ParameterInvalid(f"field {name!r}: choice needs as many weights as values, got {describe(weights)}")
    bad = [w for w in weights if not _is_number(w) or w < 0]
    if bad:
        raise ParameterInvalid(f"field {name!r}: choice weight {describe(bad[0])} must be a number >= 0")
    if not any(weights):
        raise ParameterInvalid(f"field {name!r}: choice weights {describe(list(weights))} are all zero")


def _field(name: str, d: dict) -> FieldSpec:
    if not isinstance(name, str) or not name:
        raise ParameterInvalid(f"a field's name must be a non-empty string, got {describe(name)}")
    if not isinstance(d, dict) or d.get("kind") not in FIELD_KINDS:
        raise ParameterInvalid(f"field {name!r} needs a kind among {', '.join(FIELD_KINDS)}, got {describe(d)}")
    known = set(FieldSpec.__dataclass_fields__) - {"name"}
    unknown = set(d) - known
    if unknown:
        raise ParameterInvalid(f"field {name!r} has unknown settings {sorted(unknown)}")
    d = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()}
    spec = FieldSpec(name=name, **d)
    for setting in ("count", "lo", "hi"):
        if type(getattr(spec, setting)) is not int:
            raise ParameterInvalid(f"field {name!r}: {setting} must be an integer, got "
                                   f"{describe(getattr(spec, setting))}")
    for setting in ("per", "of"):
        if getattr(spec, setting) is not None and not isinstance(getattr(spec, setting), str):
            raise ParameterInvalid(f"field {name!r}: {setting} must be a field name, got "
                                   f"{describe(getattr(spec, setting))}")
    _check_format(name, spec.format)
    if spec.unit not in UNITS:
        raise ParameterInvalid(f"field {name!r}: unit must be one of {', '.join(UNITS)}, got {describe(spec.unit)}")
    if spec.kind in INDEXED_KINDS and spec.count < 1:
        raise ParameterInvalid(f"field {name!r} of kind {spec.kind} needs count >= 1")
    if spec.kind == "zipf":
        _check_zipf(name, spec)
    if spec.kind == "choice":
        _check_choice(name, spec)
    if spec.lo > spec.hi:
        raise ParameterInvalid(f"field {name!r}: lo {spec.lo} is above hi {spec.hi}")
    if spec.kind == "int" and spec.lo == spec.hi:
        raise ParameterInvalid(f"field {name!r}: int draws from [lo, hi), which is empty for lo = hi = {spec.lo}")
    return spec


def _makes_ints(f: FieldSpec) -> bool:
    """Whether every value of field ``f`` is an integer (no text format turns it into a string)."""
    if f.kind in ("clock", "sequence", "int"):
        return True
    if f.kind == "choice":
        return all(_is_int(v) for v in f.values)
    return f.format is None


def _column(d: dict, fields: dict[str, FieldSpec]) -> KeyColumn:
    if not isinstance(d, dict) or "name" not in d or "from" not in d:
        raise ParameterInvalid(f"key column {describe(d)} needs a name and a from")
    name = d["name"]
    if not isinstance(name, str) or not name:
        raise ParameterInvalid(f"a key column's name must be a non-empty string, got {describe(name)}")
    unknown = set(d) - {"name", "from", "type", "transform", "param"}
    if unknown:
        raise ParameterInvalid(f"key column {name!r} has unknown settings {sorted(unknown)}")
    transform = d.get("transform")
    if transform not in TRANSFORMS:
        raise ParameterInvalid(f"unknown transform {transform!r}; use one of {TRANSFORMS[1:]}")
    raw = d["from"]
    if (transform == "concat") != isinstance(raw, list) or isinstance(raw, list) and not raw:
        raise ParameterInvalid(
            f"key column {name!r}: from {describe(raw)} must be a list of fields with transform "
            f"concat, and one field otherwise"
        )
    source = tuple(raw) if isinstance(raw, list) else raw
    for s in source if isinstance(source, tuple) else (source,):
        if not isinstance(s, str) or s not in fields:
            raise ParameterInvalid(f"key column {name!r} is built from unknown field {describe(s)}")
    if transform in INT_TRANSFORMS and not _makes_ints(fields[source]):  # type: ignore[index]
        raise ParameterInvalid(
            f"key column {name!r}: transform {transform} needs an integer, but field {source!r} "
            f"makes strings (its format or values); drop the format or use another transform"
        )
    type_ = d.get("type", "INTEGER" if transform in ("bucket", "mod") else "STRING")
    if type_ not in KEY_TYPES:
        raise ParameterInvalid(f"key column {name!r}: type must be one of {', '.join(KEY_TYPES)}, got {describe(type_)}")
    param = d.get("param")
    bounds = PARAM_RANGES.get(transform)  # type: ignore[arg-type]
    if param is not None and bounds is None:
        raise ParameterInvalid(f"key column {name!r}: transform {transform} takes no param, got {describe(param)}")
    if param is not None and (not _is_int(param) or param < bounds[0]  # type: ignore[index]
                              or bounds[1] is not None and param > bounds[1]):  # type: ignore[index]
        where = f"in [{bounds[0]}, {bounds[1]}]" if bounds[1] is not None else f">= {bounds[0]}"  # type: ignore[index]
        raise ParameterInvalid(f"key column {name!r}: {transform} param must be an integer {where}, got {describe(param)}")
    return KeyColumn(name, source, type_, transform, param)


def _operation(o: object, fields: dict[str, FieldSpec]) -> Operation:
    if not isinstance(o, dict) or o.get("op") not in OPS:
        raise ParameterInvalid(f"operation {describe(o)} needs op among {OPS}")
    unknown = set(o) - set(Operation.__dataclass_fields__)
    if unknown:
        raise ParameterInvalid(f"operation {describe(o)} has unknown settings {sorted(unknown)}")
    op = Operation(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in o.items()})
    if not _is_number(op.weight) or op.weight < 0:
        raise ParameterInvalid(f"operation {describe(o)}: weight must be a number >= 0, got {describe(op.weight)}")
    if not isinstance(op.eq, tuple):
        raise ParameterInvalid(f"operation {describe(o)}: eq must be a list of fields, got {describe(op.eq)}")
    for f in (*op.eq, *([op.range] if op.range is not None else [])):
        if not isinstance(f, str) or f not in fields:
            raise ParameterInvalid(f"operation {describe(o)} names unknown field {describe(f)}")
    if not _is_int(op.span) or op.span < 0:
        raise ParameterInvalid(f"operation {describe(o)}: span must be an integer >= 0, got {describe(op.span)}")
    if not _is_int(op.limit) or op.limit < 1:
        raise ParameterInvalid(f"operation {describe(o)}: limit must be an integer >= 1, got {describe(op.limit)}")
    return op


def _design(name: object, cols: object, fields: dict[str, FieldSpec]) -> KeyDesign:
    if not isinstance(name, str) or not name:
        raise ParameterInvalid(f"a design's name must be a non-empty string, got {describe(name)}")
    note = ""
    if isinstance(cols, dict):
        note, cols = cols.get("note", ""), cols.get("key")
        if not isinstance(note, str):
            raise ParameterInvalid(f"design {name!r}: note must be a string, got {describe(note)}")
    if not isinstance(cols, list) or not cols:
        raise ParameterInvalid(f"design {name!r} needs a list of key columns, got {describe(cols)}")
    return KeyDesign(name, tuple(_column(c, fields) for c in cols), note)


def workload_from_dict(d: dict) -> Workload:
    """Build and check a workload from plain data (a parsed YAML/JSON file)."""
    if not isinstance(d, dict):
        raise ParameterInvalid(f"a workload is a mapping, got {describe(d)}")
    raw_fields = d.get("fields") or {}
    if not isinstance(raw_fields, dict):
        raise ParameterInvalid(f"a workload's fields are a mapping of name to field, got {describe(raw_fields)}")
    fields = tuple(_field(n, f) for n, f in raw_fields.items())
    by_name = {f.name: f for f in fields}
    if not fields:
        raise ParameterInvalid("a workload needs at least one field")
    for f in fields:
        for setting in ("per", "of"):
            other = getattr(f, setting)
            if other is not None and other not in by_name:
                raise ParameterInvalid(f"field {f.name!r}: {setting} names unknown field {other!r}")
        earlier = [g.name for g in fields[: fields.index(f)] if g.kind in INDEXED_KINDS]
        if f.kind == "of" and f.of not in earlier:
            raise ParameterInvalid(
                f"field {f.name!r}: of names {describe(f.of)}, which must be an earlier field of kind "
                f"{', '.join(INDEXED_KINDS)}"
            )
    for setting in ("rate", "duration"):
        value = d.get(setting, 1.0)
        if not _is_number(value) or not value > 0:
            raise ParameterInvalid(f"a workload's {setting} must be a number > 0 and finite, got {describe(value)}")
    rate, duration = d.get("rate", 200.0), d.get("duration", 120.0)
    if not math.isfinite(float(rate) * float(duration)):
        raise ParameterInvalid(f"a workload's rate {describe(rate)} x duration {describe(duration)} "
                               f"must be a finite number of operations")
    value_bytes = d.get("value_bytes", 100)
    if not _is_int(value_bytes) or value_bytes < 0:
        raise ParameterInvalid(f"a workload's value_bytes must be an integer >= 0, got {describe(value_bytes)}")
    for setting in ("name", "description", "seed_rule"):
        if not isinstance(d.get(setting, ""), str):
            raise ParameterInvalid(f"a workload's {setting} must be a string, got {describe(d[setting])}")
    raw_ops = d.get("operations") or [{"op": "write"}]
    if not isinstance(raw_ops, list):
        raise ParameterInvalid(f"a workload's operations are a list, got {describe(raw_ops)}")
    ops = [_operation(o, by_name) for o in raw_ops]
    if not sum(o.weight for o in ops) > 0:
        raise ParameterInvalid(f"a workload's operation weights {[o.weight for o in ops]} are all zero")
    raw_designs = d.get("designs") or {}
    if not isinstance(raw_designs, dict):
        raise ParameterInvalid(f"a workload's designs are a mapping of name to key columns, got {describe(raw_designs)}")
    designs = [_design(name, cols, by_name) for name, cols in raw_designs.items()]
    if not designs:
        raise ParameterInvalid("a workload needs at least one design")
    return Workload(
        name=d.get("name", "workload"), fields=fields, operations=tuple(ops), designs=tuple(designs),
        rate=float(d.get("rate", 200.0)), duration=float(d.get("duration", 120.0)),
        value_bytes=value_bytes, description=d.get("description", ""),
        seed_rule=d.get("seed_rule", ""),
    )


def load_workload(path: str | Path) -> Workload:
    """Read a workload from a ``.yaml``/``.yml`` or ``.json`` file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        if str(path).endswith((".yaml", ".yml")):
            import yaml

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ValueError(exc) from None
        else:
            data = json.loads(text)
    except (OSError, ValueError) as exc:  # a decoding error is a ValueError too
        raise ParameterInvalid(f"cannot read workload {str(path)!r}: {exc}") from None
    return workload_from_dict(data)


# -- built-ins --------------------------------------------------------------------

_TS = {"name": "Timestamp", "from": "ts", "type": "INTEGER"}
_IP = {"name": "MachineIp", "from": "ip"}


def monitoring() -> Workload:
    """Seed 000's monitoring case: every machine reports its metrics each second."""
    return workload_from_dict({
        "name": "monitoring",
        "description": "200 machines report metrics; dashboards read one machine's last 5 minutes",
        "seed_rule": "seed 000 §主鍵設計 常見熱點問題 (方法一/方法二/方法三)",
        "rate": 400, "duration": 120,
        "fields": {
            "ts": {"kind": "clock", "unit": "ms"},
            "ip": {"kind": "uniform", "count": 200, "format": "10.10.{hi}.{lo}"},
        },
        "operations": [
            {"op": "write", "weight": 9},
            {"op": "range", "weight": 1, "eq": ["ip"], "range": "ts", "span": 300_000, "limit": 50},
        ],
        "designs": {
            "timestamp-first": {"note": "Timestamp, MachineIp: every write lands on the last partition",
                                "key": [_TS, _IP]},
            "ip-first": {"note": "方法一: MachineIp, Timestamp", "key": [_IP, _TS]},
            "md5-prefix": {"note": "方法二: md5(ip)[:4],ip then Timestamp",
                           "key": [{"name": "HashIp", "from": "ip", "transform": "hash_prefix"}, _TS]},
            "bucketed-16": {"note": "方法三: bucket(ts) of 16, Timestamp, MachineIp",
                            "key": [{"name": "Bucket", "from": "ts", "transform": "bucket", "param": 16},
                                    _TS, _IP]},
        },
    })


def student_card() -> Workload:
    """Seed 000's student-card case: card swipes at canteen terminals, each candidate partition key."""
    card = {"name": "CardID", "from": "card"}
    seller = {"name": "SellerID", "from": "seller"}
    device = {"name": "DeviceID", "from": "device"}
    order = {"name": "OrderNumber", "from": "order", "type": "INTEGER"}
    return workload_from_dict({
        "name": "student-card",
        "description": "20,000 cards swipe at 200 terminals of 20 sellers; popular canteens take most swipes",
        "seed_rule": "seed 000 §設計案例 學生卡消費記錄",
        "rate": 400, "duration": 120,
        "fields": {
            "card": {"kind": "uniform", "count": 20000, "format": "card{i:05d}"},
            "device": {"kind": "zipf", "count": 200, "s": 1.1, "format": "dev{i:03d}"},
            "seller": {"kind": "of", "of": "device", "count": 20, "format": "seller{i:02d}"},
            "order": {"kind": "sequence", "per": "device"},
        },
        "operations": [
            {"op": "write", "weight": 8},
            {"op": "range", "weight": 2, "eq": ["card"], "range": "order", "span": 1000000, "limit": 20},
        ],
        "designs": {
            "CardID": {"note": "recommended: CardID, DeviceID, SellerID, OrderNumber",
                       "key": [card, device, seller, order]},
            "SellerID": {"note": "few sellers, most swipes at a few", "key": [seller, card, device, order]},
            "DeviceID": {"note": "unique terminals, but busy canteen terminals are hot",
                         "key": [device, seller, card, order]},
            "OrderNumber": {"note": "increasing per terminal: a tail hot spot",
                            "key": [order, device, seller, card]},
        },
    })


def ycsb_zipfian() -> Workload:
    """A YCSB workload A: 50% reads, 50% updates of zipfian-popular records."""
    return workload_from_dict({
        "name": "ycsb-zipfian",
        "description": "YCSB A: 50/50 read/update over 100,000 records, zipfian popularity (s=0.99)",
        "seed_rule": "seed 001 §1.3 热点规避原则; seed 004 依序數字 ID",
        "rate": 500, "duration": 120,
        "fields": {"user": {"kind": "zipf", "count": 100000}},
        "operations": [{"op": "read", "weight": 1}, {"op": "write", "weight": 1}],
        "designs": {
            "ordered": {"note": "user id zero-padded: popular (low) ids are neighbours",
                        "key": [{"name": "UserId", "from": "user", "transform": "pad", "param": 10}]},
            "hashed": {"note": "md5 prefix: popular ids spread over the key space",
                       "key": [{"name": "UserId", "from": "user", "transform": "hash_prefix"}]},
            "reversed": {"note": "reversed digits (seed 004 反向版本)",
                         "key": [{"name": "UserId", "from": "user", "transform": "reverse_digits"}]},
        },
    })


BUILTINS = {"monitoring": monitoring, "student-card": student_card, "ycsb-zipfian": ycsb_zipfian}


def get_workload(name_or_path: str) -> Workload:
    """A built-in workload by name, or one read from a YAML/JSON file."""
    if name_or_path in BUILTINS:
        return BUILTINS[name_or_path]()
    if Path(name_or_path).is_file():
        return load_workload(name_or_path)
    raise ParameterInvalid(
        f"no workload {name_or_path!r}: use a file or one of {', '.join(sorted(BUILTINS))}"
    )


__all__ = [
    "BUILTINS", "FieldSpec", "KeyColumn", "KeyDesign", "Operation", "Workload",
    "get_workload", "load_workload", "monitoring", "student_card", "workload_from_dict", "ycsb_zipfian",
]
