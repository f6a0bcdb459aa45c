"""One count of spare cards: the stock overview (API, admin), the minimum-stock check and the console's stock
list all say how many cards are in stock - in the demo (whose spares were once invisible: 0 everywhere) and
whichever path put a card into stock."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db.models import Count

from cmdb import models as m
from cmdb.selectors import spare_counts
from cmdb.services import stock as cmdb_stock
from integrations.warehouse.models import MinimumStock
from integrations.warehouse.services.minimum import minimum_stock_check
from integrations.warehouse.services.stock import ledger_drift, stock_line_for, stock_lines
from tests.factories.cmdb import AcceleratorFactory, AcceleratorModelFactory, SiteFactory, StockLocationFactory

pytestmark = pytest.mark.django_db


def in_stock_by_site_and_model() -> dict[tuple[str, str], int]:
    rows = (
        m.Accelerator.objects.filter(lifecycle="in_stock")
        .values_list("site__code", "model__name")
        .annotate(n=Count("id"))
    )
    return {(site, model): n for site, model, n in rows}


def test_the_demo_overview_counts_the_cards_in_stock(admin_client):
    call_command("seed_demo", "--scale", "small", verbosity=0)
    cards = in_stock_by_site_and_model()
    assert sum(cards.values()) == 12
    lines = {(ln.site_code, ln.model_name): ln.on_hand for ln in stock_lines() if ln.kind == "accelerator"}
    assert {k: v for k, v in lines.items() if v} == cards
    # The API overview and the admin page read the same lines.
    api = admin_client.get("/api/integrations/warehouse/overview/").json()["results"]
    assert sum(r["on_hand"] for r in api if r["kind"] == "accelerator") == 12
    assert admin_client.get("/admin/warehouse/sitestockoverview/").status_code == 200
    # The console's stock list shows the same figures, and its CSV adds up to the cards in stock.
    body = b"".join(admin_client.get("/stock/?format=csv&cols=kind,on_hand").streaming_content).decode()
    assert sum(int(line.split(",")[1]) for line in body.splitlines()[1:] if line.startswith("accelerator")) == 12
    # The demo wrote the receipts of its spares: the ledger agrees with the cards.
    assert ledger_drift() == []


def test_a_card_put_into_stock_by_any_path_is_a_spare_and_reserving_it_leaves_none_free():
    site, model = SiteFactory(code="sh1"), AcceleratorModelFactory()
    location = StockLocationFactory(site=site)
    # Written straight to the table (an import, a script): no ledger row, still a card in stock.
    AcceleratorFactory(node=None, lifecycle="in_stock", stock_location=location, model=model)
    assert spare_counts() == {(site.pk, model.pk): (1, 0)}
    line = stock_line_for(site=site, accelerator_model=model)
    assert (line.on_hand, line.reserved, line.free) == (1, 0, 1)
    cmdb_stock.spare_reserve(site=site, model=model, reserved_for="ticket:1", key="r1")
    line = stock_line_for(site=site, accelerator_model=model)
    assert (line.on_hand, line.reserved, line.free) == (1, 1, 0)
    assert spare_counts(site_ids=[SiteFactory(code="bj2").pk]) == {}


def test_the_minimum_stock_check_sees_the_spares_the_overview_shows(monkeypatch):
    site, model = SiteFactory(code="sh1"), AcceleratorModelFactory()
    location = StockLocationFactory(site=site)
    for _ in range(3):
        AcceleratorFactory(node=None, lifecycle="in_stock", stock_location=location, model=model)
    MinimumStock.objects.create(site=site, accelerator_model=model, minimum=2)
    refills: list = []
    monkeypatch.setattr(
        "integrations.warehouse.services.minimum.refill_request_upsert", lambda **kw: refills.append(kw)
    )
    assert minimum_stock_check() == [] and refills == []  # 3 free >= 2: no refill of spares that exist
