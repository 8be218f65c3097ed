"""Child of the search crash tests: writes rows with a search index syncing, printing acks."""

import sys

import widetable

path, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
db = widetable.open(path, purge_interval=None)
if mode == "full":
    t = db.create_table("t", [("id", "INTEGER")])
    for start in range(0, n, 200):
        db.batch_write_row([("t", "put", (i,), {"k": f"v{i % 7}", "n": i}) for i in range(start, start + 200)])
    db.create_search_index("t", "ix", [("k", "KEYWORD"), ("n", "LONG")], shards=3)
    print("ready", flush=True)
    i = 0
    while True:
        d = db.describe_search_index("t", "ix")
        print(d.sync_phase, flush=True)
        i += 1
else:
    t = db.table("t")
    print("ready", flush=True)
    i = 0
    while True:
        if i % 3 == 2:
            t.delete_row((i - 1,))
        else:
            t.put_row((i,), {"k": f"w{i % 5}", "n": -i})
        print(i, flush=True)
        i += 1
