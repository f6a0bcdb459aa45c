"""Bulk create/update/delete: one transaction, all or nothing, errors naming the row, records in bulk."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from tests.cmdb.api.support import url
from tests.factories.cmdb import NodeFactory, RackFactory

pytestmark = pytest.mark.django_db


def node_rows(two_sites, n: int, prefix: str = "bulk") -> list[dict]:
    return [
        {
            "hostname": f"{prefix}-{i:03d}",
            "serial": f"{prefix.upper()}-{i:05d}",
            "status": "planned",
            "server_model": two_sites.node_a.server_model_id,
            "site": two_sites.site_a.pk,
        }
        for i in range(n)
    ]


def inserts_into(ctx: CaptureQueriesContext, table: str) -> int:
    return sum(1 for q in ctx.captured_queries if q["sql"].startswith(f'INSERT INTO "{table}"'))


def assert_no_per_row_queries(small: int, large: int, extra_rows: int) -> None:
    """Bulk paths run a fixed set of statements. SQLite caps a statement at 999 parameters, so Django splits
    a big INSERT / CASE-UPDATE into a few statements: allow one more per 20 extra rows (an N+1 would add at
    least one per row). On PostgreSQL the counts are equal."""
    assert large - small <= extra_rows // 20, (small, large)


# --- create ------------------------------------------------------------------------------------------------------


def test_bulk_create_writes_rows_and_their_records_in_bulk(root, two_sites):
    with CaptureQueriesContext(connection) as ctx:
        response = root.post(url("nodes"), node_rows(two_sites, 30), format="json", HTTP_X_REQUEST_ID="batch-1")
    assert response.status_code == 201, response.content
    assert len(response.json()) == 30
    assert m.Node.objects.filter(hostname__startswith="bulk-").count() == 30
    records = m.ChangeRecord.objects.filter(correlation_id="batch-1")
    assert records.count() == 30
    assert set(records.values_list("action", "source").distinct()) == {("create", "api")}
    assert records.first().actor.username == "root"
    assert inserts_into(ctx, "cmdb_node") == 1
    assert inserts_into(ctx, "cmdb_changerecord") == 1


def test_bulk_with_one_bad_row_writes_nothing(root, two_sites):
    rows = node_rows(two_sites, 5)
    rows[3]["status"] = "exploded"
    records = m.ChangeRecord.objects.count()
    response = root.post(url("nodes"), rows, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["row"] == 3
    assert list(error["fields"]) == ["status"]
    assert error["rows"] == [{"row": 3, "fields": error["fields"]}]
    assert error["message"].startswith("Row 3: status:")
    assert not m.Node.objects.filter(hostname__startswith="bulk-").exists()
    assert m.ChangeRecord.objects.count() == records


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda rows, ts: rows[2].update(serial=rows[0]["serial"]), "serial"),  # duplicate inside the batch
        (lambda rows, ts: rows[2].update(serial=ts.node_a.serial), "serial"),  # duplicate of a stored row
        (lambda rows, ts: rows[2].update(site=987654), "site"),  # unknown reference
        (lambda rows, ts: rows[2].update(is_cordoned=True), "cordon_reason"),  # check constraint
    ],
)
def test_model_rules_name_the_row_and_field(root, two_sites, mutate, field):
    rows = node_rows(two_sites, 4)
    mutate(rows, two_sites)
    response = root.post(url("nodes"), rows, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["row"], list(error["fields"])) == (2, [field])
    assert not m.Node.objects.filter(hostname__startswith="bulk-").exists()


def test_bulk_rack_positions_are_checked_against_the_batch_and_the_rack(root, two_sites):
    rack = RackFactory(room__site=two_sites.site_a, u_height=42)
    NodeFactory(site=two_sites.site_a, rack=rack, position=1, server_model=two_sites.node_a.server_model)  # U1-U8
    rows = node_rows(two_sites, 3)
    rows[0].update(rack=rack.pk, position=20)  # U20-U27: free
    rows[1].update(rack=rack.pk, position=24)  # overlaps row 0
    rows[2].update(rack=rack.pk, position=5)  # overlaps the stored node
    response = root.post(url("nodes"), rows, format="json")
    assert response.status_code == 400
    bad = {r["row"]: r["fields"]["position"][0] for r in response.json()["error"]["rows"]}
    assert set(bad) == {1, 2}
    assert "row 0 of this request" in bad[1]


def test_bulk_created_racked_nodes_get_rack_units(root, two_sites):
    rack = RackFactory(room__site=two_sites.site_a, u_height=42)
    rows = node_rows(two_sites, 2)
    rows[0].update(rack=rack.pk, position=1)
    rows[1].update(rack=rack.pk, position=9)
    response = root.post(url("nodes"), rows, format="json")
    assert response.status_code == 201, response.content
    assert m.RackUnit.objects.filter(rack=rack).count() == 16


def test_bulk_create_queries_do_not_grow_with_the_batch(root, two_sites):
    counts = []
    for n, prefix in ((5, "small"), (100, "large")):
        with CaptureQueriesContext(connection) as ctx:
            response = root.post(url("nodes"), node_rows(two_sites, n, prefix), format="json")
        assert response.status_code == 201
        counts.append(len(ctx))
    assert_no_per_row_queries(*counts, extra_rows=95)


# --- update ------------------------------------------------------------------------------------------------------


def test_bulk_update_bumps_versions_and_writes_records_in_bulk(root, two_sites):
    nodes = [two_sites.node_a, two_sites.node_b]
    with CaptureQueriesContext(connection) as ctx:
        response = root.patch(
            url("nodes"),
            [{"id": n.pk, "status": "maintenance"} for n in nodes],
            format="json",
            HTTP_X_REQUEST_ID="batch-2",
        )
    assert response.status_code == 200, response.content
    assert [row["version"] for row in response.json()] == [n.version + 1 for n in nodes]
    records = m.ChangeRecord.objects.filter(correlation_id="batch-2")
    assert sorted(records.values_list("object_id", flat=True)) == sorted(n.pk for n in nodes)
    assert all(r.changes == {"status": ["active", "maintenance"]} for r in records)
    assert inserts_into(ctx, "cmdb_changerecord") == 1


def test_bulk_update_with_a_stale_version_is_412_naming_the_row(root, two_sites):
    rows = [
        {"id": two_sites.node_a.pk, "status": "maintenance", "version": two_sites.node_a.version},
        {"id": two_sites.node_b.pk, "status": "maintenance", "version": two_sites.node_b.version + 5},
    ]
    response = root.patch(url("nodes"), rows, format="json")
    assert response.status_code == 412
    assert response.json()["error"]["row"] == 1
    two_sites.node_a.refresh_from_db()
    assert two_sites.node_a.status == "active"


def test_bulk_update_rows_need_an_id(root, two_sites):
    response = root.patch(url("nodes"), [{"id": two_sites.node_a.pk}, {"status": "active"}], format="json")
    assert response.status_code == 400
    assert response.json()["error"]["row"] == 1
    assert "id" in response.json()["error"]["fields"]


def test_bulk_update_queries_do_not_grow_with_the_batch(root, two_sites):
    root.post(url("nodes"), node_rows(two_sites, 100), format="json")
    pks = list(m.Node.objects.filter(hostname__startswith="bulk-").values_list("pk", flat=True))
    counts = []
    for batch, status in ((pks[:5], "maintenance"), (pks, "draining")):
        with CaptureQueriesContext(connection) as ctx:
            response = root.patch(url("nodes"), [{"id": pk, "status": status} for pk in batch], format="json")
        assert response.status_code == 200
        counts.append(len(ctx))
    assert_no_per_row_queries(*counts, extra_rows=95)


def test_bulk_move_of_cards_writes_placements_in_bulk(root, two_sites):
    cards = two_sites.cards_a
    rows = [{"id": c.pk, "stock_location": two_sites.stock_a.pk} for c in cards]
    with CaptureQueriesContext(connection) as ctx:
        response = root.patch(url("accelerators"), rows, format="json")
    assert response.status_code == 200, response.content
    assert {r["lifecycle"] for r in response.json()} == {"in_stock"}
    current = m.AcceleratorPlacement.objects.filter(accelerator__in=cards, ended_at__isnull=True)
    assert list(current.values_list("kind", flat=True)) == ["stock", "stock"]
    assert inserts_into(ctx, "cmdb_acceleratorplacement") == 1


def test_moving_a_card_onto_an_occupied_slot_is_refused(root, two_sites):
    first, _second = two_sites.cards_a
    rows = [{"id": first.pk, "slot_index": 1}]  # the second card holds slot 1
    response = root.patch(url("accelerators"), rows, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["rows"][0]["fields"].keys() == {"slot_index"}


# --- delete ------------------------------------------------------------------------------------------------------


def test_bulk_delete(root, two_sites):
    rows = node_rows(two_sites, 3)
    created = root.post(url("nodes"), rows, format="json").json()
    response = root.delete(url("nodes"), [{"id": n["id"]} for n in created[:2]] + [created[2]["id"]], format="json")
    assert response.status_code == 204
    assert not m.Node.objects.filter(hostname__startswith="bulk-").exists()
    assert m.ChangeRecord.objects.filter(action="delete", content_type__model="node").count() == 3


def test_bulk_delete_protected_row_is_409_naming_it_and_deletes_nothing(root, two_sites):
    created = root.post(url("nodes"), node_rows(two_sites, 1), format="json").json()
    response = root.delete(url("nodes"), [created[0]["id"], two_sites.node_a.pk], format="json")
    assert response.status_code == 409  # node_a still holds cards (PROTECT)
    assert response.json()["error"]["row"] == 1
    assert m.Node.objects.filter(pk=created[0]["id"]).exists()


def test_bulk_delete_unknown_id_is_404_naming_the_row(root, two_sites):
    response = root.delete(url("accelerators"), [two_sites.cards_a[0].pk, 987654], format="json")
    assert response.status_code == 404
    assert response.json()["error"]["row"] == 1
    assert m.Accelerator.objects.filter(pk=two_sites.cards_a[0].pk).exists()
