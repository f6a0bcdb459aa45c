"""Failure analytics: AFR and MTBF from crafted history equal the hand-computed values; repeat offenders
(the slot that kills its cards); signals over time; root causes; scoping; bounded query counts."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from cmdb.permissions import grant_scope
from tests.factories.cmdb import (
    AcceleratorFactory,
    AcceleratorModelFactory,
    NodeFactory,
    SiteFactory,
    UserFactory,
)
from workflows.failures import (
    FailureScope,
    failure_events,
    failure_rates,
    offenders_in_scope,
    slot_failures,
    top_signals,
)

pytestmark = pytest.mark.django_db

END = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def _placed(card, start: dt.datetime, end: dt.datetime | None = None, *, node=None, slot=None) -> None:
    m.AcceleratorPlacement.objects.create(
        accelerator=card,
        serial=card.serial or "",
        kind="node",
        node=node or card.node,
        slot_index=card.slot_index if slot is None else slot,
        started_at=start,
        ended_at=end,
    )


def _failed(card, at: dt.datetime) -> None:
    m.ChangeRecord.objects.create(
        at=at,
        content_type=ContentType.objects.get_for_model(card),
        object_id=card.pk,
        object_repr=str(card),
        action="update",
        changes={"health": ["ok", "failed"]},
        source="agent",
        correlation_id=f"f-{card.pk}-{at.timestamp()}",
    )


@pytest.fixture
def crafted(db):
    """Site A: model X cards A (whole 100 days) and B (last 50 days), A failed once; model Y card C (100 days),
    no failure. Site B: model X card D (100 days), failed twice 40 days apart."""
    m.AcceleratorPlacement.objects.all().delete()
    site_a, site_b = SiteFactory(code="afr-a"), SiteFactory(code="afr-b")
    x, y = AcceleratorModelFactory(name="X-80GB"), AcceleratorModelFactory(name="Y-64GB")
    node_a, node_b = NodeFactory(site=site_a), NodeFactory(site=site_b)
    start = END - dt.timedelta(days=100)
    a = AcceleratorFactory(node=node_a, slot_index=0, model=x, driver_version="570")
    b = AcceleratorFactory(node=node_a, slot_index=1, model=x, driver_version="550")
    c = AcceleratorFactory(node=node_a, slot_index=2, model=y, driver_version="570")
    d = AcceleratorFactory(node=node_b, slot_index=0, model=x, driver_version="570")
    m.AcceleratorPlacement.objects.all().delete()
    _placed(a, start - dt.timedelta(days=30))  # before the period: only the overlap counts
    _placed(b, END - dt.timedelta(days=50))
    _placed(c, start, END + dt.timedelta(days=5))
    _placed(d, start)
    _failed(a, END - dt.timedelta(days=10))
    _failed(a, start - dt.timedelta(days=1))  # before the period
    _failed(d, END - dt.timedelta(days=60))
    _failed(d, END - dt.timedelta(days=20))
    return {"site_a": site_a, "site_b": site_b, "cards": (a, b, c, d)}


def _superuser():
    return UserFactory(username="afr-root", is_superuser=True)


def test_afr_and_mtbf_equal_the_hand_computed_values(crafted):
    scope = FailureScope(user=_superuser(), days=100, until=END)
    rows = {r.key: r for r in failure_rates(scope, "model")}
    # X: 100 (A) + 50 (B) + 100 (D) = 250 card-days, 3 failures (A once, D twice in the period).
    assert rows["X-80GB"].failures == 3 and rows["X-80GB"].card_days == pytest.approx(250)
    assert rows["X-80GB"].afr_percent == pytest.approx(round(100 * 3 / (250 / 365), 3))  # 438.0 %
    assert rows["X-80GB"].mtbf_hours == pytest.approx(2000.0)  # 250 * 24 / 3
    assert rows["Y-64GB"].failures == 0 and rows["Y-64GB"].card_days == pytest.approx(100)
    assert rows["Y-64GB"].afr_percent == 0 and rows["Y-64GB"].mtbf_hours is None
    by_driver = {r.key: (r.failures, round(r.card_days)) for r in failure_rates(scope, "driver")}
    assert by_driver == {"570": (3, 300), "550": (0, 50)}
    by_site = {r.key: (r.failures, round(r.card_days)) for r in failure_rates(scope, "site")}
    assert by_site == {"afr-a": (1, 250), "afr-b": (2, 100)}


def test_a_repair_opened_for_the_same_failure_counts_once(crafted, wf):
    from workflows.engine import ticket_create
    from workflows.models import Ticket

    a = crafted["cards"][0]
    ticket = ticket_create(type_="repair", title="A failed", requester=None, inputs={"accelerator": a})
    Ticket.objects.filter(pk=ticket.pk).update(created_at=END - dt.timedelta(days=10) + dt.timedelta(hours=2))
    events = failure_events(m.Accelerator.objects.filter(pk=a.pk), END - dt.timedelta(days=100), END)
    assert len(events) == 1 and events[0].ticket_id == ticket.pk and events[0].slot_index == 0


def test_rates_are_scoped_to_what_the_user_may_see(crafted):
    viewer = UserFactory(username="afr-viewer")
    grant_scope(scope_obj=crafted["site_a"], perms=["view_scope"], users=[viewer])
    rows = {r.key: r.failures for r in failure_rates(FailureScope(user=viewer, days=100, until=END), "model")}
    assert rows == {"X-80GB": 1, "Y-64GB": 0}
    client = Client()
    client.force_login(viewer)
    body = client.get("/api/workflows/failures/rates/", {"by": "site", "days": 3660}).json()
    assert {r["key"] for r in body["rows"]} == {"afr-a"}
    assert client.get("/api/workflows/failures/rates/", {"by": "colour"}).status_code == 400
    bad = client.get("/api/workflows/failures/rates/", {"days": "lots"})
    assert bad.status_code == 400 and "days" in bad.json()["error"]["fields"]
    site_only = FailureScope(user=_superuser(), site="afr-b", days=100, until=END)
    assert {r.key for r in failure_rates(site_only, "site")} == {"afr-b"}


def test_rate_queries_do_not_grow_with_the_fleet(crafted):
    scope = FailureScope(user=_superuser(), days=100, until=END)
    with CaptureQueriesContext(connection) as few:
        failure_rates(scope, "model")
    x = crafted["cards"][0].model
    for i in range(20):
        card = AcceleratorFactory(model=x, node=NodeFactory(site=crafted["site_a"]), slot_index=0)
        _placed(card, END - dt.timedelta(days=30))
        _failed(card, END - dt.timedelta(days=3, hours=i))
    with CaptureQueriesContext(connection) as many:
        failure_rates(scope, "model")
    assert len(many) == len(few)


def test_a_slot_that_kills_its_cards_is_a_repeat_offender(db):
    site = SiteFactory(code="rep")
    node = NodeFactory(site=site, hostname="rep-0001")
    first = AcceleratorFactory(node=None, slot_index=None, site=site, lifecycle="rma", serial="REP-1")
    second = AcceleratorFactory(node=node, slot_index=5, serial="REP-2")
    third = AcceleratorFactory(node=node, slot_index=6, serial="REP-3")
    m.AcceleratorPlacement.objects.all().delete()
    _placed(first, END - dt.timedelta(days=60), END - dt.timedelta(days=20), node=node, slot=5)
    _placed(second, END - dt.timedelta(days=20), node=node, slot=5)
    _placed(third, END - dt.timedelta(days=60), node=node, slot=6)
    _failed(first, END - dt.timedelta(days=21))
    _failed(second, END - dt.timedelta(days=2))
    _failed(third, END - dt.timedelta(days=50))  # a lone failure long ago: no offender
    offenders = offenders_in_scope(FailureScope(user=_superuser(), until=END))
    slot = [o for o in offenders if o.kind == "slot"]
    assert len(slot) == 1 and slot[0].label == "rep-0001 slot 5" and slot[0].cards == ("REP-1", "REP-2")
    assert slot[0].hint == "this slot failed 2 cards in 30 days - consider board repair"
    assert [o.kind for o in offenders] == ["slot", "node"]  # no card failed twice
    assert slot_failures(node.pk, 5, at=END) == 2 and slot_failures(node.pk, 6, at=END) == 0


def test_a_card_failing_twice_within_30_days_is_flagged(crafted):
    d = crafted["cards"][3]
    _failed(d, END - dt.timedelta(days=5))  # 15 days after its failure at END - 20
    offenders = offenders_in_scope(FailureScope(user=_superuser(), until=END))
    card = [o for o in offenders if o.kind == "card"]
    assert len(card) == 1 and card[0].cards == (d.serial,) and card[0].failures == 2


def test_top_signals_per_period(db):
    node = NodeFactory(site=SiteFactory(code="sig"))
    for i, (kind, code, count) in enumerate([("xid", "79", 3), ("xid", "79", 2), ("ecc_uncorrectable", "", 1)]):
        m.HealthEvent.objects.create(
            node=node,
            kind=kind,
            code=code,
            severity="critical",
            dedup_key=f"k{i}",
            count=count,
            first_seen_at=END - dt.timedelta(days=2 + i * 7),
            last_seen_at=END,
            resolved_at=END,
        )
    periods, series = top_signals(FailureScope(user=_superuser(), days=30, until=END))
    assert [(s.signal, s.total) for s in series] == [("xid:79", 5), ("ecc_uncorrectable", 1)]
    assert len(periods) == 3 and sorted(series[0].by_period.values()) == [2, 3]


def test_the_failures_page_renders_for_a_scoped_user(crafted):
    viewer = UserFactory(username="afr-page")
    grant_scope(scope_obj=crafted["site_a"], perms=["view_scope"], users=[viewer])
    client = Client()
    client.force_login(viewer)
    page = client.get("/failures/", {"days": 3660, "by": "model"})
    assert page.status_code == 200
    assert b"X-80GB" in page.content and b"afr-b" not in page.content
    assert client.get("/failures/", {"days": "x"}).status_code == 400


def test_the_demo_history_gives_windows_an_offender_slot_and_a_closed_incident(db, groups):
    from cmdb.services.demo_history import OFFENDER_HOST, demo_repeat_offender_load, demo_windows_load
    from workflows.models import Ticket
    from workflows.services.demo_learning import demo_incident_load

    site = SiteFactory(code="sh1")
    node = NodeFactory(hostname=OFFENDER_HOST, site=site)
    for i in range(8):
        AcceleratorFactory(node=node, slot_index=i)
    assert demo_windows_load(["sh1"]) == 1 and demo_windows_load(["sh1"]) == 0
    assert demo_repeat_offender_load() == 2 and demo_repeat_offender_load() == 0
    incident = demo_incident_load()
    assert incident is not None and demo_incident_load() is None
    incident.refresh_from_db()
    assert incident.state == "closed" and incident.postmortem.root_cause.slug == "hardware-board"
    assert Ticket.objects.filter(type="incident", is_open=True).count() == 1  # the action item
    offenders = offenders_in_scope(FailureScope(user=_superuser()))
    assert [o.label for o in offenders if o.kind == "slot"] == [f"{OFFENDER_HOST} slot 5"]


def test_the_repair_page_offers_board_repair_for_a_slot_that_kills_cards(db, groups):
    from workflows.engine import ticket_create

    now = dt.datetime.now(dt.UTC)
    site = SiteFactory(code="rpo")
    node = NodeFactory(site=site, hostname="rpo-0001")
    gone = AcceleratorFactory(node=None, slot_index=None, site=site, lifecycle="rma", serial="RPO-1")
    current = AcceleratorFactory(node=node, slot_index=2, serial="RPO-2")
    m.AcceleratorPlacement.objects.all().delete()
    _placed(gone, now - dt.timedelta(days=40), now - dt.timedelta(days=10), node=node, slot=2)
    _placed(current, now - dt.timedelta(days=10))
    _failed(gone, now - dt.timedelta(days=11))
    _failed(current, now - dt.timedelta(hours=1))
    repair = ticket_create(type_="repair", title="RPO-2 failed", requester=None, inputs={"accelerator": current})
    client = Client()
    client.force_login(_superuser())
    page = client.get(f"/tickets/{repair.pk}/")
    assert page.status_code == 200
    assert b"this slot failed 2 cards in 30 days - consider board repair" in page.content
