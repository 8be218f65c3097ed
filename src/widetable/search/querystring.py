"""Compact query strings -> queries, for the CLI (``widetable search TABLE INDEX QUERY``).

Grammar (``AND`` binds tighter than ``OR``; juxtaposition is ``AND``)::

    expr    := and ("OR" and)*
    and     := unary (["AND"] unary)*
    unary   := "NOT" unary | "(" expr ")" | "*" | clause
    clause  := field ":" (range | value | "*")
    range   := ("[" | "{") bound "TO" bound ("]" | "}")      [ ] inclusive, { } exclusive
    bound   := value | "*"
    value   := word | "quoted string"

The field's type decides the query: KEYWORD gives Term (a word with ``*`` or
``?`` gives Wildcard, one ending in a single ``*`` Prefix); TEXT gives Match
(a quoted value MatchPhrase); LONG, DATE, DOUBLE and BOOLEAN give Term with
the value converted; ``field:*`` is Exists; ranges give Range; a GEO_POINT
field takes ``field:"lat,lon,metres"`` (GeoDistance). Example::

    city:hangzhou AND price:[10 TO 20} AND NOT status:refunded
"""

from __future__ import annotations

import re

from ..errors import ParameterInvalid, describe
from .query import (
    BoolQuery, ExistsQuery, GeoDistanceQuery, MatchAllQuery, MatchPhraseQuery, MatchQuery,
    PrefixQuery, Query, RangeQuery, TermQuery, WildcardQuery,
)
from .schema import BOOLEAN, DATE, DOUBLE, GEO_POINT, LONG, TEXT, IndexMeta

_TOKEN = re.compile(r'\s*(?:(?P<q>"(?:[^"\\]|\\.)*")|(?P<p>[()\[\]{}])|(?P<w>[^\s()\[\]{}":]+)|(?P<c>:))')


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ParameterInvalid(f"cannot read the query at {text[pos:]!r}")
        pos = m.end()
        kind = m.lastgroup
        val = m.group(kind)  # type: ignore[arg-type]
        if kind == "q":
            val = re.sub(r"\\(.)", r"\1", val[1:-1])
        out.append((kind, val))  # type: ignore[arg-type]
    return out


class _Parser:
    def __init__(self, text: str, meta: IndexMeta) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.meta = meta
        self.text = text

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str]:
        t = self.peek()
        if t is None:
            raise ParameterInvalid(f"query {self.text!r} ends too early")
        self.i += 1
        return t

    def word(self, w: str) -> bool:
        t = self.peek()
        return t is not None and t[0] == "w" and t[1] == w

    def expr(self) -> Query:
        parts = [self.conj()]
        while self.word("OR"):
            self.i += 1
            parts.append(self.conj())
        return parts[0] if len(parts) == 1 else BoolQuery(should_queries=parts)

    def conj(self) -> Query:
        must, must_not = [], []
        while True:
            neg = False
            while self.word("NOT"):
                self.i += 1
                neg = not neg
            (must_not if neg else must).append(self.unary())
            if self.word("AND"):
                self.i += 1
                continue
            t = self.peek()
            if t is None or t == ("p", ")") or self.word("OR"):
                break
        if len(must) == 1 and not must_not:
            return must[0]
        return BoolQuery(must_queries=must, must_not_queries=must_not)

    def unary(self) -> Query:
        kind, val = self.take()
        if (kind, val) == ("p", "("):
            q = self.expr()
            if self.take() != ("p", ")"):
                raise ParameterInvalid(f"query {self.text!r}: missing ')'")
            return q
        if (kind, val) == ("w", "*"):
            return MatchAllQuery()
        if kind != "w" or self.peek() != ("c", ":"):
            raise ParameterInvalid(f"query {self.text!r}: expected field:value at {val!r}")
        self.i += 1
        return self.clause(val)

    def clause(self, field: str) -> Query:
        f = self.meta.field(field)
        kind, val = self.take()
        if kind == "p" and val in "[{":
            lo = self.take()
            if not self.word("TO"):
                raise ParameterInvalid(f"query {self.text!r}: a range is [a TO b]")
            self.i += 1
            hi = self.take()
            close = self.take()
            if close[0] != "p" or close[1] not in "]}":
                raise ParameterInvalid(f"query {self.text!r}: a range ends with ] or }}")
            lo_v = None if lo == ("w", "*") else _convert(f, lo[1])
            hi_v = None if hi == ("w", "*") else _convert(f, hi[1])
            return RangeQuery(field, lo_v, hi_v, val == "[", close[1] == "]")
        if (kind, val) == ("w", "*"):
            return ExistsQuery(field)
        if f.type == GEO_POINT:
            try:
                lat, lon, dist = (float(x) for x in val.split(","))
            except ValueError:
                raise ParameterInvalid(f'geo field {field!r} takes "lat,lon,metres", got {val!r}') from None
            return GeoDistanceQuery(field, f"{lat},{lon}", dist)
        if f.type == TEXT:
            return MatchPhraseQuery(field, val) if kind == "q" else MatchQuery(field, val)
        if kind == "w" and f.type not in (LONG, DATE, DOUBLE, BOOLEAN) and ("*" in val or "?" in val):
            if val.endswith("*") and "*" not in val[:-1] and "?" not in val:
                return PrefixQuery(field, val[:-1])
            return WildcardQuery(field, val)
        return TermQuery(field, _convert(f, val))


def _convert(f, text: str) -> object:
    try:
        if f.type in (LONG, DATE):
            return int(text)
        if f.type == DOUBLE:
            return float(text)
        if f.type == BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
    except ValueError:
        raise ParameterInvalid(f"field {f.name!r} of type {f.type} cannot take {describe(text)}") from None
    return text


def parse_query(text: str, meta: IndexMeta) -> Query:
    """The query ``text`` stands for on index ``meta``; ParameterInvalid naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ParameterInvalid(f"a query string must not be empty, got {describe(text)}")
    p = _Parser(text, meta)
    q = p.expr()
    if p.peek() is not None:
        raise ParameterInvalid(f"query {text!r}: unexpected {p.peek()[1]!r}")  # type: ignore[index]
    return q
