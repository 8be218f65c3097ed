"""Bigtable's table admin API (``google.bigtable.admin.v2.BigtableTableAdmin``), the
long-running operations service, and the instance admin API as Google's emulator
answers it (not served: UNIMPLEMENTED).

Table DDL runs on the worker pool: creating a pre-split table or dropping a row range
takes more than a moment, and the event loop keeps serving data calls meanwhile.
"""

from __future__ import annotations

import dataclasses

from ...errors import ObjectNotExist, ParameterInvalid
from ...wire.bigtable import INSTANCE_ADMIN, OPERATIONS, TABLE_ADMIN, admin, protobuf
from ...wire.bigtable.convert import decode_family, decode_splits, encode_table
from .service import Registry, instance_name, table_id

EMPTY = protobuf.Empty
NAME_ONLY = 1  # Table.View
CONSISTENCY_TOKEN = "widetable-consistent"  # one copy of the data: always consistent


class TableAdminService:
    def __init__(self, db, capacity: int | None = None) -> None:
        """``capacity``: the server's ``--capacity`` (operations per second per partition),
        set on the tables created here as the Tablestore side sets it on its own."""
        self.db = db
        self.bt = db.bigtable
        self.capacity = capacity

    def register(self, reg: Registry) -> None:
        reg.service(TABLE_ADMIN)
        for name in ("GetTable", "ListTables", "GenerateConsistencyToken", "CheckConsistency"):
            reg.add(TABLE_ADMIN, name, getattr(self, _snake(name)))
        for name in ("CreateTable", "DeleteTable", "ModifyColumnFamilies", "DropRowRange"):
            reg.add(TABLE_ADMIN, name, getattr(self, _snake(name)), pooled=_always)
        reg.service(OPERATIONS)
        reg.add(OPERATIONS, "GetOperation", self.get_operation)
        reg.add(OPERATIONS, "ListOperations", self.list_operations)
        reg.service(INSTANCE_ADMIN)  # every method UNIMPLEMENTED, as the emulator answers

    def _table(self, name: str, field: str = "name"):
        tid = table_id(name, field)
        return tid, self.bt.get_table(tid)

    def create_table(self, req, context):
        parent = instance_name(req.parent)
        if not req.table_id:
            raise ParameterInvalid("table_id is empty")
        families = [decode_family(name, cf) for name, cf in sorted(req.table.column_families.items())]
        splits = decode_splits(req.initial_splits)
        self.bt.create_table(req.table_id, families, splits)
        if self.capacity is not None:
            self.db.update_table(req.table_id, capacity=self.capacity)
        info = self.bt.get_table(req.table_id)
        return encode_table(info, f"{parent}/tables/{req.table_id}")

    def get_table(self, req, context):
        tid, info = self._table(req.name)
        return encode_table(info, req.name, req.view)

    def list_tables(self, req, context):
        parent = instance_name(req.parent)
        if req.page_size < 0:
            raise ParameterInvalid(f"page_size {req.page_size} is negative")
        names = sorted(self.bt.list_tables())
        if req.page_token:
            names = [n for n in names if n > req.page_token]
        resp = admin.ListTablesResponse()
        page = names[:req.page_size] if req.page_size else names
        view = req.view or NAME_ONLY  # ListTables answers names only unless asked
        for name in page:
            if view == NAME_ONLY:
                resp.tables.add(name=f"{parent}/tables/{name}")
            else:
                try:
                    info = self.bt.get_table(name)
                except ObjectNotExist:
                    continue  # dropped since the list was read
                resp.tables.append(encode_table(info, f"{parent}/tables/{name}", view))
        if req.page_size and len(names) > len(page):
            resp.next_page_token = page[-1]
        return resp

    def delete_table(self, req, context):
        tid = table_id(req.name, "name")
        self.bt.delete_table(tid)
        return EMPTY()

    def modify_column_families(self, req, context):
        tid, info = self._table(req.name)
        create, update, drop = [], [], []
        for i, mod in enumerate(req.modifications):
            kind = mod.WhichOneof("mod")
            if kind is None:
                raise ParameterInvalid(f"modifications[{i}] ({mod.id!r}) sets none of "
                                       "create, update, drop")
            if kind == "drop":
                if not mod.drop:
                    raise ParameterInvalid(f"modifications[{i}].drop must be true if set")
                drop.append(mod.id)
            elif kind == "create":
                create.append(decode_family(mod.id, mod.create))
            else:
                new = decode_family(mod.id, mod.update)
                old = info.families.get(mod.id)
                if old is None:
                    raise ObjectNotExist(f"column family {mod.id!r} not found in table {tid!r}")
                paths = set(mod.update_mask.paths) or {"gc_rule"}
                changed = old
                if "gc_rule" in paths:
                    changed = dataclasses.replace(changed, gc=new.gc)
                if "value_type" in paths and new.aggregate != old.aggregate:
                    raise ParameterInvalid(f"column family {mod.id!r}: its value_type cannot change")
                update.append(changed)
        self.bt.modify_families(tid, create=create, update=update, drop=drop)
        return encode_table(self.bt.get_table(tid), req.name)

    def drop_row_range(self, req, context):
        tid = table_id(req.name, "name")
        kind = req.WhichOneof("target")
        if kind == "row_key_prefix":
            if not req.row_key_prefix:
                raise ParameterInvalid("row_key_prefix is empty (use delete_all_data_from_table)")
            self.bt.drop_row_range(tid, prefix=req.row_key_prefix)
        elif kind == "delete_all_data_from_table" and req.delete_all_data_from_table:
            self.bt.drop_row_range(tid, all_rows=True)
        else:
            raise ParameterInvalid("DropRowRange sets neither row_key_prefix nor "
                                   "delete_all_data_from_table")
        return EMPTY()

    def generate_consistency_token(self, req, context):
        self._table(req.name)
        return admin.GenerateConsistencyTokenResponse(consistency_token=CONSISTENCY_TOKEN)

    def check_consistency(self, req, context):
        self._table(req.name)
        if req.consistency_token != CONSISTENCY_TOKEN:
            raise ParameterInvalid(f"consistency_token {req.consistency_token!r} was not "
                                   "issued by this server")
        return admin.CheckConsistencyResponse(consistent=True)

    # -- google.longrunning: no call served here starts one (CreateTable is unary) ----------

    def get_operation(self, req, context):
        raise ObjectNotExist(f"operation {req.name!r} not found")

    def list_operations(self, req, context):
        from ...wire.bigtable import lro
        return lro.ListOperationsResponse()


def _always(request) -> bool:
    return True


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
