"""Card-hours by state from a crafted history equal the hand-computed figures; whatever the history, a card's
states sum to the period; cost follows from the prices; scoped readers see only their sites."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest
from django.contrib.contenttypes.models import ContentType

from cmdb import models as m
from cmdb.capacity import CapacityQuery, card_hours
from cmdb.permissions import grant_scope
from cmdb.services.capacity import capacity_rollup, month_rollup, node_spans_rebuild
from tests.factories.cmdb import (
    AcceleratorFactory,
    ClusterFactory,
    NodeFactory,
    SiteFactory,
    StockLocationFactory,
    TenantFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

UTC = dt.UTC
MARCH = dt.date(2026, 3, 1)
NOW = dt.datetime(2026, 12, 4, tzinfo=UTC)


def at(day: int, month: int = 3, hour: int = 0) -> dt.datetime:
    return dt.datetime(2026, month, day, hour, tzinfo=UTC)


def change(node: m.Node, when: dt.datetime, **fields: list) -> None:
    m.ChangeRecord.objects.create(
        at=when,
        content_type=ContentType.objects.get_for_model(m.Node),
        object_id=node.pk,
        object_repr=node.hostname,
        action="update",
        changes=fields,
        source="api",
        correlation_id="test",
    )


def placed(card: m.Accelerator, spans: list[tuple[str, dt.datetime, dt.datetime | None, dict]]) -> None:
    m.AcceleratorPlacement.objects.filter(accelerator=card).delete()
    for kind, start, end, where in spans:
        m.AcceleratorPlacement.objects.create(accelerator=card, kind=kind, started_at=start, ended_at=end, **where)


@pytest.fixture
def world():
    site = SiteFactory(code="cap1")
    m.Site.objects.filter(pk=site.pk).update(power_price_kwh=Decimal("0.1000"), pue=Decimal("1.50"))
    tenant, cluster = TenantFactory(slug="llm"), ClusterFactory(name="train")
    node = NodeFactory(site=site, cluster=cluster, tenant=tenant, status="active")
    m.Node.objects.filter(pk=node.pk).update(is_cordoned=True, cordon_reason="fan noise")
    stock = StockLocationFactory(site=site, name="cap1-wh")
    card = AcceleratorFactory(node=None, slot_index=None, lifecycle="in_stock", stock_location=stock, site=site)
    model = card.model
    m.AcceleratorModel.objects.filter(pk=model.pk).update(
        unit_price=Decimal("36500.00"), amortisation_months=50, tdp_w=700
    )
    # In the node since January; in stock from 25 March. The node: maintenance 10-12 March, cordoned from 20 March.
    placed(
        card,
        [
            ("node", at(1, 1), at(25), {"node": node, "slot_index": 0}),
            ("stock", at(25), None, {"stock_location": stock}),
        ],
    )
    change(node, at(10), status=["active", "maintenance"])
    change(node, at(12), status=["maintenance", "active"])
    change(node, at(20), is_cordoned=[False, True])
    return {"site": site, "node": node, "card": card, "tenant": tenant, "cluster": cluster}


def _hours(month: dt.date) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in m.CardHours.objects.filter(month=month):
        out[row.state] = out.get(row.state, 0.0) + row.hours
    return out


def test_march_card_hours_equal_the_hand_computed_ones(world):
    node_spans_rebuild()
    month_rollup(MARCH, now=NOW)
    hours = _hours(MARCH)
    # 1-10 and 12-20 in service (9 + 8 days), 10-12 repair, 20-25 idle (cordoned), 25-31 in stock (7 days).
    assert hours == pytest.approx({"in_service": 408.0, "repair": 48.0, "idle": 120.0, "in_stock": 168.0})
    assert sum(hours.values()) == pytest.approx(31 * 24)
    rows = m.CardHours.objects.filter(month=MARCH, state="idle")
    assert [(r.site_id, r.cluster_id, r.tenant_id) for r in rows] == [
        (world["site"].pk, world["cluster"].pk, world["tenant"].pk)
    ]


def test_the_current_month_counts_up_to_now(world):
    node_spans_rebuild()
    month_rollup(dt.date(2026, 12, 1), now=NOW)
    # In stock since March: three days and nothing else of December so far.
    assert _hours(dt.date(2026, 12, 1)) == pytest.approx({"in_stock": 72.0})


def test_cost_follows_from_prices_power_and_pue(world):
    capacity_rollup(months=10, now=NOW)
    report = card_hours(UserFactory(is_superuser=True), CapacityQuery(start=MARCH, end=MARCH, by="tenant")).as_dict()
    capital = Decimal("36500") / (50 * 730)  # 1.00 per card-hour
    power = Decimal("0.7") * Decimal("0.1") * Decimal("1.5")  # 0.105 per powered card-hour
    tenant = next(r for r in report["rows"] if r["key"] == "llm")
    assert Decimal(tenant["cost"]["in_service"]) == (capital + power) * 408
    assert Decimal(tenant["idle_cost"]) == (capital + power) * 120
    assert Decimal(tenant["repair_cost"]) == capital * 48  # a node in repair draws no power
    stock = next(r for r in report["rows"] if r["key"] == "none")
    assert Decimal(stock["cost"]["in_stock"]) == capital * 168
    assert report["total"]["total_hours"] == 744.0


def test_a_site_viewer_reads_only_their_sites_hours(world):
    other = SiteFactory(code="qzxb-cap")
    card = AcceleratorFactory(node=NodeFactory(site=other), site=other)
    placed(card, [("node", at(1, 1), None, {"node": card.node, "slot_index": 0})])
    capacity_rollup(months=10, now=NOW)
    viewer = UserFactory(username="cap-viewer")
    grant_scope(scope_obj=world["site"], perms=["view_scope"], users=[viewer])
    mine = card_hours(viewer, CapacityQuery(start=MARCH, end=MARCH, by="site")).as_dict()
    assert [r["key"] for r in mine["rows"]] == ["cap1"] and mine["total"]["total_hours"] == 744.0
    everyone = card_hours(UserFactory(is_superuser=True), CapacityQuery(start=MARCH, end=MARCH, by="site"))
    assert everyone.total.total_hours == pytest.approx(2 * 744.0)


@pytest.mark.parametrize("seed", range(6))
def test_whatever_the_history_each_cards_states_sum_to_the_period(seed):
    """Random status, cordon and placement histories: every card is somewhere at every instant, so the month's
    card-hours are (cards x hours of the month), split over the states."""
    rng = random.Random(seed)
    site = SiteFactory()
    stock = StockLocationFactory(site=site)
    statuses = [s.value for s in m.NodeStatus]
    cards = []
    for i in range(4):
        node = NodeFactory(site=site, status=rng.choice(statuses))
        when = at(1, 2)
        for _ in range(rng.randint(0, 6)):
            when += dt.timedelta(hours=rng.randint(1, 400))
            if rng.random() < 0.5:
                change(node, when, status=[rng.choice(statuses), rng.choice(statuses)])
            else:
                change(node, when, is_cordoned=[rng.random() < 0.5, rng.random() < 0.5])
        card = AcceleratorFactory(node=node, slot_index=i, site=site)
        cuts = sorted(at(1, 1) + dt.timedelta(hours=rng.randint(1, 24 * 150)) for _ in range(rng.randint(0, 4)))
        bounds = [at(1, 1), *cuts]
        spans = []
        for j, start in enumerate(bounds):
            end = bounds[j + 1] if j + 1 < len(bounds) else None
            kind = rng.choice(["node", "stock", "in_transit", "at_vendor"])
            where = {"node": node, "slot_index": 0} if kind == "node" else {}
            if kind == "stock":
                where = {"stock_location": stock}
            spans.append((kind, start, end, where))
        placed(card, spans)
        cards.append(card)
    node_spans_rebuild()
    for month in (dt.date(2026, 2, 1), MARCH, dt.date(2026, 4, 1)):
        month_rollup(month, now=NOW)
        days = (month.replace(month=month.month + 1) - month).days
        assert sum(_hours(month).values()) == pytest.approx(len(cards) * days * 24), month


def test_bad_months_and_dimensions_are_refused_naming_the_parameter():
    from cmdb.lifecycle import ReportQueryError

    today = dt.date(2026, 12, 4)
    assert CapacityQuery.from_params({}, today=today).start == dt.date(2026, 11, 1)
    for params, field in (
        ({"from": "2026-13"}, "from"),
        ({"by": "colour"}, "by"),
        ({"from": "2026-05", "to": "2026-01"}, "to"),
    ):
        with pytest.raises(ReportQueryError) as err:
            CapacityQuery.from_params(params, today=today)
        assert err.value.field == field


def _api(user):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_the_api_answers_json_and_csv_and_names_bad_input(world):
    capacity_rollup(months=10, now=NOW)
    client = _api(UserFactory(is_superuser=True))
    body = client.get("/api/cmdb/reports/card-hours/", {"from": "2026-03", "to": "2026-04", "by": "cluster"}).json()
    assert [m["key"] for m in body["by_month"]] == ["2026-03", "2026-04"]
    assert body["by_month"][0]["hours"]["idle"] == 120.0 and body["by_month"][1]["hours"]["in_stock"] == 720.0
    assert {r["key"] for r in body["rows"]} == {"train", "none"}
    csv_text = client.get("/api/cmdb/reports/card-hours.csv", {"from": "2026-03"}).content.decode()
    head, *lines = csv_text.strip().splitlines()
    assert head.startswith("tenant,in_service_hours,") and lines[0].startswith("llm,408.0,")
    assert lines[-1].startswith("total,")
    bad = client.get("/api/cmdb/reports/card-hours/", {"from": "March"})
    assert bad.status_code == 400 and "from" in bad.json()["error"]["fields"]


def test_the_management_command_fills_past_months(world, capsys):
    from django.core.management import call_command

    call_command("capacity_rollup", "--months", "12")
    assert "rollup rows" in capsys.readouterr().out
    assert m.CardHours.objects.filter(month=MARCH).exists()
