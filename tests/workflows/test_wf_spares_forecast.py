"""Spares forecast: failures per site and model turned into days of cover and a suggested minimum (the reorder
point of the failures expected in the lead time), scoped to the user's sites; a refill raised from it goes
through procurement, only for who may raise one and only where spares are short."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from cmdb import models as m
from cmdb.permissions import grant_scope
from integrations.procurement.models import ApprovalRule, ProcurementRequest
from tests.factories.cmdb import (
    AcceleratorFactory,
    AcceleratorModelFactory,
    NodeFactory,
    SiteFactory,
    StockLocationFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db
FORECAST = "/api/workflows/spares/forecast/"
REFILL = "/api/workflows/spares/refill/"


def _client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture
def fleet():
    """Site f1: 10 installed cards of one model, 6 of which failed in the last 180 days, and 2 spares in stock."""
    now = timezone.now()
    site, model = SiteFactory(code="f1"), AcceleratorModelFactory(name="FX-100")
    stock = StockLocationFactory(site=site, name="f1-wh")
    ct = ContentType.objects.get_for_model(m.Accelerator)
    node = None
    for i in range(10):
        if i % 8 == 0:
            node = NodeFactory(site=site, hostname=f"f1-{i:04d}")
        card = AcceleratorFactory(node=node, slot_index=i % 8, model=model, site=site)
        m.AcceleratorPlacement.objects.filter(accelerator=card).delete()
        m.AcceleratorPlacement.objects.create(
            accelerator=card, kind="node", node=node, slot_index=i % 8, started_at=now - dt.timedelta(days=400)
        )
        if i < 6:
            m.ChangeRecord.objects.create(
                at=now - dt.timedelta(days=10 + 20 * i),
                content_type=ct,
                object_id=card.pk,
                object_repr=card.serial,
                action="update",
                changes={"health": ["ok", "failed"]},
                source="agent",
                correlation_id=f"f{i}",
            )
    for _ in range(2):
        AcceleratorFactory(
            node=None, slot_index=None, lifecycle="in_stock", stock_location=stock, model=model, site=site
        )
    return {"site": site, "model": model}


def test_the_forecast_turns_failures_into_cover_and_a_suggested_minimum(fleet):
    body = _client(UserFactory(is_superuser=True)).get(FORECAST, {"days": 180}).json()
    row = next(r for r in body["rows"] if r["site"] == "f1")
    assert (row["installed"], row["free_spares"], row["failures"]) == (10, 2, 6)
    # 6 failures in 180 days: 1 per 30 days; 2 spares last 60 days.
    assert row["failures_per_30_days"] == 1.0 and row["days_of_cover"] == 60.0
    # A 30-day lead time expects 1 failure: ceil(1 + 1.65 x sqrt(1)) = 3, one more than in hand.
    assert row["suggested_minimum"] == 3 and row["shortfall"] == 1
    assert row["afr_percent"] == pytest.approx(121.67)


def test_a_viewer_of_another_site_sees_no_row_of_this_one(fleet):
    viewer = UserFactory(username="other-viewer")
    grant_scope(scope_obj=SiteFactory(code="qzxb-f2"), perms=["view_scope"], users=[viewer])
    body = _client(viewer).get(FORECAST).json()
    assert all(r["site"] != "f1" for r in body["rows"])


def test_a_refill_is_raised_through_procurement_for_the_shortfall(fleet):
    user = UserFactory(username="buyer")
    grant_scope(scope_obj=fleet["site"], perms=["view_scope"], users=[user])
    body = {"site": "f1", "model": fleet["model"].pk, "days": 180}
    assert _client(user).post(REFILL, body, format="json").status_code == 403
    assert not ProcurementRequest.objects.exists()
    user.user_permissions.add(Permission.objects.get(codename="add_procurementrequest"))
    # The request is priced from the cost model's card price, and an approval rule covers it.
    m.AcceleratorModel.objects.filter(pk=fleet["model"].pk).update(unit_price=20000)
    ApprovalRule.objects.create(
        name="spares", level=1, min_amount=0, max_amount=100000, group=Group.objects.create(name="spares-approvers")
    )
    response = _client(user).post(REFILL, body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["quantity"] == 1
    request = ProcurementRequest.objects.get()
    assert "Spares forecast" in request.justification and request.state == "submitted"
    assert request.lines.get().unit_price == 20000
    # Raising it again updates the same request, never a second one.
    again = _client(user).post(REFILL, body, format="json")
    assert again.status_code == 200 and ProcurementRequest.objects.count() == 1


def test_no_refill_where_the_spares_suffice_and_bad_input_is_named(fleet):
    stock = m.StockLocation.objects.get(name="f1-wh")
    for _ in range(3):
        AcceleratorFactory(
            node=None,
            slot_index=None,
            lifecycle="in_stock",
            stock_location=stock,
            model=fleet["model"],
            site=fleet["site"],
        )
    root = _client(UserFactory(is_superuser=True))
    enough = root.post(REFILL, {"site": "f1", "model": fleet["model"].pk}, format="json")
    assert enough.status_code == 400 and "model" in enough.json()["error"]["fields"]
    assert root.get(FORECAST, {"days": "a year"}).status_code == 400
    assert root.post(REFILL, {"site": "f1", "model": "x"}, format="json").status_code == 400
    assert not ProcurementRequest.objects.exists()


def test_the_console_offers_the_order_only_to_who_may_raise_it(fleet):
    from django.test import Client

    viewer = UserFactory(username="f1-viewer")
    grant_scope(scope_obj=fleet["site"], perms=["view_scope"], users=[viewer])
    client = Client()
    client.force_login(viewer)
    page = client.get("/lifecycle/").content.decode()
    assert "FX-100" in page and "short by 1" in page and "Order 1" not in page
    response = client.post("/lifecycle/spares/refill/", {"site": "f1", "model": fleet["model"].pk}, follow=True)
    assert "requires procurement.add_procurementrequest" in response.content.decode()
    assert not ProcurementRequest.objects.exists()

    m.AcceleratorModel.objects.filter(pk=fleet["model"].pk).update(unit_price=20000)
    ApprovalRule.objects.create(
        name="console", level=1, min_amount=0, max_amount=10**6, group=Group.objects.create(name="g")
    )
    root = Client()
    root.force_login(UserFactory(username="f1-root", is_superuser=True))
    assert "Order 1" in root.get("/lifecycle/").content.decode()
    done = root.post("/lifecycle/spares/refill/", {"site": "f1", "model": fleet["model"].pk}, follow=True)
    assert "Opened procurement request" in done.content.decode()
    assert ProcurementRequest.objects.get().lines.get().quantity == 1
