"""The first documents of a query in a total order, found by tantivy on fast fields.

An order is a list of *levels* ``[(tantivy field, desc)]``: a sort field, then
the primary key's integer levels ``_k0 .. _k7`` (layout 2, see
``documents.order_levels``). tantivy orders by one fast field at a time and
leaves ties in any order, so :func:`first` works level by level. It asks for
``want + SLACK`` documents by the level's field. If the group of the boundary
value ``b`` (the last wanted one's) ends among them, every group of ties is
complete and the answer is those. Otherwise that group is cut: the documents
before it are kept, and the rest comes from the group ordered by the next key
levels' fast values (when the query matches at most GROUP_LIMIT documents, which the
first search counts), or else is asked of ``query AND field == b`` by the next
level (a filter that scans the level's column). Past the last level (keys longer than 64 bytes that agree on
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
# A hit handed to Python costs about what the filter's column scan costs for this many of
# the shard's documents (measured: ~0.75 us against ~2 ns): the group is read only when
# cheaper.
HIT_PER_COLUMN_ROWS = 400
FIELD_FACTOR = 8  # a first search by a sort field (not a key level) asks this many times more
GROUP_LIMIT = 4096  # a query matching up to this many documents orders a cut group from fast
# values (``_tied_group``) instead of filtering by the tied value


def first(shard, searcher, query, levels: list[tuple], want: int, counted: bool = False,
          valued: list | None = None):
    """Addresses of documents of ``query`` that include its first ``want`` in the order of
    ``levels``: ``(field, desc)``, or ``(field, desc, has)`` for a field that documents may
    lack (they come last, in any direction; ``has`` is the query of those that have it).
    ``counted``: ``(addresses, how many documents match query)``, the count taken by the
    first search when there is one. ``valued``: when the answer came from one search by
    one level, ``[(name, values of the constant levels before it), [(value, address)]]`` is
    put in it (shards that agree on the first part can be merged by those values before
    any document is read)."""
    if not counted:
        return _first(shard, searcher, query, levels, want, None, valued)
    total: list = []
    out = _first(shard, searcher, query, levels, want, total, valued)
    return out, (total[0] if total else shard.count(searcher, query))


def _first(shard, searcher, query, levels: list[tuple], want: int, total: list | None,
           valued: list | None = None) -> list:
    out: list = []
    q = query
    skipped: list = []  # the values of the constant levels passed over
    for at, level in enumerate(levels):
        name, desc = level[0], level[1]
        if want <= 0:
            return out
        if shard.constant(name):
            skipped.append(shard.level_value(name))
            continue  # one value in every document: it orders nothing
        n = None  # how many documents q matches: known at the first search, which counts
        # a sort field's values tie often: room for its boundary group in the first search
        ask = want + SLACK if name in shard.level_names else (want + SLACK) * FIELD_FACTOR
        if q is query:
            hits, n = shard.top_by_counted(searcher, q, name, ask, desc)
            if total is not None:
                total.append(n)
        else:
            hits = shard.top_by(searcher, q, name, ask, desc)
        whole = len(hits) < ask  # every document of q
        b = hits[want - 1][0] if len(hits) >= want else None
        end = min(want, len(hits))
        while end < len(hits) and hits[end][0] == b:
            end += 1
        if whole or end < len(hits):  # b's group ends among the hits: every tie is there
            got = hits if whole else hits[:end]
            if end > want and len(got) > want:  # order the boundary group by the next levels
                start = want - 1
                while start > 0 and got[start - 1][0] == b:
                    start -= 1
                group = [a for v, a in got[start:end]]
                part = _order_group(shard, searcher, group, levels[at + 1:], want - start)
                if part is not None:
                    got = got[:start] + [got[start + i] for i in part]
            if valued is not None and not out and q is query:
                valued += [(name, tuple(skipped)), got]
            return out + [a for _, a in got]
        keep = [a for v, a in hits[:want] if v != b]
        out += keep
        want -= len(keep)
        if b is not None and n is not None and n <= GROUP_LIMIT and \
                min(8 * (want + SLACK), n + 1) * HIT_PER_COLUMN_ROWS <= searcher.num_docs:
            group = _tied_group(shard, searcher, q, level, b, levels[at + 1:], want, n)
            if group is not None:
                return out + group
        if b is None:  # the tie is the documents without the field
            q = shard.q_bool([("must", q), ("must_not", level[2])])
        else:
            q = shard.q_bool([("must", q), ("filter", shard.q_eq(name, b))])
    if want <= 0:
        return out
    return out + shard.addresses(searcher, q, shard.count(searcher, q))


def _tied_group(shard, searcher, q, level: tuple, b: object, rest: list, want: int,
                n: int) -> list | None:
    """The first ``want`` of the documents of ``q`` (``n`` of them) that hold ``b`` at
    ``level`` (and any tied with the last of them on every level), ordered by the key levels
    in ``rest`` from their fast values: a search wide enough to hold the group (8 times the
    first, and so on up to every document of ``q``) and one column read per level, where a
    filter ``level == b`` would scan that level's whole column. None when the levels are
    not all key levels (the caller filters then)."""
    rest = [lv for lv in rest if not shard.constant(lv[0])]
    if any(len(lv) != 2 or lv[0] not in shard.level_names for lv in rest):
        return None
    limit = want + SLACK
    while True:  # a few times the hits asked for, then more: most groups are small
        limit = min(limit * 8, n + 1)
        hits = shard.top_by(searcher, q, level[0], limit, level[1])
        if len(hits) < limit or hits[-1][0] != b:
            break
        if limit > n:
            return None  # defensive: more documents than counted
    group = [a for v, a in hits if v == b]
    if not rest:
        return group  # nothing orders them further: the caller's exact sort does
    part = _order_group(shard, searcher, group, rest, want)
    return None if part is None else [group[i] for i in part]


def _order_group(shard, searcher, group: list, rest: list, want: int) -> list | None:
    """The positions in ``group`` (documents tied on the levels before ``rest``) of its first
    ``want`` in the order of the key levels ``rest``, from their fast values, with any tied
    with the last on every level (keys longer than the levels: the caller's exact sort
    orders them). None when ``rest`` holds a level that is not a key level."""
    rest = [lv for lv in rest if not shard.constant(lv[0])]
    if any(len(lv) != 2 or lv[0] not in shard.level_names for lv in rest):
        return None
    if len(group) <= want or not rest:
        return list(range(len(group)))
    cols = []
    for name, desc in rest:
        vs = shard.fast_values(searcher, name, group)
        if None in vs:
            return None
        cols.append([-v for v in vs] if desc else vs)
    keyed = sorted(zip(zip(*cols), range(len(group))))
    end = want
    while end < len(keyed) and keyed[end][0] == keyed[want - 1][0]:
        end += 1  # equal on every level: keys longer than the levels, sorted by the caller
    return sorted(i for _, i in keyed[:end])


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
