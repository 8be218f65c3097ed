"""The protocol fuzzer (``bench/fuzz``) in CI: a short run of both protocols against a real
``widetable serve``, and the fuzzer's own parts checked so that a clean run means something
(its judges flag what they must, its PlainBuffer writer speaks the SDK's format).

The long run is ``python -m bench.fuzz --requests 100000``."""

from __future__ import annotations

import struct

import pytest

from bench.fuzz import mutate, run, store, wire
from bench.fuzz import plainbuffer as pbuf
from bench.fuzz.mutate import Case

pytest.importorskip("tablestore")


@pytest.mark.slow
def test_short_run_of_both_protocols_is_clean(tmp_path) -> None:
    """3,000 malformed requests: no crash, hang, 5xx, bad answer or stray write, and the
    valid clients were served throughout."""
    report = run.run(3000, seed=2026, timeout=5, workdir=tmp_path)
    assert report.clean, "\n".join(map(str, report.findings[:20]))
    assert report.requests == 3000 and report.exit_status == 0
    assert report.seeds[0] >= 60 and report.seeds[1] >= 10  # recorded from both clients
    assert report.live_ops > 100
    kinds = {k.split()[1] for k in report.kinds}
    assert set(mutate.HttpMutator.KINDS) | set(mutate.NativeMutator.KINDS) <= kinds
    codes = {o.split()[-1] for o in report.outcomes}
    assert {"OTSParameterInvalid", "OTSAuthFailed", "OTSRequestBodyTooLarge",
            "OTSMethodNotAllowed", "OTSNoPermissionAccess"} <= codes  # the last: read-only key
    rejected = sum(c for o, c in report.outcomes.items() if o.split()[-1].startswith("OTS"))
    assert rejected > 2000


def _error(status: int, code: str, message: str) -> wire.Reply:
    from tablestore.protobuf import table_store_pb2 as p

    return wire.Reply(status=status, body=p.Error(code=code, message=message).SerializeToString())


def _case(must_reject: bool = False, half_close: bool = False, protocol: str = "http") -> Case:
    return Case(protocol, "test", b"POST /PutRow", must_reject, api="PutRow",
                half_close=half_close)


def test_http_judge_flags_what_is_not_a_clean_rejection() -> None:
    ok = run.judge_http(_case(), _error(400, "OTSParameterInvalid", "malformed PutRow"))
    assert ok == ("http 400 OTSParameterInvalid", None)
    bad = [
        _error(500, "OTSInternalServerError", "internal error (request id 1)"),
        _error(400, "OTSParameterInvalid", 'Traceback (most recent call last): File "x"'),
        _error(502, "OTSParameterInvalid", "x"),
        wire.Reply(status=400, body=b"\xff not an Error"),
        wire.Reply(status=400, body=b""),  # an empty Error has no OTS code
        wire.Reply(timed_out=True),
        wire.Reply(closed=True),  # nothing answered a whole request
    ]
    for reply in bad:
        assert run.judge_http(_case(), reply)[1] is not None, reply
    assert run.judge_http(_case(must_reject=True), wire.Reply(status=200))[1].what == "accepted"
    assert run.judge_http(_case(half_close=True), wire.Reply(closed=True))[1] is None
    assert run.judge_http(_case(), _error(503, "OTSServerBusy", "busy"))[1] is None


def test_native_judge_flags_what_is_not_a_clean_rejection() -> None:
    import msgpack

    def reply(value) -> wire.Reply:
        return wire.Reply(frame=msgpack.packb(value))

    case = _case(protocol="native")
    assert run.judge_native(case, reply([1, "OTSParameterInvalid", "bad"])) == (
        "native OTSParameterInvalid", None)
    assert run.judge_native(case, reply([0, None]))[1] is None
    for bad in ([1, "OTSInternalServerError", "internal error: boom"], [1, "nope", "x"], [2],
                [1, "OTSParameterInvalid", "Traceback ..."], "x"):
        assert run.judge_native(case, reply(bad))[1] is not None, bad
    assert run.judge_native(case, wire.Reply(frame=b"\xc1"))[1] is not None
    assert run.judge_native(_case(True, protocol="native"), reply([0, None]))[1].what == "accepted"


def test_store_check_flags_keys_no_accepted_request_explains() -> None:
    catalog = {b"\x01fz_a": b'{"name": "fz_a", "table_id": 3}',
               b"\x01fz_live": b'{"name": "fz_live", "table_id": 5}'}
    row = b"\x10\x00\x00\x00\x03\x02k\x00"
    before = {**catalog, row: b"v1", b"\x04\x00\x00\x00\x03" + bytes(8): b"stats"}
    same = dict(before)
    touched = run.Touched()
    assert run.store_findings(before, same, touched, {}, {}) == ([], 0)
    # statistics, and the live clients' own rows, may change
    moved = {**before, b"\x04\x00\x00\x00\x03" + bytes(8): b"more",
             b"\x10\x00\x00\x00\x05\x02x\x00": b"live"}
    assert run.store_findings(before, moved, touched, {}, {})[0] == []
    # a row of a table no accepted request wrote
    assert len(run.store_findings(before, {**before, row: b"v2"}, touched, {}, {})[0]) == 1
    assert len(run.store_findings(before, {**catalog}, touched, {}, {})[0]) == 1
    assert len(run.store_findings(before, {**before, b"\x01new": b"{}"}, touched, {}, {})[0]) == 1
    # a table an accepted request wrote is checked row by row
    touched.row("fz_a", ("k", 1))
    rows_before = {"fz_a": {("k", 1): [("v", "1", 5)], ("k", 2): [("v", "2", 5)]}}
    rows_after = {"fz_a": {("k", 1): [("v", "9", 6)], ("k", 2): [("v", "2", 5)]}}
    found, changed = run.store_findings(before, {**before, row: b"v2"}, touched, rows_before,
                                        rows_after)
    assert (found, changed) == ([], 1)
    rows_after["fz_a"][("k", 2)] = []
    found, changed = run.store_findings(before, before, touched, rows_before, rows_after)
    assert changed == 2 and len(found) == 1 and "('k', 2)" in found[0].detail


def test_plainbuffer_writer_matches_the_sdk() -> None:
    """The fuzzer's PlainBuffer writer, with checksums right, writes what the SDK writes."""
    from tablestore.plainbuffer.plain_buffer_builder import PlainBufferBuilder
    from tablestore.plainbuffer.plain_buffer_crc8 import PlainBufferCrc8

    for data in (b"", b"abc", bytes(range(256))):
        assert pbuf.crc8(0, data) == PlainBufferCrc8.crc_string(0, data)
    sdk = bytes(PlainBufferBuilder.serialize_for_put_row(
        [("k", "a"), ("n", 7)], [("s", "x", 1000), ("i", -2), ("d", 1.5), ("b", True)]))
    rows = pbuf.decode(sdk)
    assert [pbuf.value_of(c) for c in rows[0].pk] == ["a", 7]
    assert pbuf.encode(rows) == sdk
    cell = pbuf.Cell(b"i", pbuf.INTEGER, struct.pack("<q", -2))
    assert cell.checksum() == rows[0].data[1].checksum()


def test_must_reject_plainbuffer_mutations_break_the_buffer() -> None:
    """What the mutator calls must-reject cannot be a valid buffer: the writer's checksums
    no longer match, or the buffer does not parse."""
    import random

    from tablestore.plainbuffer.plain_buffer_builder import PlainBufferBuilder

    sdk = bytes(PlainBufferBuilder.serialize_for_put_row([("k", "a")], [("s", "x", 1000)]))
    rng = random.Random(5)
    musts = 0
    for _ in range(400):
        data, must = mutate.mutate_plainbuffer(rng, sdk)
        if not must:
            continue
        musts += 1
        try:
            rows = pbuf.decode(data)
        except ValueError:
            continue
        assert pbuf.encode(rows) != data  # a checksum or the header differs from the right one
    assert musts > 50


def test_log_problems_finds_tracebacks(tmp_path) -> None:
    log = tmp_path / "server.log"
    log.write_text("widetable serving\nTraceback (most recent call last):\n  ok\n")
    assert store.log_problems(log) == ["Traceback (most recent call last):"]
    assert store.log_problems(log, start=len("widetable serving\nTraceback")) == []
