"""The warehouse API: ledger reads and manual moves, reservations, minimum stock, the overview, stock takes,
each scoped to the sites the user may see or change."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from cmdb import models as m
from cmdb.permissions import grant_scope
from integrations.warehouse.models import MinimumStock, StockDiscrepancy
from integrations.warehouse.services import ledger
from tests.factories.cmdb import AcceleratorFactory, NodeFactory, UserFactory

pytestmark = pytest.mark.django_db
BASE = "/api/integrations/warehouse"


@pytest.fixture
def tech(stock) -> APIClient:
    """A technician of sh1: sees and changes sh1's stock, nothing of bj2."""
    user = UserFactory(username="tech-sh1", is_staff=False)
    grant_scope(scope_obj=stock.sh1, perms=["change_scope"], users=[user])
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def cards(stock) -> list[m.Accelerator]:
    return ledger.accelerators_receive(
        cards=[ledger.CardReceipt(serial=f"GPU-{i}", model=stock.h100) for i in range(3)],
        location=stock.wh1,
        reason="PO-1",
        key_prefix="t",
    )


def test_manual_move_writes_ledger_rows_and_answers_with_them(tech, stock, cards):
    response = tech.post(
        f"{BASE}/movements/",
        {
            "kind": "transfer",
            "serial": "GPU-0",
            "to_location": stock.shelf1.pk,
            "reason": "re-shelving",
            "ticket_ref": "ticket:5",
        },
        format="json",
        HTTP_IDEMPOTENCY_KEY="move-1",
    )
    assert response.status_code == 201, response.content
    rows = response.json()
    assert [(r["kind"], r["quantity"], r["location"], r["serial"], r["actor"]) for r in rows] == [
        ("transfer", -1, "sh1:warehouse", "GPU-0", "tech-sh1"),
        ("transfer", 1, "sh1:shelf-a", "GPU-0", "tech-sh1"),
    ]
    again = tech.post(
        f"{BASE}/movements/",
        {"kind": "transfer", "serial": "GPU-0", "to_location": stock.shelf1.pk, "reason": "re-shelving"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="move-1",
    )
    assert again.status_code == 201 and len(again.json()) == 2
    assert m.StockMovement.objects.filter(kind="transfer").count() == 2  # the retry wrote nothing


def test_manual_moves_of_consumables_and_field_errors(tech, stock):
    ok = tech.post(
        f"{BASE}/movements/",
        {"kind": "receive", "sku": stock.cable.sku, "quantity": 12, "location": stock.wh1.pk, "reason": "found a box"},
        format="json",
    )
    assert ok.status_code == 201 and ok.json()[0]["quantity"] == 12
    short = tech.post(
        f"{BASE}/movements/",
        {"kind": "issue", "sku": stock.cable.sku, "quantity": 13, "location": stock.wh1.pk, "reason": "cabling"},
        format="json",
    )
    assert short.status_code == 400 and "quantity" in short.json()["error"]["fields"]
    no_reason = tech.post(
        f"{BASE}/movements/",
        {"kind": "issue", "sku": stock.cable.sku, "quantity": 1, "location": stock.wh1.pk},
        format="json",
    )
    assert no_reason.status_code == 400 and "reason" in no_reason.json()["error"]["fields"]


def test_other_sites_are_invisible_and_cannot_be_moved(tech, stock, cards):
    ledger.consumable_move(part_model=stock.cable, kind="receive", quantity=5, location=stock.wh2, reason="bj2")
    listed = tech.get(f"{BASE}/movements/").json()["results"]
    assert {r["location"] for r in listed} == {"sh1:warehouse"}
    denied = tech.post(
        f"{BASE}/movements/",
        {"kind": "transfer", "serial": "GPU-0", "to_location": stock.wh2.pk, "reason": "steal"},
        format="json",
    )
    assert denied.status_code == 403
    assert tech.get(f"{BASE}/overview/?site=bj2").json()["count"] == 0


def test_reservations_one_card_per_holder_and_409_when_none_left(tech, stock, cards):
    made = [
        tech.post(
            f"{BASE}/reservations/",
            {"site": "sh1", "model": stock.h100.name, "reserved_for": f"ticket:{i}"},
            format="json",
        )
        for i in range(4)
    ]
    assert [r.status_code for r in made[:3]] == [201, 201, 201]
    assert len({r.json()["serial"] for r in made[:3]}) == 3
    assert made[3].status_code == 409 and made[3].json()["error"]["code"] == "no_spare"
    res = made[0].json()
    issued = tech.post(
        f"{BASE}/reservations/{res['id']}/issue/", {"node": stock.node1.hostname, "slot_index": 2}, format="json"
    )
    assert issued.status_code == 200 and issued.json()["status"] == "issued"
    assert m.Accelerator.objects.get(serial=res["serial"]).node == stock.node1
    released = tech.post(
        f"{BASE}/reservations/{made[1].json()['id']}/release/", {"reason": "not needed"}, format="json"
    )
    assert released.json()["status"] == "released"


def test_overview_shows_spares_against_the_installed_base(tech, stock, cards):
    node = NodeFactory(site=stock.sh1)
    for slot in range(8):
        AcceleratorFactory(node=node, slot_index=slot, model=stock.h100)
    MinimumStock.objects.create(site=stock.sh1, accelerator_model=stock.h100, minimum=5)
    data = tech.get(f"{BASE}/overview/").json()
    (line,) = [r for r in data["results"] if r["kind"] == "accelerator"]
    assert line["summary"] == "H100-SXM5-80GB: 8 installed, 3 spares, 37.5%"
    assert (line["free"], line["minimum"], line["is_below_minimum"]) == (3, 5, True)
    assert tech.get(f"{BASE}/overview/?below_minimum=true").json()["count"] == 1


def test_minimum_stock_is_policy_global_permission_to_write(tech, stock):
    body = {"site": stock.sh1.pk, "accelerator_model": stock.h100.pk, "minimum": 4, "target": 8}
    assert tech.post(f"{BASE}/minimum-stock/", body, format="json").status_code == 403
    lead = UserFactory(username="lead")
    lead.user_permissions.add(*Permission.objects.filter(codename__in=["add_minimumstock", "change_minimumstock"]))
    grant_scope(scope_obj=stock.sh1, perms=["view_scope"], users=[lead])
    client = APIClient()
    client.force_authenticate(lead)
    assert client.post(f"{BASE}/minimum-stock/", body, format="json").status_code == 201
    both = client.post(f"{BASE}/minimum-stock/", {**body, "part_model": stock.cable.pk}, format="json")
    assert both.status_code == 400
    assert tech.get(f"{BASE}/minimum-stock/").json()["results"][0]["item"] == stock.h100.name


def test_stocktake_adjusts_consumables_and_reports_serials(tech, stock, cards):
    ledger.consumable_move(part_model=stock.cable, kind="receive", quantity=10, location=stock.wh1, reason="r")
    response = tech.post(
        f"{BASE}/stocktakes/",
        {
            "location": stock.wh1.pk,
            "counts": {stock.cable.sku: 7},
            "serials": ["GPU-0", "GPU-1", "GPU-X"],
            "reason": "Q1 count",
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert [a["quantity"] for a in body["adjustments"]] == [-3]
    assert (body["missing"], body["unexpected"]) == (["GPU-2"], ["GPU-X"])
    assert set(StockDiscrepancy.objects.values_list("kind", "serial")) == {
        ("stocktake_missing", "GPU-2"),
        ("stocktake_unexpected", "GPU-X"),
    }
    listed = tech.get(f"{BASE}/discrepancies/?status=open").json()
    assert listed["count"] == 2
    # Cards are never adjusted away by a count: a person decides (here, write it off).
    assert m.Accelerator.objects.get(serial="GPU-2").lifecycle == "in_stock"
    row = StockDiscrepancy.objects.get(serial="GPU-2")
    resolved = tech.post(f"{BASE}/discrepancies/{row.pk}/resolve/", {"reason": "found in RMA cage"}, format="json")
    assert resolved.json()["status"] == "resolved"


def test_anonymous_is_refused(client):
    assert client.get(f"{BASE}/movements/").status_code in (401, 403)


def test_list_and_overview_query_counts_do_not_grow_with_the_data(tech, stock, django_assert_max_num_queries):
    def grow(n: int) -> None:
        cards = ledger.accelerators_receive(
            cards=[ledger.CardReceipt(serial=f"Q{n}-{i}", model=stock.h100) for i in range(n)],
            location=stock.wh1,
            reason="r",
            key_prefix=f"q{n}",
        )
        for i, card in enumerate(cards[:2]):
            ledger.accelerator_transfer(accelerator=card, to_location=stock.shelf1, reason="t", key=f"t{n}{i}")
        node = NodeFactory(site=stock.sh1)
        for slot in range(n):
            AcceleratorFactory(node=node, slot_index=slot, model=stock.h100)

    grow(3)
    for url in (f"{BASE}/movements/", f"{BASE}/overview/", f"{BASE}/reservations/"):
        with django_assert_max_num_queries(12) as small:
            assert tech.get(url).status_code == 200
        grow(20)
        with django_assert_max_num_queries(len(small.captured_queries)):
            assert tech.get(url).status_code == 200


def test_reservations_expire_unless_issued(stock, cards):
    import datetime as dt

    from django.utils import timezone

    from cmdb.services.stock import reservations_expire, spare_reserve

    res = spare_reserve(site=stock.sh1, model=stock.h100, reserved_for="ticket:1", key="k1", ttl=dt.timedelta(hours=1))
    assert reservations_expire(now=timezone.now() + dt.timedelta(minutes=30)) == 0
    assert reservations_expire(now=timezone.now() + dt.timedelta(hours=2)) == 1
    res.refresh_from_db()
    assert res.status == "expired"
    assert m.StockMovement.objects.filter(kind="release", accelerator=res.accelerator).exists()
    # Free again for the next holder.
    assert spare_reserve(site=stock.sh1, model=stock.h100, reserved_for="ticket:2", key="k2").status == "active"
