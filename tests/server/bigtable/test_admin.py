"""Table admin through the official classic ``google.cloud.bigtable.Client`` (and its gapic
admin client, for aggregate families), against ``widetable serve --bigtable-port``."""

from __future__ import annotations

import datetime

import pytest
from google.api_core import exceptions as gexc

from .conftest import INSTANCE, PROJECT, table_path


def test_create_with_families_gc_rules_and_splits_then_get_list_and_delete(classic, table_id):
    from google.cloud.bigtable import column_family as cf

    rules = {
        "plain": None,
        "versions": cf.MaxVersionsGCRule(3),
        "aged": cf.MaxAgeGCRule(datetime.timedelta(days=7)),
        "either": cf.GCRuleUnion([cf.MaxVersionsGCRule(2),
                                  cf.MaxAgeGCRule(datetime.timedelta(hours=1))]),
        "both": cf.GCRuleIntersection([cf.MaxVersionsGCRule(5),
                                       cf.MaxAgeGCRule(datetime.timedelta(seconds=30))]),
    }
    table = classic.table(table_id)
    table.create(column_families=rules, initial_split_keys=[b"g", b"p"])
    assert table.exists()
    got = table.list_column_families()
    assert sorted(got) == sorted(rules)
    for name, rule in rules.items():
        if rule is None:
            assert got[name].gc_rule is None
        else:
            assert got[name].gc_rule.to_pb() == rule.to_pb(), name
    assert table_id in [t.table_id for t in classic.list_tables()]
    keys = [s.row_key for s in table.sample_row_keys()]
    assert b"g" in keys and b"p" in keys and keys[-1] == b""
    table.delete()
    assert not table.exists()
    assert table_id not in [t.table_id for t in classic.list_tables()]


def test_create_twice_is_already_exists_and_a_missing_table_not_found(classic, table_id):
    table = classic.table(table_id)
    table.create(column_families={"cf": None})
    with pytest.raises(gexc.AlreadyExists):
        table.create(column_families={"cf": None})
    missing = classic.table("no-such-table")
    with pytest.raises(gexc.NotFound):
        missing.list_column_families()
    with pytest.raises(gexc.NotFound):
        missing.delete()


def test_bad_names_and_rules_are_invalid_argument(classic, table_id):
    from google.cloud.bigtable import column_family as cf

    with pytest.raises(gexc.InvalidArgument, match="bad family"):
        classic.table(table_id).create(column_families={"bad family": None})
    with pytest.raises(gexc.InvalidArgument):
        classic.table(table_id).create(column_families={"cf": cf.MaxVersionsGCRule(0)})
    assert not classic.table(table_id).exists()  # a refused create made nothing


def test_modify_families_create_update_drop(classic, table_id):
    from google.cloud.bigtable import column_family as cf

    table = classic.table(table_id)
    table.create(column_families={"a": None, "b": cf.MaxVersionsGCRule(1)})
    table.column_family("c", cf.MaxVersionsGCRule(4)).create()
    table.column_family("b", cf.MaxAgeGCRule(datetime.timedelta(minutes=5))).update()
    table.column_family("a").delete()
    got = table.list_column_families()
    assert sorted(got) == ["b", "c"]
    assert got["b"].gc_rule.to_pb() == cf.MaxAgeGCRule(datetime.timedelta(minutes=5)).to_pb()
    assert got["c"].gc_rule.to_pb() == cf.MaxVersionsGCRule(4).to_pb()
    with pytest.raises(gexc.AlreadyExists):
        table.column_family("c").create()
    with pytest.raises(gexc.NotFound):
        table.column_family("zz", cf.MaxVersionsGCRule(1)).update()


def test_drop_row_range_by_prefix_and_all(classic, table_id):
    table = classic.table(table_id)
    table.create(column_families={"cf": None})
    rows = []
    for key in (b"tenant1#a", b"tenant1#b", b"tenant2#a", b"zeta"):
        row = table.direct_row(key)
        row.set_cell("cf", b"q", b"v")
        rows.append(row)
    assert all(s.code == 0 for s in table.mutate_rows(rows))
    table.drop_by_prefix(b"tenant1#")
    assert [r.row_key for r in table.read_rows()] == [b"tenant2#a", b"zeta"]
    table.truncate()
    assert list(table.read_rows()) == []


def test_aggregate_families_through_the_admin_gapic_client(classic, table_id):
    from google.cloud.bigtable_admin_v2 import types

    def agg(kind):
        int64 = types.Type(int64_type=types.Type.Int64())
        return types.ColumnFamily(value_type=types.Type(aggregate_type=types.Type.Aggregate(
            input_type=int64, **{kind: getattr(types.Type.Aggregate, kind.rstrip("_").title())()})))

    admin = classic._client.table_admin_client
    table = admin.create_table(parent=f"projects/{PROJECT}/instances/{INSTANCE}", table_id=table_id,
                               table=types.Table(column_families={
                                   "total": agg("sum"), "low": agg("min_"), "high": agg("max_")}))
    assert sorted(table.column_families) == ["high", "low", "total"]
    got = admin.get_table(name=table_path(table_id))
    kinds = {name: types.Type.Aggregate.pb(cf.value_type.aggregate_type).WhichOneof("aggregator")
             for name, cf in got.column_families.items()}
    assert kinds == {"total": "sum", "low": "min_", "high": "max_"}  # proto-plus's names


def test_list_tables_pages(classic, emulator_env):
    from google.cloud.bigtable_admin_v2 import types

    names = [f"page{i}" for i in range(5)]
    for n in names:
        classic.table(n).create(column_families={"cf": None})
    try:
        admin = classic._client.table_admin_client
        pager = admin.list_tables(request=types.ListTablesRequest(
            parent=f"projects/{PROJECT}/instances/{INSTANCE}", page_size=2))
        seen = [t.name.rsplit("/", 1)[1] for t in pager]
        assert [n for n in seen if n.startswith("page")] == names
    finally:
        for n in names:
            classic.table(n).delete()


def test_instance_admin_is_unimplemented_as_the_emulator_answers(classic):
    with pytest.raises(gexc.MethodNotImplemented):
        classic._client.list_instances()
