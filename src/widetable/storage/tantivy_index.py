"""One tantivy index (a search-index shard): the only module that imports tantivy.

Nothing above sees tantivy's types: ``search/`` hands in documents as lists of
``(field, kind, value)`` and builds queries through :class:`Shard`'s ``q_*``
methods, whose results it treats as opaque handles.

Field kinds (``search/layout.py`` decides which field has which):

* ``raw``   text, one term per value, untokenized (keywords, ids, geohash cells)
* ``rawfast`` the same, also a fast field (a keyword that sorts and aggregates)
* ``tok``   text given as a token list, with positions for phrase queries: tokens
            without whitespace go in joined by spaces and tantivy's whitespace tokenizer
            (``WS``, registered again at every open: tantivy does not save tokenizers)
            splits them back; others go in pre-tokenized
* ``int`` / ``float`` / ``bool``   indexed numeric fields (also fast fields)
* ``fastfloat`` a float fast field only, read back by address (a point's coordinates)
* ``bytes`` the stored source of a document (``_src``)

The primary-key order of row documents: ``pk_levels`` = 0 (an index made before
levels existed) keeps ``_pk``, the order key as hex in a fast text field; N > 0
gives ``_k0`` ... ``_k<N-1>`` instead, integer fast fields holding the order key
8 bytes at a time (see ``search/ordered.py``); ``order_field`` puts ``_o``, one
integer fast field summarizing the whole key (``search/frame.py``), before them.
tantivy orders by an integer fast field in a few microseconds, but by a text one
at about 20 us a hit (each hit's term is looked up in the dictionary).

The checkpoint: ``commit(payload)`` replaces one document of kind ``ckpt``
holding ``payload`` in the same tantivy commit as the documents it covers, so
after a crash at any moment the index and the position it records agree (the
Python binding exposes no commit payload; this document is its equivalent).
"""

from __future__ import annotations

import os
import threading
from operator import itemgetter

import tantivy
from tantivy import Document, FieldType, Index, Occur, PreTokenizedString, Query, Token

_OCCUR = {"must": Occur.Must, "should": Occur.Should, "must_not": Occur.MustNot, "filter": Occur.Must}
_RANGE_TYPE = {"int": FieldType.Integer, "float": FieldType.Float, "bool": FieldType.Boolean}
WS = "widetable_ws"  # the whitespace tokenizer of ``tok`` fields
# writer memory: a segment is flushed when it fills (3 MB at least). Taken as documents
# arrive (a writer starts at ~3 MB): a full sync's 30 s between commits fill ~75 MB a shard
# at 1M rows; with 40 MB each shard held 6-8 segments there (5 with 200 MB), which every
# search visits: a range query, a term set, a match cost per segment.
HEAP = 200_000_000
CKPT_KIND = "ckpt"
CKPT_ID = "\x00ckpt"
SMALL_TERM_SET = 48  # up to this many terms, a Bool of term queries beats a term set (measured)
MAX_REGEX_TERM = 20  # characters: longer regexes pass tantivy's 1000-state limit (measured)


class Shard:
    """A tantivy index in ``path`` (None: in memory) with the given fields.

    ``fields``: ``[(name, kind, extra)]``; ``extra`` is the index option for text
    kinds. Thread-safe: writes take ``lock``; searches use their own searcher.
    """

    def __init__(self, path: str | None, fields: list[tuple[str, str]], pk_levels: int = 0,
                 heap: int = HEAP, order_field: bool = False) -> None:
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("_owner", tokenizer_name="raw", index_option="basic")
        sb.add_text_field("_kind", tokenizer_name="raw", index_option="basic")
        sb.add_text_field("_has", tokenizer_name="raw", index_option="basic")
        sb.add_integer_field("_ts", indexed=True, fast=True)
        sb.add_bytes_field("_src", stored=True)
        self.kinds: dict[str, str] = {}
        self.pk_levels = pk_levels
        self.level_names = (["_o"] if order_field else []) + [f"_k{i}" for i in range(pk_levels)]
        self._level_at = {name: i for i, name in enumerate(self.level_names)}
        if pk_levels:
            for name in self.level_names:
                sb.add_integer_field(name, fast=True)
                self.kinds[name] = "int"
        else:
            sb.add_text_field("_pk", tokenizer_name="raw", fast=True, index_option="basic")
        for name, kind in fields:
            self.kinds[name] = kind
            if kind == "raw":
                sb.add_text_field(name, tokenizer_name="raw", index_option="basic")
            elif kind == "rawfast":
                sb.add_text_field(name, tokenizer_name="raw", fast=True, index_option="basic")
            elif kind == "tok":
                sb.add_text_field(name, tokenizer_name=WS, index_option="position")
            elif kind == "int":
                sb.add_integer_field(name, indexed=True, fast=True)
            elif kind == "float":
                sb.add_float_field(name, indexed=True, fast=True)
            elif kind == "fastfloat":  # read back by address only (a point's coordinates)
                sb.add_float_field(name, fast=True)
            elif kind == "bool":
                sb.add_boolean_field(name, indexed=True, fast=True)
            else:
                raise ValueError(kind)
        self.schema = sb.build()
        self.path = path
        if path is not None:
            os.makedirs(path, exist_ok=True)
            self.index = Index(self.schema, path=path, reuse=True)
        else:
            self.index = Index(self.schema)
        self.index.register_tokenizer(WS, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
        self.index.config_reader("Manual")
        self.writer = self.index.writer(heap_size=heap, num_threads=1)
        self.lock = threading.Lock()
        self._row_kind = Query.term_query(self.schema, "_kind", "row", index_option="basic")
        # The levels that hold one value in every document ever added (deletes do not
        # narrow it), with that value (None: no document yet): such a level orders nothing,
        # and ``ordered.first`` skips it. Each add compares its levels with one C call.
        self._const: dict[int, int | None] = {}
        for i, name in enumerate(self.level_names):
            span = self._span(name)
            if span is None or span[0] == span[1]:
                self._const[i] = None if span is None else span[0]
        self._levels_changed()

    def _span(self, name: str) -> list[int] | None:
        se = self.index.searcher()
        if not se.num_docs:
            return None
        q = Query.all_query()
        lo = se.search(q, 1, count=False, order_by_field=name, order=tantivy.Order.Asc).hits
        hi = se.search(q, 1, count=False, order_by_field=name, order=tantivy.Order.Desc).hits
        if not lo or lo[0][0] is None:
            return None
        return [lo[0][0], hi[0][0]]

    def max_value(self, name: str) -> int:
        """The highest value of integer fast field ``name`` in the index (-1: none)."""
        span = self._span(name)
        return -1 if span is None else span[1]

    def _levels_changed(self) -> None:
        idx = sorted(self._const)
        self._const_vals = tuple(self._const[i] for i in idx)
        if not idx:
            self._const_of = lambda order: ()
        elif len(idx) == 1:
            i0 = idx[0]
            self._const_of = lambda order: (order[i0],)
        else:
            self._const_of = itemgetter(*idx)

    def _note_levels(self, order: list[int]) -> None:
        """``order`` differs from the constant levels' values: record its values where none
        was known, and drop the levels it breaks."""
        for i, v in list(self._const.items()):
            if v is None:
                self._const[i] = order[i]
            elif v != order[i]:
                del self._const[i]
        self._levels_changed()

    def level_value(self, name: str) -> int | None:
        """The one value every document ever added holds in level ``name``, or None."""
        i = self._level_at.get(name, -1)
        return None if i < 0 else self._const.get(i)

    def constant(self, name: str) -> bool:
        """Whether every document ever added holds one value in level ``name``."""
        i = self._level_at.get(name, -1)
        return i >= 0 and self._const.get(i) is not None

    # -- writing ---------------------------------------------------------------------

    def add(self, owner: str, kind: str, has: list[str], ts: int, src: bytes,
            values: list[tuple[str, object]], order: str | list[int] | None = None) -> None:
        """Add one document (caller holds ``lock``). ``values``: ``[(field, value)]``, a
        ``tok`` field's value being its token list, or a string of tokens without whitespace
        joined by single spaces; ``order``: the ``_pk`` sort string, or
        the ``pk_levels`` integers."""
        # One dict turned into a Document in one call (Document.from_dict): about a third of
        # the cost of an add_* call per value.
        fields: dict[str, object] = {"_owner": [owner], "_kind": [kind], "_ts": [ts], "_src": [src]}
        if has:
            fields["_has"] = has
        if order is not None:
            if isinstance(order, str):
                fields["_pk"] = [order]
            else:
                fields.update(zip(self.level_names, order))  # type: ignore[arg-type]
                if self._const_of(order) != self._const_vals:
                    self._note_levels(order)  # type: ignore[arg-type]
        kinds = self.kinds
        pre = []
        for name, value in values:
            k = kinds[name]
            if k == "tok":
                if type(value) is str:  # tokens already joined (they hold no whitespace)
                    got = fields.get(name)
                    if got is None:
                        fields[name] = [value]
                    else:
                        got.append(value)
                    continue
                joined = " ".join(value)  # type: ignore[arg-type]
                if len(joined.split()) != len(value):  # type: ignore[arg-type]
                    toks = [Token(t, i, 0, 0) for i, t in enumerate(value)]  # type: ignore[arg-type]
                    pre.append((name, PreTokenizedString(joined, toks)))
                    continue
                value = joined  # the whitespace tokenizer gives the tokens back
            elif k == "float" or k == "fastfloat":
                value = value + 0.0  # type: ignore[operator] # -0.0 sorts as 0.0
            got = fields.get(name)
            if got is None:
                fields[name] = [value]
            else:
                got.append(value)
        d = Document.from_dict(fields, self.schema)
        for name, p in pre:
            d.add_pre_tokenized_text(name, p)
        self.writer.add_document(d)

    def delete(self, owner: str) -> None:
        """Delete every document of ``owner`` (caller holds ``lock``)."""
        self.writer.delete_documents_by_term("_owner", owner)

    def delete_older(self, ts: int) -> None:
        """Delete the row documents whose ``_ts`` is below ``ts`` (caller holds ``lock``)."""
        q = Query.boolean_query([
            (Occur.Must, Query.range_query(self.schema, "_ts", FieldType.Integer, None, ts - 1)),
            (Occur.MustNot, Query.term_query(self.schema, "_kind", CKPT_KIND, index_option="basic")),
        ])
        self.writer.delete_documents_by_query(q)

    def commit(self, payload: bytes) -> None:
        """Publish every change since the last commit with ``payload`` as the checkpoint
        (caller holds ``lock``); searchers see it from the next ``searcher()`` on."""
        self.writer.delete_documents_by_term("_owner", CKPT_ID)
        self.add(CKPT_ID, CKPT_KIND, [], 0, payload, [])
        self.writer.commit()
        self.index.reload()

    def refresh(self) -> None:
        """Let searchers see what tantivy published since the last commit (segments its
        background merges made); no document changes."""
        self.index.reload()

    def clear(self) -> None:
        """Delete every document (caller holds ``lock``; takes effect at ``commit``)."""
        self.writer.delete_all_documents()

    def checkpoint(self) -> bytes | None:
        """The payload of the last commit, or None (a new index)."""
        se = self.index.searcher()
        hits = se.search(Query.term_query(self.schema, "_kind", CKPT_KIND, index_option="basic"),
                         1, count=False).hits
        if not hits:
            return None
        return se.doc(hits[0][1]).get_first("_src")

    def close(self) -> None:
        with self.lock:
            try:
                self.writer.wait_merging_threads()
            except Exception:  # noqa: BLE001 - already consumed
                pass

    # -- reading ---------------------------------------------------------------------

    def searcher(self):
        return self.index.searcher()

    def num_rows(self, searcher=None) -> int:
        se = searcher or self.index.searcher()
        return se.search(self._row_kind, 1, count=True).count

    def size_bytes(self) -> int:
        if self.path is None:
            return 0
        total = 0
        for entry in os.scandir(self.path):
            try:
                if entry.is_file():
                    total += entry.stat().st_size
            except FileNotFoundError:  # tantivy removed it (a temporary or merged file) meanwhile
                continue
        return total

    def run(self, searcher, query, limit: int) -> list[tuple[float, bytes]]:
        """``(score, _src)`` of up to ``limit`` documents matching ``query``."""
        if limit <= 0:
            return []
        hits = searcher.search(query, limit, count=False).hits
        doc = searcher.doc
        return [(score, doc(addr).get_first("_src")) for score, addr in hits]

    def run_ordered(self, searcher, query, limit: int, desc: bool) -> list[tuple[str, bytes]]:
        """``(_pk, _src)`` of the first ``limit`` documents matching ``query`` in ``_pk`` order."""
        if limit <= 0:
            return []
        hits = searcher.search(query, limit, count=False, order_by_field="_pk",
                               order=tantivy.Order.Desc if desc else tantivy.Order.Asc).hits
        doc = searcher.doc
        return [(key, doc(addr).get_first("_src")) for key, addr in hits]

    def count(self, searcher, query) -> int:
        return searcher.search(query, 1, count=True).count

    def top_by(self, searcher, query, name: str, limit: int, desc: bool) -> list[tuple[object, object]]:
        """``(value, address)`` of the first ``limit`` documents matching ``query`` in the order
        of fast field ``name`` (documents without a value last, ties in any order)."""
        if limit <= 0:
            return []
        return searcher.search(query, limit, count=False, order_by_field=name,
                               order=tantivy.Order.Desc if desc else tantivy.Order.Asc).hits

    def top_by_counted(self, searcher, query, name: str, limit: int,
                       desc: bool) -> tuple[list[tuple[object, object]], int]:
        """``top_by`` and the number of documents matching ``query``, in one search."""
        res = searcher.search(query, max(limit, 1), count=True, order_by_field=name,
                              order=tantivy.Order.Desc if desc else tantivy.Order.Asc)
        return (res.hits if limit > 0 else []), res.count

    def addresses(self, searcher, query, limit: int) -> list:
        """The addresses of up to ``limit`` documents matching ``query`` (any order)."""
        if limit <= 0:
            return []
        return [addr for _, addr in searcher.search(query, limit, count=False).hits]

    def sources(self, searcher, addresses: list) -> list[bytes]:
        doc = searcher.doc
        return [doc(a).get_first("_src") for a in addresses]

    def fast_values(self, searcher, name: str, addresses: list) -> list:
        """The values of numeric fast field ``name`` of ``addresses`` (None where absent)."""
        return searcher.fast_field_values(name, addresses) if addresses else []

    def aggregate(self, searcher, query, spec: dict) -> dict:
        """tantivy's aggregation request ``spec`` (Elasticsearch's JSON form) over ``query``."""
        return searcher.aggregate(query, spec)

    def doc_freq(self, searcher, name: str, term: str) -> int:
        """How many documents hold ``term`` in text field ``name`` (deleted ones included
        until their segment merges: an estimate)."""
        return searcher.doc_freq(name, term)

    def terms(self, searcher, name: str, prefix: str = "") -> list[str]:
        """Every term of ``name`` beginning with ``prefix`` (any order)."""
        return [t for t, _ in searcher.terms_with_prefix(name, prefix)]

    # -- queries (opaque handles) -----------------------------------------------------------

    def q_all(self):
        return Query.all_query()

    def q_none(self):
        return Query.empty_query()

    def q_rows(self):
        return self._row_kind

    def q_kind(self, kind: str):
        return Query.term_query(self.schema, "_kind", kind, index_option="basic")

    def q_term(self, name: str, value: object):
        opt = "position" if self.kinds.get(name) == "tok" else "basic"
        return Query.term_query(self.schema, name, value, index_option=opt)

    def q_terms(self, name: str, values: list):
        """Documents holding any of ``values`` in ``name``, each scoring 1.0."""
        if not values:
            return Query.empty_query()
        if len(values) <= SMALL_TERM_SET:
            # tantivy's term set query costs ~200 us per search whatever its size (it walks
            # an automaton over each segment's dictionary); a few term queries cost ~2 us each
            opt = "position" if self.kinds.get(name) == "tok" else "basic"
            terms = [(Occur.Should, Query.term_query(self.schema, name, v, index_option=opt))
                     for v in values]
            return Query.const_score_query(Query.boolean_query(terms), 1.0)
        return Query.term_set_query(self.schema, name, list(values))

    def q_has(self, name: str):
        return Query.term_query(self.schema, "_has", name, index_option="basic")

    def q_ids(self, owners: list[str]):
        if not owners:
            return Query.empty_query()
        if len(owners) <= SMALL_TERM_SET:
            terms = [(Occur.Should, Query.term_query(self.schema, "_owner", o, index_option="basic"))
                     for o in owners]
            return Query.const_score_query(Query.boolean_query(terms), 1.0)
        return Query.term_set_query(self.schema, "_owner", list(owners))

    def q_range(self, name: str, lo: object, hi: object, include_lower: bool, include_upper: bool):
        return Query.range_query(self.schema, name, _RANGE_TYPE[self.kinds[name]], lo, hi,
                                 include_lower if lo is not None else True,
                                 include_upper if hi is not None else True)

    def q_eq(self, name: str, value: object):
        """Documents whose fast field ``name`` holds ``value``."""
        kind = self.kinds[name]
        if kind in ("int", "float"):
            return Query.range_query(self.schema, name, _RANGE_TYPE[kind], value, value, True, True)
        return Query.term_query(self.schema, name, value, index_option="basic")

    def q_beyond(self, name: str, value: object, desc: bool):
        """Documents whose field ``name`` holds a value after ``value`` in the order (before it
        when ``desc``), exclusive."""
        kind = self.kinds[name]
        if kind in ("int", "float"):
            lo, hi = (None, value) if desc else (value, None)
            return Query.range_query(self.schema, name, _RANGE_TYPE[kind], lo, hi,
                                     lo is None, hi is None)
        if kind == "bool":
            if value is not desc:  # nothing after True ascending, nor after False descending
                return Query.empty_query()
            return Query.term_query(self.schema, name, not value, index_option="basic")
        if len(value) > MAX_REGEX_TERM:  # type: ignore[arg-type]
            # tantivy refuses regexes over 1000 states: pick the terms from the dictionary
            return self.q_terms(name, [t for t in self.terms(self.index.searcher(), name)
                                       if (t < value if desc else t > value)])  # type: ignore[operator]
        pattern = text_beyond(value, desc)  # type: ignore[arg-type]
        return Query.empty_query() if pattern is None else Query.regex_query(self.schema, name, pattern)

    def q_ts_from(self, ts: int):
        return Query.range_query(self.schema, "_ts", FieldType.Integer, ts, None)

    def q_regex(self, name: str, pattern: str):
        return Query.regex_query(self.schema, name, pattern)

    def q_phrase(self, name: str, tokens: list[str], slop: int):
        if len(tokens) == 1:
            return self.q_term(name, tokens[0])
        return Query.phrase_query(self.schema, name, tokens, slop)

    def q_bool(self, clauses: list[tuple[str, object]], minimum_should_match: int | None = None):
        subs = [(_OCCUR[occ], q) for occ, q in clauses]
        if not subs:
            return Query.all_query()
        return Query.boolean_query(subs, minimum_should_match)

    def q_const(self, query, score: float = 1.0):
        return Query.const_score_query(query, score)


_REGEX_META = set("\\.+*?()|[]{}^$#&-~\"")


def _lit(c: str) -> str:
    return "\\" + c if c in _REGEX_META else c


def text_beyond(s: str, desc: bool) -> str | None:
    """A regex (tantivy's syntax, whole term) for the strings after ``s`` in code point order,
    or before it when ``desc``; None when there are none (nothing is before "").

    Nested, so its size grows linearly with ``s``: after(c + t) = [>c].* | c after(t),
    after("") = .+; before(c + t) = "" | [<c].* | c before(t), before("") = nothing."""
    any_ = "[\\s\\S]"
    tail = None if desc else any_ + "+"
    for c in reversed(s):
        k = ord(c)
        alts = []
        if not desc and k < 0x10FFFF:
            alts.append(f"[\\x{{{k + 1:x}}}-\\x{{10ffff}}]{any_}*")
        if desc:
            alts.append("")
            if k > 0:
                alts.append(f"[\\x{{0}}-\\x{{{k - 1:x}}}]{any_}*")
        if tail is not None:
            alts.append(_lit(c) + "(" + tail + ")")
        tail = "|".join(alts) if alts else None
    return tail
