"""Capacity over the wire: ``widetable serve --capacity N`` throttles a hot partition
with ``OTSServerBusy`` (503), which the official SDK and widetable.connect retry by
themselves; reserved throughput travels in CreateTable / UpdateTable / DescribeTable."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest

tablestore = pytest.importorskip("tablestore")
from tablestore import (
    CapacityUnit,
    OTSClient,
    OTSServiceError,
    ReservedThroughput,
    Row,
    TableMeta,
    TableOptions,
)
from tablestore.retry import DefaultRetryPolicy, NoRetryPolicy

import widetable
from widetable.partition.retry import Retrier

from . import serving

PK = [("a", "STRING"), ("b", "INTEGER")]
CAPACITY = 50


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    """A server whose partitions take 50 operations per second."""
    served = serving.start(tmp_path_factory.mktemp("tight") / "data", "--capacity", str(CAPACITY))
    yield served
    served.stop()


class CountingRetry(DefaultRetryPolicy):
    def __init__(self) -> None:
        super().__init__()
        self.busy = 0

    def should_retry(self, retry_times, exception, api_name):
        if getattr(exception, "code", None) in ("OTSServerBusy", "OTSPartitionUnavailable"):
            self.busy += 1
        return super().should_retry(retry_times, exception, api_name)


def client(served, policy) -> OTSClient:
    logging.getLogger("widetable-tests-capacity").setLevel(logging.CRITICAL)
    return OTSClient(served.endpoint, serving.ACCESS_KEY_ID, serving.ACCESS_KEY_SECRET,
                     serving.INSTANCE, retry_policy=policy, logger_name="widetable-tests-capacity")


def test_sdk_burst_is_throttled_and_retried(tight) -> None:
    plain = client(tight, NoRetryPolicy())
    plain.create_table(TableMeta("hot", PK), TableOptions(), ReservedThroughput(CapacityUnit(0, 0)))
    try:
        errors = []
        # One partition-key value: one hot partition. Up to 12x its capacity in a row, so a
        # loaded machine (this loop at a fraction of its usual pace) still overruns it.
        for i in range(12 * CAPACITY):
            try:
                plain.put_row("hot", Row([("a", "k"), ("b", i)], [("v", i)]))
            except OTSServiceError as e:
                errors.append((e.get_http_status(), e.get_error_code()))
                if len(errors) >= 10:
                    break
        assert errors, "a burst of 12x capacity was never throttled"
        assert set(errors) <= {(503, "OTSServerBusy"), (503, "OTSPartitionUnavailable")}

        policy = CountingRetry()
        retrying = client(tight, policy)

        def put(i: int) -> None:
            retrying.put_row("hot", Row([("a", "k"), ("b", 1000 + i)], [("v", i)]))

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(put, range(2 * CAPACITY)))  # every one gets through
        assert policy.busy > 0
        for i in (0, 2 * CAPACITY - 1):
            assert retrying.get_row("hot", [("a", "k"), ("b", 1000 + i)])[1] is not None
    finally:
        client(tight, DefaultRetryPolicy()).delete_table("hot")


@pytest.mark.parametrize("protocol", ["native", "tablestore"])
def test_connect_retrier_gets_through(tight, protocol) -> None:
    retrier = Retrier(max_attempts=40, base_delay=0.01, max_delay=0.5)
    db = widetable.connect(tight.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                           access_key_secret=serving.ACCESS_KEY_SECRET, retrier=retrier,
                           protocol=protocol)
    try:
        t = db.create_table("hot2", PK)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: t.put_row(("k", i), {"v": i}), range(3 * CAPACITY)))
        assert retrier.retries > 0 and retrier.gave_up == 0
        assert len(list(t.scan())) == 3 * CAPACITY
    finally:
        db.delete_table("hot2")
        db.close()


def test_reserved_throughput_is_reported(ots) -> None:
    ots.create_table(TableMeta("r", PK), TableOptions(), ReservedThroughput(CapacityUnit(30, 20)))
    cu = ots.describe_table("r").reserved_throughput_details.capacity_unit
    assert (cu.read, cu.write) == (30, 20)  # as declared (throttling pools them: 50)
    u = ots.update_table("r", reserved_throughput=ReservedThroughput(CapacityUnit(write=5)))
    assert (u.reserved_throughput_details.capacity_unit.read,
            u.reserved_throughput_details.capacity_unit.write) == (0, 5)  # the SDK sends read 0
    ots.create_table(TableMeta("z", PK), TableOptions(), ReservedThroughput(CapacityUnit(0, 0)))
    cu = ots.describe_table("z").reserved_throughput_details.capacity_unit
    assert (cu.read, cu.write) == (0, 0)


def test_connect_reserved_throughput(remote_db) -> None:
    remote_db.create_table("r", PK, reserved_throughput=40)
    assert remote_db.describe_table("r").options.reserved_throughput == 40
    assert remote_db.update_table("r", reserved_throughput=7).options.reserved_throughput == 7
    with pytest.raises(widetable.WidetableError) as info:
        remote_db.create_table("c", PK, capacity=5)
    assert info.value.code == "OTSNotSupported"


def test_capacity_applies_to_existing_tables_at_start(tmp_path) -> None:
    data = tmp_path / "data"
    served = serving.start(data, "--capacity", "0")
    try:
        db = widetable.connect(served.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                               access_key_secret=serving.ACCESS_KEY_SECRET)
        db.create_table("old", PK)
        db.close()
    finally:
        served.stop()
    with widetable.open(str(data)) as local:
        assert local.describe_table("old").options.capacity == 0
    served = serving.start(data, "--capacity", "123")
    served.stop()
    with widetable.open(str(data)) as local:
        assert local.describe_table("old").options.capacity == 123


@pytest.mark.parametrize("protocol", ["native", "tablestore"])
def test_connect_resends_the_throttled_rows_of_a_batch(tight, protocol) -> None:
    """A batch over the partition's capacity comes back with some rows OTSServerBusy;
    widetable.connect sends those rows again, with backoff, until all are written."""
    retrier = Retrier(max_attempts=60, base_delay=0.02, max_delay=0.5)
    db = widetable.connect(tight.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                           access_key_secret=serving.ACCESS_KEY_SECRET, retrier=retrier,
                           protocol=protocol)
    try:
        db.create_table("hot3", PK)
        for start in (0, 100):  # 2 batches of 100 rows against 50 operations per second
            results = db.batch_write_row([("hot3", "put", ("k", start + i), {"v": i})
                                          for i in range(100)])
            assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
        assert retrier.retries > 0 and retrier.gave_up == 0
        assert len(list(db.table("hot3").scan())) == 200
    finally:
        db.delete_table("hot3")
        db.close()
