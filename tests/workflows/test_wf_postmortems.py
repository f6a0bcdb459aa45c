"""Incident postmortems: what changed before the incident (exactly the window's changes on the affected
objects), the close guard, impact, action items, Markdown and the API."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.utils import timezone

from cmdb import models as m
from tests.factories.cmdb import AcceleratorFactory, NodeFactory, RackFactory, RoomFactory, TenantFactory
from tests.workflows.helpers import take
from workflows.engine import GuardError, ticket_create
from workflows.models import Postmortem, Ticket
from workflows.services.postmortems import (
    postmortem_action_add,
    postmortem_markdown,
    postmortem_report,
    postmortem_save,
)

pytestmark = pytest.mark.django_db


def _record(obj, at: dt.datetime, changes: dict, *, correlation_id: str = "", source: str = "admin") -> m.ChangeRecord:
    return m.ChangeRecord.objects.create(
        at=at,
        content_type=ContentType.objects.get_for_model(obj),
        object_id=obj.pk,
        object_repr=str(obj),
        action="update",
        changes=changes,
        actor_repr="alice",
        source=source,
        correlation_id=correlation_id or f"c-{obj.pk}-{at.timestamp()}",
    )


@pytest.fixture
def incident(wf, fleet, tech):
    ticket = wf.run(
        ticket_create, type_="incident", title="Jobs dying on sh9", requester=tech, inputs={"node": fleet.node.hostname}
    )
    start = timezone.now() - dt.timedelta(hours=1)
    Ticket.objects.filter(pk=ticket.pk).update(created_at=start)
    ticket.refresh_from_db()
    return ticket


def test_what_changed_lists_exactly_the_windows_changes_on_the_affected_objects(incident, fleet, lead):
    start = incident.created_at
    other_site_node = NodeFactory(hostname="elsewhere-0001")
    rollout = ticket_create(type_="incident", title="the change", requester=lead, inputs={"node": fleet.node.hostname})
    inside = [
        _record(
            fleet.node,
            start - dt.timedelta(hours=2),
            {"kernel": ["5.15", "6.1"]},
            correlation_id=rollout.correlation_id,
        ),
        _record(fleet.cards[0], start - dt.timedelta(hours=70), {"driver_version": ["550", "570"]}, source="workflow"),
        _record(fleet.node.rack, start - dt.timedelta(hours=10), {"status": ["active", "maintenance"]}),
        _record(fleet.cluster, start - dt.timedelta(hours=30), {"capacity_floor_percent": [80, 60]}),
    ]
    # Outside the window, after the start, on an unrelated node, or the incident's own change: not listed.
    _record(fleet.node, start - dt.timedelta(hours=73), {"kernel": ["5.10", "5.15"]})
    _record(fleet.node, start + dt.timedelta(minutes=5), {"status": ["active", "draining"]})
    _record(other_site_node, start - dt.timedelta(hours=1), {"kernel": ["5.15", "6.1"]})
    _record(
        fleet.node, start - dt.timedelta(hours=1), {"labels": [{}, {"x": 1}]}, correlation_id=incident.correlation_id
    )

    report = postmortem_report(incident, lead)

    assert [c.record_id for c in report.changes] == [r.pk for r in sorted(inside, key=lambda r: r.at)]
    by_id = {c.record_id: c for c in report.changes}
    assert by_id[inside[0].pk].ticket_reference == rollout.reference
    assert by_id[inside[1].pk].source == "workflow" and by_id[inside[1].pk].actor == "alice"


def test_the_window_is_configurable(incident, fleet, tech):
    start = incident.created_at
    near = _record(fleet.node, start - dt.timedelta(hours=5), {"kernel": ["a", "b"]})
    _record(fleet.node, start - dt.timedelta(hours=30), {"kernel": ["0", "a"]})
    postmortem_save(ticket=incident, actor=tech, data={"window_hours": 24})
    assert [c.record_id for c in postmortem_report(incident, tech).changes] == [near.pk]


def test_incident_close_is_refused_without_a_complete_postmortem(wf, incident, tech, lead):
    ticket = take(wf, incident, "resolve", lead, resolution="reseated the cable")
    with pytest.raises(GuardError, match="missing a postmortem"):
        take(wf, ticket, "close", tech)
    postmortem_save(ticket=ticket, actor=tech, data={"summary": "A loose AOC"})
    with pytest.raises(GuardError, match="root cause category"):
        take(wf, ticket, "close", tech)
    postmortem_save(ticket=ticket, actor=tech, data={"root_cause": "cabling"})
    assert take(wf, ticket, "close", tech).state == "closed"


def test_the_api_names_what_is_missing_and_saves_the_postmortem(wf, incident, tech, lead):
    take(wf, incident, "resolve", lead, resolution="fixed")
    client = Client()
    client.force_login(tech)
    refused = client.post(
        f"/api/workflows/tickets/{incident.pk}/transitions/close/", {"inputs": {}}, content_type="application/json"
    )
    assert refused.status_code == 400
    assert "missing a postmortem" in str(refused.json())
    bad = client.patch(
        f"/api/workflows/tickets/{incident.pk}/postmortem/",
        {"root_cause": "gremlins", "window_hours": 0},
        content_type="application/json",
    )
    assert bad.status_code == 400 and set(bad.json()["error"]["fields"]) >= {"root_cause", "window_hours"}
    ok = client.patch(
        f"/api/workflows/tickets/{incident.pk}/postmortem/",
        {"summary": "flapping port", "root_cause": "fabric", "impact_tenants": 3},
        content_type="application/json",
    )
    assert ok.status_code == 200, ok.content
    body = ok.json()
    assert body["root_cause"] == "fabric" and body["missing"] == []
    assert body["impact"]["tenants"] == {"value": 3, "derived": 0, "override": True}
    closed = client.post(
        f"/api/workflows/tickets/{incident.pk}/transitions/close/", {"inputs": {}}, content_type="application/json"
    )
    assert closed.status_code == 200 and closed.json()["state"] == "closed"
    assert (
        client.patch(
            f"/api/workflows/tickets/{incident.pk}/postmortem/", {"summary": "x"}, content_type="application/json"
        ).status_code
        == 409
    )
    md = client.get(f"/api/workflows/tickets/{incident.pk}/postmortem/markdown/")
    assert md.status_code == 200 and md["Content-Type"].startswith("text/markdown")
    assert b"## What changed" in md.content and b"flapping port" in md.content


def test_impact_is_derived_from_the_linked_objects_and_times(wf, fleet, tech, lead):
    tenant = TenantFactory(slug="acme")
    rack = RackFactory(room=RoomFactory(site=fleet.site))
    second = NodeFactory(hostname="sh9-h100-0002", site=fleet.site, cluster=fleet.cluster, tenant=tenant, rack=rack)
    for i in range(4):
        AcceleratorFactory(node=second, slot_index=i, model=fleet.model)
    ticket = ticket_create(
        type_="incident",
        title="two nodes",
        requester=tech,
        inputs={"node": fleet.node.hostname},
        links=[("related", second)],
    )
    start = timezone.now() - dt.timedelta(minutes=90)
    Ticket.objects.filter(pk=ticket.pk).update(created_at=start)
    ticket.refresh_from_db()
    take(wf, ticket, "resolve", lead, resolution="ok")
    impact = {f.label: f.value for f in postmortem_report(ticket, lead).impact}
    assert impact["nodes"] == 2 and impact["cards"] == 12 and impact["tenants"] == 1
    assert 89 <= impact["minutes"] <= 91


def test_timeline_merges_ticket_health_and_status_events(incident, fleet, lead):
    start = incident.created_at
    m.HealthEvent.objects.create(
        node=fleet.node,
        accelerator=fleet.failed,
        kind="xid",
        code="79",
        severity="critical",
        dedup_key="x79",
        first_seen_at=start - dt.timedelta(minutes=10),
        last_seen_at=start,
    )
    _record(fleet.failed, start - dt.timedelta(minutes=9), {"health": ["ok", "failed"]}, source="agent")
    texts = [(line.source, line.text) for line in postmortem_report(incident, lead).timeline]
    assert texts[0] == ("health", f"critical xid 79 on {fleet.failed} in {fleet.node} (x1)")
    assert texts[1][0] == "change" and "health ok → failed" in texts[1][1]
    assert any(source == "ticket" for source, _ in texts)


def test_action_items_are_follow_up_tickets(incident, fleet, tech):
    follow_up = postmortem_action_add(ticket=incident, actor=tech, title="Replace AOCs on leaf 3", priority="high")
    assert follow_up.type == "incident" and follow_up.requester == tech and follow_up.priority == "high"
    assert follow_up.links.filter(node=fleet.node, role="related").exists()
    report = postmortem_report(incident, tech)
    assert [t.pk for t in report.actions] == [follow_up.pk]
    assert f"{follow_up.reference} Replace AOCs on leaf 3" in postmortem_markdown(report)


def test_only_people_who_may_work_the_incident_write_its_postmortem(incident, outsider):
    from workflows.engine import ForbiddenError

    with pytest.raises(ForbiddenError):
        postmortem_save(ticket=incident, actor=outsider, data={"summary": "x"})
    assert not Postmortem.objects.exists()


def test_the_ticket_page_shows_the_postmortem_and_its_download(incident, tech):
    client = Client()
    client.force_login(tech)
    page = client.get(f"/tickets/{incident.pk}/")
    assert page.status_code == 200
    assert b'id="postmortem"' in page.content and b"Closing needs" in page.content
    saved = client.post(f"/tickets/{incident.pk}/postmortem/", {"summary": "s", "root_cause": "power"})
    assert saved.status_code == 302
    assert Postmortem.objects.get(ticket=incident).root_cause.slug == "power"
    md = client.get(f"/tickets/{incident.pk}/postmortem.md")
    assert md.status_code == 200 and b"Power (power)" in md.content
