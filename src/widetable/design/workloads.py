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


def _field(name: str, d: dict) -> FieldSpec:
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
    if spec.kind in ("uniform", "zipf", "of") and spec.count < 1:
        raise ParameterInvalid(f"field {name!r} of kind {spec.kind} needs count >= 1")
    if spec.kind == "choice" and (not spec.values or (spec.weights and len(spec.weights) != len(spec.values))):
        raise ParameterInvalid(f"field {name!r}: choice needs values (and as many weights)")
    if spec.lo > spec.hi:
        raise ParameterInvalid(f"field {name!r}: lo {spec.lo} is above hi {spec.hi}")
    return spec


def _column(d: dict, fields: set[str]) -> KeyColumn:
    if not isinstance(d, dict) or "name" not in d or "from" not in d:
        raise ParameterInvalid(f"key column {describe(d)} needs a name and a from")
    source = tuple(d["from"]) if isinstance(d["from"], list) else d["from"]
    for s in source if isinstance(source, tuple) else (source,):
        if s not in fields:
            raise ParameterInvalid(f"key column {d['name']!r} is built from unknown field {s!r}")
    transform = d.get("transform")
    if transform not in TRANSFORMS:
        raise ParameterInvalid(f"unknown transform {transform!r}; use one of {TRANSFORMS[1:]}")
    type_ = d.get("type", "INTEGER" if transform in ("bucket", "mod") else "STRING")
    return KeyColumn(d["name"], source, type_, transform, d.get("param"))


def workload_from_dict(d: dict) -> Workload:
    """Build and check a workload from plain data (a parsed YAML/JSON file)."""
    if not isinstance(d, dict):
        raise ParameterInvalid(f"a workload is a mapping, got {describe(d)}")
    raw_fields = d.get("fields") or {}
    if not isinstance(raw_fields, dict):
        raise ParameterInvalid(f"a workload's fields are a mapping of name to field, got {describe(raw_fields)}")
    fields = tuple(_field(n, f) for n, f in raw_fields.items())
    names = {f.name for f in fields}
    if not fields:
        raise ParameterInvalid("a workload needs at least one field")
    for f in fields:
        for setting in ("per", "of"):
            other = getattr(f, setting)
            if other is not None and other not in names:
                raise ParameterInvalid(f"field {f.name!r}: {setting} names unknown field {other!r}")
    for setting in ("rate", "duration"):
        value = d.get(setting, 1.0)
        if type(value) not in (int, float) or not value > 0:
            raise ParameterInvalid(f"a workload's {setting} must be a number > 0, got {describe(value)}")
    raw_ops = d.get("operations") or [{"op": "write"}]
    if not isinstance(raw_ops, list):
        raise ParameterInvalid(f"a workload's operations are a list, got {describe(raw_ops)}")
    ops = []
    for o in raw_ops:
        if not isinstance(o, dict) or o.get("op") not in OPS:
            raise ParameterInvalid(f"operation {describe(o)} needs op among {OPS}")
        unknown = set(o) - set(Operation.__dataclass_fields__)
        if unknown:
            raise ParameterInvalid(f"operation {describe(o)} has unknown settings {sorted(unknown)}")
        o = {k: (tuple(v) if isinstance(v, list) else v) for k, v in o.items()}
        op = Operation(**o)
        for f in (*op.eq, *([op.range] if op.range else [])):
            if f not in names:
                raise ParameterInvalid(f"operation {describe(o)} names unknown field {f!r}")
        ops.append(op)
    designs = []
    for name, cols in (d.get("designs") or {}).items():
        note = ""
        if isinstance(cols, dict):
            note, cols = cols.get("note", ""), cols.get("key", [])
        designs.append(KeyDesign(name, tuple(_column(c, names) for c in cols), note))
    if not designs:
        raise ParameterInvalid("a workload needs at least one design")
    return Workload(
        name=d.get("name", "workload"), fields=fields, operations=tuple(ops), designs=tuple(designs),
        rate=float(d.get("rate", 200.0)), duration=float(d.get("duration", 120.0)),
        value_bytes=int(d.get("value_bytes", 100)), description=d.get("description", ""),
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
