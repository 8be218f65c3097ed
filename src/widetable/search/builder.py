"""Row documents built by a plan made once per index layout (the sync's hot path).

:class:`RowBuilder` gives for a base row what ``documents.row_values`` and
``documents.build_documents`` give together, the same values in the same order,
without their per-field dispatch: each field's converter and emitter are picked
once, when the layout is made. A TEXT field analyzed by ``single_word`` emits
its tokens already joined by spaces (they hold no whitespace; the adapter's
whitespace tokenizer splits them back), which spares building a list the adapter
would join. Arrays and NESTED fields take the general functions.
"""

from __future__ import annotations

import math

from . import analyzers, geo
from .documents import FieldLayout, Rejected, build_documents, convert_field, parse_date, parse_point
from .schema import (
    BOOLEAN, DATE, DOUBLE, GEO_POINT, KEYWORD, LONG, NESTED, SINGLE_WORD, TEXT, FieldSchema,
)

_I64_MIN, _I64_END = -2**63, 2**63


def _string(f: FieldSchema, v: object) -> object:
    if type(v) is not str:
        raise Rejected(f.name, v, f"{f.type} needs a string")
    return v


def _long(f: FieldSchema, v: object) -> object:
    if type(v) is not int or not _I64_MIN <= v < _I64_END:
        raise Rejected(f.name, v, "LONG needs a 64-bit integer")
    return v


def _double(f: FieldSchema, v: object) -> object:
    if type(v) is float and math.isfinite(v):
        return v
    if type(v) is int and abs(v) < 2**53:
        return float(v)
    raise Rejected(f.name, v, "DOUBLE needs a finite number")


def _boolean(f: FieldSchema, v: object) -> object:
    if type(v) is not bool:
        raise Rejected(f.name, v, "BOOLEAN needs a boolean")
    return v


def _date(f: FieldSchema, v: object) -> object:
    return parse_date(f.name, v)


def _point(f: FieldSchema, v: object) -> object:
    return parse_point(f.name, v)


_SCALAR = {KEYWORD: _string, TEXT: _string, LONG: _long, DOUBLE: _double, BOOLEAN: _boolean,
           DATE: _date, GEO_POINT: _point}
_SPLIT_WORDS = analyzers.single_word_pattern()


class RowBuilder:
    """``build(pk, columns)`` -> ``(values, has, pairs, children)`` of one row (Rejected
    when a value does not fit its field), as ``row_values`` then ``build_documents``."""

    def __init__(self, layout: FieldLayout, pk_names: tuple[str, ...]) -> None:
        self.layout = layout
        self._simple = True
        plan = []
        for f in layout.meta.fields:
            src = f.source
            pk_index = pk_names.index(src) if src in pk_names else -1
            if f.type == NESTED or f.is_array:
                self._simple = False
                plan.append((f, src, pk_index, None, None))
                continue
            slot = layout.slots[f.name]
            emit = None
            if f.index:
                emit = self._emitter(f, slot.name)
            plan.append((f, src, pk_index, _SCALAR[f.type], emit))
        self._plan = plan

    def _emitter(self, f: FieldSchema, name: str):
        if f.type == TEXT:
            if (f.analyzer or SINGLE_WORD) == SINGLE_WORD:
                findall = _SPLIT_WORDS.findall

                def text(pairs: list, v: str) -> None:
                    toks = findall(v.lower())
                    if toks:
                        pairs.append((name, " ".join(toks)))
                return text
            analyzer, params = f.analyzer, f.analyzer_parameter

            def other_text(pairs: list, v: str) -> None:
                toks = analyzers.analyze(v, analyzer, params)  # type: ignore[arg-type]
                if toks:
                    pairs.append((name, toks))
            return other_text
        if f.type == GEO_POINT:
            cells_of = geo.cells_of
            fast = self.layout.slots[f.name].point
            if fast is not None:
                lat_name, lon_name = fast

                def fast_point(pairs: list, v: tuple) -> None:
                    pairs.extend((name, c) for c in cells_of(v[0], v[1]))
                    pairs.append((lat_name, v[0]))
                    pairs.append((lon_name, v[1]))
                return fast_point

            def point(pairs: list, v: tuple) -> None:
                pairs.extend((name, c) for c in cells_of(v[0], v[1]))
            return point

        def scalar(pairs: list, v: object) -> None:
            pairs.append((name, v))
        return scalar

    def build(self, pk: tuple, columns: dict) -> tuple[dict, list, list, list]:
        if not self._simple:
            return self._general(pk, columns)
        values: dict = {}
        has: list = []
        pairs: list = []
        get = columns.get
        for f, src, pk_index, conv, emit in self._plan:
            v = pk[pk_index] if pk_index >= 0 else get(src)
            if v is None:
                continue
            cv = conv(f, v)
            values[f.name] = cv
            has.append(f.name)
            if emit is not None:
                emit(pairs, cv)
        return values, has, pairs, []

    def _general(self, pk: tuple, columns: dict) -> tuple[dict, list, list, list]:
        values = {}
        for f, src, pk_index, conv, _ in self._plan:
            v = pk[pk_index] if pk_index >= 0 else columns.get(src)
            if v is None:
                continue
            cv = conv(f, v) if conv is not None else convert_field(f, v)
            if cv is not None:
                values[f.name] = cv
        has, pairs, children = build_documents(self.layout, values)
        return values, has, pairs, children
