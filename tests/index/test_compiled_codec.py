"""The compiled index-entry and key encoders give the reference implementation's bytes."""

from __future__ import annotations

import random

import pytest

from widetable.errors import InvalidPK
from widetable.index.schema import TOO_LONG, IndexCodec, check_index
from widetable.keys import codec
from widetable.keys.compiled import compile_key_encoder
from widetable.table import rowcodec
from widetable.table.schema import TableOptions, TableSchema

BASE = TableSchema(
    "t", 7, (("user", "STRING"), ("order", "INTEGER"), ("blob", "BINARY")),
    TableOptions(max_versions=1, ttl=-1),
    defined_columns=(("status", "STRING"), ("total", "INTEGER"), ("tag", "BINARY"), ("f", "DOUBLE")),
)


def _values(rng: random.Random, stored: bool = True):
    bad = [] if stored else ["\ud800"]  # no stored row holds a lone surrogate
    return {
        "STRING": rng.choice(["", "a", "é", "a\x00b", "x" * 1024, "y" * 1025, "s%d" % rng.randrange(99), *bad]),
        "INTEGER": rng.choice([0, -1, 2**63 - 1, -(2**63), 2**63, rng.randrange(-10**6, 10**6)]),
        "BINARY": rng.choice([b"", b"\x00", b"\x00\xff\x00", b"z" * 1025, bytes([rng.randrange(256)])]),
    }


def _row(rng: random.Random) -> list:
    v = _values(rng)
    pk = (v["STRING"] if len(v["STRING"]) <= 1024 else "k", rng.randrange(100), b"\x00b")
    latest: dict = {}
    for name, kind in (("status", "STRING"), ("total", "INTEGER"), ("tag", "BINARY")):
        r = rng.random()
        if r < 0.6:
            latest[name] = _values(rng)[kind]
        elif r < 0.7:
            latest[name] = 1.5  # a value of another type: no entry
    if rng.random() < 0.5:
        latest["f"] = 2.5
    latest["other"] = "o"
    stamps = 1000 if rng.random() < 0.5 else {n: 1000 + i % 2 for i, n in enumerate(latest)}
    return [1, pk, latest, stamps, None]


@pytest.mark.parametrize("kind", ["GLOBAL", "LOCAL"])
@pytest.mark.parametrize("key,attrs", [
    (["status"], ["total"]), (["user", "status"], ["total", "f"]), (["user", "total", "tag"], []),
    (["user"], ["status", "tag", "f"]), (["user", "blob"], ["status"]),
])
def test_entry_matches_reference(kind, key, attrs):
    if kind == "LOCAL" and key[0] != "user":
        pytest.skip("a local index starts with the partition key")
    spec = check_index(BASE, "ix", key, attrs, kind, 9, 0)
    ic = IndexCodec(BASE, spec, strict=kind == "LOCAL")
    rng = random.Random(7)
    for _ in range(3000):
        row = _row(rng)
        try:
            want = ic.entry_slow(row)
        except InvalidPK:
            with pytest.raises(InvalidPK):
                ic.entry(row)
            continue
        assert ic.entry(row) == want, row
        if want is TOO_LONG:  # a GLOBAL index skips (and counts) a key value over the limits
            assert kind == "GLOBAL"
        elif want is not None:
            assert rowcodec.unpack(want[1])[1] == codec.decode_tuple(want[0], 5)


def test_key_encoder_matches_codec():
    types = ("STRING", "INTEGER", "BINARY")
    enc = compile_key_encoder(types)
    ref = codec.make_encoder(types, ("a", "b", "c"))
    rng = random.Random(3)
    for _ in range(3000):
        v = _values(rng, stored=False)
        pk = (v["STRING"], v["INTEGER"], v["BINARY"])
        try:
            want = ref(pk)
        except InvalidPK:
            with pytest.raises(InvalidPK):
                enc(pk)
            continue
        assert enc(pk) == want
