"""The first documents of a query in a total order, found by tantivy on fast fields.

An order is a list of *levels* ``[(tantivy field, desc)]``: a sort field, then
the primary key's integer levels ``_k0 .. _k7`` (layout 2, see
``documents.order_levels``). tantivy orders by one fast field at a time and
leaves ties in any order, so :func:`first` works level by level. It asks for
``want + SLACK`` documents by the level's field. If the group of the boundary
value ``b`` (the last wanted one's) ends among them, every group of ties is
complete and the answer is those. Otherwise that group is cut: the documents
before it are kept, and the rest is asked of ``query AND field == b`` by the
next level. Past the last level (keys longer than 64 bytes that agree on
all of them) every remaining document is returned. The caller decodes the
documents and sorts them exactly (``sort.SortKeys``); :func:`first` only
guarantees that they include the first ``want``. A key level that holds one
value in every document of the shard (a prefix all keys share, the zero padding
of short keys) is skipped.

A search-after token becomes :func:`beyond`: the documents strictly after a
key, as ``level0 > v0 OR (level0 == v0 AND level1 > v1) OR ...``, each a
range or term query on a fast field.

Each level costs one tantivy search over the matches (top-k on a fast field,
in Rust); Python sees at most ``want`` documents per part, whatever the depth.
"""

from __future__ import annotations

from ..keys import codec


SLACK = 16  # hits asked for beyond ``want``: a tied group that ends among them is complete


def first(shard, searcher, query, levels: list[tuple], want: int) -> list:
    """Addresses of documents of ``query`` that include its first ``want`` in the order of
    ``levels``: ``(field, desc)``, or ``(field, desc, has)`` for a field that documents may
    lack (they come last, in any direction; ``has`` is the query of those that have it)."""
    out: list = []
    q = query
    for level in levels:
        name, desc = level[0], level[1]
        if want <= 0:
            return out
        if shard.constant(name):
            continue  # one value in every document: it orders nothing
        hits = shard.top_by(searcher, q, name, want + SLACK, desc)
        if len(hits) < want + SLACK:  # every document of q
            return out + [a for _, a in hits]
        b = hits[want - 1][0]
        end = want
        while end < len(hits) and hits[end][0] == b:
            end += 1
        if end < len(hits):  # b's group ends among the hits: every tie is there
            return out + [a for _, a in hits[:end]]
        keep = [a for v, a in hits[:want] if v != b]
        out += keep
        want -= len(keep)
        if b is None:  # the tie is the documents without the field
            q = shard.q_bool([("must", q), ("must_not", level[2])])
        else:
            q = shard.q_bool([("must", q), ("filter", shard.q_eq(name, b))])
    if want <= 0:
        return out
    return out + shard.addresses(searcher, q, shard.count(searcher, q))


def beyond(shard, levels: list[tuple[str, bool]], values: list, inclusive_tail: bool = False):
    """The documents strictly after ``values`` (one per level) in the order of ``levels``;
    with ``inclusive_tail`` also those equal on every level (the caller drops the ones not
    after the full key). Returns ``(query, equal)``, ``equal`` being the all-equal query."""
    alts = []
    prefix: list = []
    for (name, desc), v in zip(levels, values):
        alts.append(("should", shard.q_bool(prefix + [("must", shard.q_beyond(name, v, desc))])))
        prefix = prefix + [("must", shard.q_eq(name, v))]
    equal = shard.q_bool(prefix)
    if inclusive_tail:
        alts.append(("should", equal))
    return shard.q_bool(alts, 1), equal


def long_key(pk: tuple, levels: int) -> bool:
    """Whether ``pk``'s order key is longer than ``levels`` integer levels hold."""
    return len(codec.encode_tuple(pk)) > 8 * levels
