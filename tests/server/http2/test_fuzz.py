"""The HTTP/2 frame fuzzer (``bench/fuzz/http2.py``) in CI: a short run against a real
``widetable serve --bigtable-port``, and its judge checked so that a clean run means
something. The long run is ``python -m bench.fuzz.http2 --cases 20000``."""

from __future__ import annotations

import random

import pytest

from bench.fuzz import http2 as fuzz


@pytest.mark.slow
def test_short_run_is_clean(tmp_path):
    report = fuzz.run(300, seed=23, workdir=tmp_path)
    assert report.clean, "\n".join(map(str, report.findings[:10]))
    assert report.cases == 300 and report.exit_status == 0 and report.checks >= 6
    assert len(report.kinds) == 15  # every kind of mutation was sent
    assert report.outcomes["answered"] > 30  # some cases stayed valid enough to be served
    errors = {o for o in report.outcomes if o.startswith("GOAWAY")}
    assert {"GOAWAY PROTOCOL_ERROR", "GOAWAY FRAME_SIZE_ERROR", "GOAWAY COMPRESSION_ERROR"} <= errors


def test_the_judge_flags_broken_frames_and_unknown_codes():
    report = fuzz.Report()
    fuzz.judge(report, "x", "closed", b"\x00\x00\x09\x04\x00\x00\x00\x00\x00abc", True)
    goaway = fuzz.frame(7, 0, 0, (1).to_bytes(4, "big") + (99).to_bytes(4, "big"))
    fuzz.judge(report, "y", "closed", fuzz.frame(4, 0, 0, b"") + goaway, True)
    assert len(report.findings) == 2


def test_every_mutation_kind_changes_the_bytes():
    rng = random.Random(3)
    for kind in fuzz.KINDS:
        changed = 0
        for n in range(100):
            frames = fuzz.seed_frames(random.Random(n))
            pieces = fuzz.mutate(rng, frames, kind)[1]
            changed += b"".join(pieces) != fuzz.encode(frames)
        if kind in ("valid", "pieces"):  # the exchange as it is (in pieces)
            assert changed == 0, kind
        else:  # a swap of a frame with itself, a flag set to what it was ... change nothing
            assert changed >= 80, (kind, changed)
