"""Search-index benchmark (issue 22's section 7): ``python -m bench.search [--rows N] [--peers ...]``.

Data: rows like the student-card table (card, seller, device, time, amount), a
text column of about 20 words (English and Chinese) and a geo point. Reports, in
one run:

* full sync: rows indexed per second, and the ratio to raw tantivy indexing the
  same documents (a tantivy index fed straight from Python, one writer), timed before
  and after ours (the mean of the two);
* p50 latency of a term, a range with a sort, a bool of 3 clauses, a match and a
  geo distance query (limit 10, 2 columns), and a terms group-by with a sum, with
  the ratio to raw tantivy answering the same query in the same order (the primary
  key: raw tantivy orders by an integer fast field holding each row's rank, the
  best it can do) plus one row read per hit; raw tantivy's own default, the 10 best
  scores in any order, is shown beside it for reference;
* the same queries on the peers (``bench/search_peers.py``): SQLite with FTS5 and
  B-tree indexes, PostgreSQL with tsvector + GIN and B-tree indexes, on the same
  rows (their answers are checked against widetable's); every system's calls are
  interleaved, one of each per round, so the machine's load touches them alike;
* write-to-searchable p99 at a moderate write rate;
* put_row throughput with one search index / without;
* routing: a query routed to one shard / the same query on all 8;
* the RSS of this process with the index open.

1,000,000 rows is the issue's size (``--rows 1000000``); the default is smaller so a
run takes a few minutes.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time

import tantivy

import widetable
from widetable.search import (
    DESC, BoolQuery, FieldSort, GeoDistanceQuery, GroupByField, MatchAllQuery, MatchQuery, RangeQuery,
    SumAgg, TermQuery, geo,
)

from . import search_peers

WORDS = ("hello world student card seller market price cheap fast good school canteen "
         "杭州 西湖 学生 食堂 充值 消费 北京 上海").split()
FIELDS = [("seller", "KEYWORD"), ("device", "KEYWORD"), ("ts", "DATE"), ("amount", "LONG"),
          {"name": "note", "type": "TEXT", "analyzer": "single_word"}, ("loc", "GEO_POINT")]


def rows(n: int, seed: int = 7):
    rnd = random.Random(seed)
    t0 = 1_700_000_000_000
    for i in range(n):
        yield (f"card{i:08d}",), {
            "seller": f"S{rnd.randrange(500):03d}", "device": f"D{rnd.randrange(2000):04d}",
            "ts": t0 + i * 1000, "amount": rnd.randrange(1, 10_000),
            "note": " ".join(rnd.choice(WORDS) for _ in range(20)),
            "loc": f"{30 + rnd.random():.6f},{120 + rnd.random():.6f}",
        }


def raw_index(path: str, n: int) -> tuple[tantivy.Index, float]:
    """Raw tantivy over the same documents (default tokenizer; geo as two fast floats; the
    row's rank in key order as an integer fast field, ``seq``)."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw")
    sb.add_integer_field("seq", fast=True)
    sb.add_text_field("seller", tokenizer_name="raw", fast=True)
    sb.add_text_field("device", tokenizer_name="raw")
    sb.add_integer_field("ts", indexed=True, fast=True)
    sb.add_integer_field("amount", indexed=True, fast=True)
    sb.add_text_field("note")
    sb.add_float_field("lat", indexed=True, fast=True)
    sb.add_float_field("lon", indexed=True, fast=True)
    schema = sb.build()
    os.makedirs(path, exist_ok=True)
    ix = tantivy.Index(schema, path=path)
    w = ix.writer(heap_size=50_000_000, num_threads=1)
    start = time.perf_counter()
    for i, (pk, c) in enumerate(rows(n)):
        d = tantivy.Document()
        d.add_text("id", pk[0])
        d.add_integer("seq", i)
        d.add_text("seller", c["seller"])
        d.add_text("device", c["device"])
        d.add_integer("ts", c["ts"])
        d.add_integer("amount", c["amount"])
        d.add_text("note", c["note"])
        lat, lon = map(float, c["loc"].split(","))
        d.add_float("lat", lat)
        d.add_float("lon", lon)
        w.add_document(d)
    w.commit()
    w.wait_merging_threads()
    ix.reload()
    return ix, time.perf_counter() - start


def p50(fn, reps: int = 30) -> float:
    """The median of ``reps`` timed calls (after one warm-up), ms."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def p50s(fns: dict, reps: int = 30) -> dict:
    """The median ms of each of ``fns``, their calls interleaved (one of each per round, after
    a warm-up), so that a change of the machine's load touches them all alike."""
    for fn in fns.values():
        fn()
    times: dict = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def layer_profile(fn, calls: int = 300) -> dict[str, float]:
    """Microseconds per call of ``fn`` by layer (tantivy, RocksDB, the search package, the
    table layer, codecs, the rest), from cProfile's own time of each function."""
    import cProfile
    import pstats
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        fn()
    pr.disable()
    out: dict[str, float] = {}
    for (path, _line, func), (_cc, _nc, tt, _ct, _callers) in pstats.Stats(pr).stats.items():  # type: ignore[attr-defined]
        text = path + func
        if "tantivy" in text:
            layer = "tantivy"
        elif "Rdict" in text or "rocks" in path:
            layer = "rocksdb"
        elif "msgspec" in text or "msgpack" in text or "/keys/" in path:
            layer = "codecs"
        elif "/search/" in path:
            layer = "search"
        elif "/table/" in path or "/partition/" in path:
            layer = "table"
        else:
            layer = "other"
        out[layer] = out.get(layer, 0.0) + tt * 1e6 / calls
    return out


SERVE = """
import sys, time, widetable
from widetable.search import *
db = widetable.open(sys.argv[1], purge_interval=None)
db.wait_for_search_indexes("card", "ix", timeout=600)
for q, sort in [(TermQuery("seller", "S042"), None),
                (RangeQuery("amount", 100, 200, True, True), [FieldSort("amount", DESC)]),
                (MatchQuery("note", "canteen"), None), (GeoDistanceQuery("loc", "30.5,120.5", 1000), None)]:
    for _ in range(5):
        db.search("card", "ix", q, sort=sort, limit=10, columns=["seller", "amount"])
gb = [GroupByField("g", "seller", size=10, sub_aggs=(SumAgg("s", "amount"),))]
db.search("card", "ix", MatchAllQuery(), limit=0, group_bys=gb)
with open("/proc/self/status") as f:
    print(next(int(x.split()[1]) // 1024 for x in f if x.startswith("VmRSS:")))
db.close()
"""


def serving_rss_mb(path: str) -> int:
    """The RSS of a fresh process that opens the store at ``path`` and runs each kind of
    query on its index: the serving process, without this benchmark's peers and raw index."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", SERVE, path], capture_output=True, text=True,
                         timeout=900, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--peers", default="sqlite,postgres",
                    help="comma-separated peers to measure: sqlite, postgres (empty: none)")
    ap.add_argument("--reps", type=int, default=30, help="repetitions per p50")
    ap.add_argument("--profile", action="store_true",
                    help="also print where each widetable query's time goes, by layer (cProfile)")
    args = ap.parse_args(argv)
    n = args.rows
    root = tempfile.mkdtemp(prefix="wt-bench-search-")
    t_run = time.perf_counter()
    try:
        store = os.path.join(root, "store")
        db = widetable.open(store, purge_interval=None)
        t = db.create_table("card", [("card", "STRING")])
        batch = []
        for pk, cols in rows(n):
            batch.append(("card", "put", pk, cols))
            if len(batch) == 200:
                db.batch_write_row(batch)
                batch = []
        if batch:
            db.batch_write_row(batch)
        # raw tantivy before and after ours: the machine's load drifts, so the ratio uses both
        _, raw_before = raw_index(os.path.join(root, "raw0"), n)
        shutil.rmtree(os.path.join(root, "raw0"), ignore_errors=True)
        start = time.perf_counter()
        db.create_search_index("card", "ix", FIELDS, shards=2)
        assert db.wait_for_search_indexes("card", "ix", timeout=3600)
        sync_s = time.perf_counter() - start
        raw, raw_after = raw_index(os.path.join(root, "raw"), n)
        raw_s = (raw_before + raw_after) / 2
        print(f"rows {n}, search index shards 2, load average {os.getloadavg()[0]:.1f}")
        print(f"full sync       {n / sync_s:10.0f} rows/s   raw tantivy {n / raw_s:10.0f} rows/s"
              f" ({n / raw_before:.0f} before, {n / raw_after:.0f} after)"
              f"   ratio {raw_s / sync_s:.2f} (target >= 0.5)")
        st = db._search.states[("card", "ix")]  # noqa: SLF001 - the bench reports segments
        print(f"segments: widetable {[s.searcher().num_segments for s in st.shards]} "
              f"raw {raw.searcher().num_segments}")

        peers = search_peers.open_peers(root, rows, n, [p for p in args.peers.split(",") if p])
        for p in peers:
            print(f"peer {p.name}: loaded")
        se = raw.searcher()
        schema = raw.schema
        cols = ["seller", "amount"]
        clat, clon = 30.5, 120.5

        def raw_run(q, order="seq", desc=False, exact=None):
            """The first 10 hits in ``order`` (None: by score), one row read each; ``exact``
            filters hits by their (lat, lon), asking for more until 10 pass."""
            k = 10 if exact is None else 32
            while True:
                o = tantivy.Order.Desc if desc else tantivy.Order.Asc
                hits = (se.search(q, k, count=False, order_by_field=order, order=o) if order
                        else se.search(q, k, count=False)).hits
                addrs = [a for _, a in hits]
                if exact is not None:
                    lats = se.fast_field_values("lat", addrs)
                    lons = se.fast_field_values("lon", addrs)
                    ok = [a for a, la, lo in zip(addrs, lats, lons) if exact(la, lo)]
                    if len(ok) < 10 and len(hits) == k:
                        k *= 4
                        continue
                    addrs = ok[:10]
                return [t.get_row((se.doc(a)["id"][0],), columns=cols) for a in addrs]

        in_circle = (lambda la, lo: geo.haversine(clat, clon, la, lo) <= 1000)
        I, F = tantivy.FieldType.Integer, tantivy.FieldType.Float
        raw_q = {
            "term": (tantivy.Query.term_query(schema, "seller", "S042"), "seq", False, None),
            "range+sort": (tantivy.Query.range_query(schema, "amount", I, 100, 200), "amount", True, None),
            "bool of 3": (tantivy.Query.boolean_query([
                (tantivy.Occur.Must, tantivy.Query.term_query(schema, "seller", "S042")),
                (tantivy.Occur.Must, tantivy.Query.range_query(schema, "amount", I, 1, 5000)),
                (tantivy.Occur.MustNot, tantivy.Query.term_query(schema, "device", "D0001"))]),
                "seq", False, None),
            "match": (raw.parse_query("canteen", ["note"]), "seq", False, None),
            "geo distance": (tantivy.Query.boolean_query([
                (tantivy.Occur.Must, tantivy.Query.range_query(schema, "lat", F, *search_peers.box(
                    clat, clon, 1000)[:2])),
                (tantivy.Occur.Must, tantivy.Query.range_query(schema, "lon", F, *search_peers.box(
                    clat, clon, 1000)[2:]))]), "seq", False, in_circle),
        }
        ours = {
            "term": (TermQuery("seller", "S042"), None),
            "range+sort": (RangeQuery("amount", 100, 200, True, True), [FieldSort("amount", DESC)]),
            "bool of 3": (BoolQuery(must_queries=[TermQuery("seller", "S042"),
                                                  RangeQuery("amount", 1, 5000, True, True)],
                                    must_not_queries=[TermQuery("device", "D0001")]), None),
            "match": (MatchQuery("note", "canteen"), None),
            "geo distance": (GeoDistanceQuery("loc", f"{clat},{clon}", 1000), None),
        }
        peer_q = [(p, p.queries()) for p in peers]
        profiles: dict[str, dict[str, float]] = {}
        head = "".join(f" {p.name:>11s}" for p in peers)
        print(f"{'p50 ms':16s} {'widetable':>9s} {'raw':>8s} {'ratio':>6s} {'raw score':>10s}{head}")
        for name, (q, sort) in ours.items():
            res = db.search("card", "ix", q, sort=sort, limit=10, columns=cols)
            want = [(r.primary_key[0], r.columns.get("seller"), r.columns.get("amount")) for r in res.rows]
            rq, order, desc, exact = raw_q[name]
            fns = {"mine": lambda: db.search("card", "ix", q, sort=sort, limit=10, columns=cols),
                   "raw": lambda: raw_run(rq, order, desc, exact)}
            if order == "seq":
                fns["scored"] = lambda: raw_run(rq, None, False, exact)
            for p, pq in peer_q:
                got = [tuple(r) for r in pq[name]()]
                if got != want:
                    print(f"  ! {p.name} answers {name} differently: {got[:3]} ... vs {want[:3]} ...")
                fns[p.name] = pq[name]
            ms = p50s(fns, args.reps)
            scored = ms.get("scored")
            line = (f"{name:16s} {ms['mine']:9.2f} {ms['raw']:8.2f} {ms['mine'] / ms['raw']:6.2f} "
                    f"{'' if scored is None else f'{scored:10.2f}':>10s}")
            line += "".join(f" {ms[p.name]:11.2f}" for p in peers)
            print(line)
            if args.profile:
                profiles[name] = layer_profile(fns["mine"])
        gb = [GroupByField("g", "seller", size=10, sub_aggs=(SumAgg("s", "amount"),))]
        res = db.search("card", "ix", MatchAllQuery(), limit=0, group_bys=gb)
        want = [(g.key, g.row_count, g.aggs["s"]) for g in res.group_bys["g"]]
        spec = {"g": {"terms": {"field": "seller", "size": 10}, "aggs": {"s": {"sum": {"field": "amount"}}}}}
        fns = {"mine": lambda: db.search("card", "ix", MatchAllQuery(), limit=0, group_bys=gb),
               "raw": lambda: se.aggregate(tantivy.Query.all_query(), spec)}
        for p, pq in peer_q:
            got = [tuple(r) for r in pq["group by+sum"]()]
            if got != want:
                print(f"  ! {p.name} answers the group-by differently: {got[:3]} ... vs {want[:3]} ...")
            fns[p.name] = pq["group by+sum"]
        ms = p50s(fns, args.reps)
        line = f"{'group by+sum':16s} {ms['mine']:9.2f} {ms['raw']:8.2f} {ms['mine'] / ms['raw']:6.2f} {'':>10s}"
        line += "".join(f" {ms[p.name]:11.2f}" for p in peers)
        print(line)
        print("(ratio: widetable / raw tantivy in the same order, plus a row read per hit; target <= 2)")
        if args.profile:
            profiles["group by+sum"] = layer_profile(fns["mine"], 30)
            layers = ["tantivy", "rocksdb", "codecs", "search", "table", "other"]
            print("profiled us per call (cProfile inflates Python time) " +
                  " ".join(f"{la:>8s}" for la in layers))
            for name, prof in profiles.items():
                print(f"  {name:14s}" + " " * 38 + " ".join(f"{prof.get(la, 0.0):8.0f}" for la in layers))
        for p in peers:
            p.close()

        lags = []
        for i in range(200):
            key = (f"new{i:05d}",)
            t.put_row(key, {"seller": f"NEW{i}"})
            w0 = time.perf_counter()
            while db.search("card", "ix", TermQuery("seller", f"NEW{i}"), limit=1).rows == []:
                time.sleep(0.005)
            lags.append(time.perf_counter() - w0)
            time.sleep(0.01)
        lags.sort()
        print(f"write-to-searchable p50 {lags[len(lags) // 2] * 1000:.0f} ms  "
              f"p99 {lags[int(len(lags) * 0.99) - 1] * 1000:.0f} ms (target <= 1000)")

        plain = db.create_table("plain", [("card", "STRING")])
        with_ix = db.create_table("with_ix", [("card", "STRING")])
        db.create_search_index("with_ix", "ix", [("seller", "KEYWORD"), ("amount", "LONG")])
        spent = {"plain": 0.0, "ix": 0.0}
        chunk = 1000
        for r in range(6):  # alternating chunks: load drift and warm-up touch both alike
            for name, table in (("plain", plain), ("ix", with_ix)) if r % 2 else (("ix", with_ix), ("plain", plain)):
                t0 = time.perf_counter()
                for i in range(r * chunk, (r + 1) * chunk):
                    table.put_row((f"p{i:06d}",), {"seller": "S001", "amount": i})
                spent[name] += time.perf_counter() - t0
        a, b = 6 * chunk / spent["plain"], 6 * chunk / spent["ix"]
        print(f"put_row with a search index {b:8.0f}/s   without {a:8.0f}/s   ratio {b / a:.2f} (target >= 0.5)")

        routed = db.create_table("routed", [("seller", "STRING"), ("card", "STRING")])
        bw = []
        for pk, c in rows(min(n, 100_000)):
            bw.append(("routed", "put", (c["seller"], pk[0]), {"amount": c["amount"]}))
            if len(bw) == 200:
                db.batch_write_row(bw)
                bw = []
        if bw:
            db.batch_write_row(bw)
        db.create_search_index("routed", "ix", [("seller", "KEYWORD"), ("amount", "LONG")],
                               routing_fields=["seller"], shards=8)
        assert db.wait_for_search_indexes("routed", "ix", timeout=3600)
        q = TermQuery("seller", "S042")
        un = p50(lambda: db.search("routed", "ix", q, limit=10, get_total_count=True))
        ro = p50(lambda: db.search("routed", "ix", q, limit=10, get_total_count=True,
                                   routing_values=[("S042",)]))
        print(f"routing on 8 shards: routed {ro:.2f} ms  unrouted {un:.2f} ms  "
              f"throughput x{un / ro:.1f} (target >= 3)")
        print(f"RSS of this process (peers' clients, raw tantivy and every index open) {rss_mb():.0f} MB")
        db.close()
        print(f"load average at the end {os.getloadavg()[0]:.1f}, run {time.perf_counter() - t_run:.0f} s")
        print(f"RSS of a serving process with the {n}-row index open {serving_rss_mb(store)} MB "
              "(target <= 1024)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
