"""Change governance: change tickets start only inside maintenance windows (the refusal names the next one),
freezes block even inside a window, an emergency approval lifts both; sites without windows are not restricted;
change types without an approval carry default plans."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone

from cmdb.models import MaintenanceWindow
from cmdb.services.windows import change_window_refusals
from workflows.engine import ForbiddenError, GuardError, ticket_create, transition_apply
from workflows.models import Ticket
from workflows.services.governance import emergency_approval_record

pytestmark = pytest.mark.django_db


def _weekly(site, weekday: int, start: str, end: str, tz: str = "Asia/Shanghai", **kw) -> MaintenanceWindow:
    return MaintenanceWindow.objects.create(
        site=site,
        kind="weekly",
        weekday=weekday,
        start_time=dt.time.fromisoformat(start),
        end_time=dt.time.fromisoformat(end),
        timezone=tz,
        **kw,
    )


def _period(site, kind: str, start: dt.datetime, end: dt.datetime, **kw) -> MaintenanceWindow:
    return MaintenanceWindow.objects.create(site=site, kind=kind, starts_at=start, ends_at=end, **kw)


def test_outside_the_window_the_refusal_names_the_next_window(fleet):
    _weekly(fleet.site, 1, "02:00", "06:00")  # Tuesdays 02:00-06:00 Shanghai
    thursday = dt.datetime(2026, 12, 3, 10, 0, tzinfo=dt.UTC)
    [refusal] = change_window_refusals(site_ids=[fleet.site.pk], cluster_ids=[], at=thursday)
    assert refusal.message == (
        "outside the maintenance window for site sh9; next window Tue 2026-12-08 02:00-06:00 +08:00"
    )
    inside = dt.datetime(2026, 12, 7, 19, 30, tzinfo=dt.UTC)  # Tue 03:30 in Shanghai
    assert change_window_refusals(site_ids=[fleet.site.pk], cluster_ids=[], at=inside) == []
    just_closed = dt.datetime(2026, 12, 7, 22, 0, tzinfo=dt.UTC)  # Tue 06:00 in Shanghai: closed
    assert change_window_refusals(site_ids=[fleet.site.pk], cluster_ids=[], at=just_closed)


def test_a_window_past_midnight_and_a_cluster_window(fleet):
    _weekly(fleet.site, 5, "22:00", "04:00", tz="UTC", cluster=fleet.cluster)  # Sat 22:00 - Sun 04:00
    sunday_early = dt.datetime(2026, 12, 6, 3, 0, tzinfo=dt.UTC)
    assert change_window_refusals(site_ids=[], cluster_ids=[fleet.cluster.pk], at=sunday_early) == []
    [refusal] = change_window_refusals(
        site_ids=[], cluster_ids=[fleet.cluster.pk], at=sunday_early + dt.timedelta(hours=2)
    )
    assert refusal.scope == "cluster sh9-train" and "Sat 2026-12-12 22:00-2026-12-13 04:00 +00:00" in refusal.message
    # The window is the cluster's: the rest of the site is not restricted.
    assert change_window_refusals(site_ids=[fleet.site.pk], cluster_ids=[], at=sunday_early) == []


def test_a_freeze_blocks_even_inside_a_window_and_the_next_window_is_after_it(fleet):
    _weekly(fleet.site, 1, "02:00", "06:00")
    _period(
        fleet.site,
        "freeze",
        dt.datetime(2026, 12, 7, 0, 0, tzinfo=dt.UTC),
        dt.datetime(2026, 12, 10, 0, 0, tzinfo=dt.UTC),
        name="Year-end",
    )
    inside = dt.datetime(2026, 12, 7, 19, 30, tzinfo=dt.UTC)
    [refusal] = change_window_refusals(site_ids=[fleet.site.pk], cluster_ids=[], at=inside)
    assert refusal.message.startswith("change freeze 'Year-end' until 2026-12-10 00:00 UTC for site sh9")
    assert refusal.message.endswith("next window Tue 2026-12-15 02:00-06:00 +08:00")


@pytest.fixture
def decommission(fleet, lead):
    ticket = ticket_create(
        type_="decommission",
        title="retire node 1",
        requester=lead,
        inputs={"node": fleet.node.hostname},
        change_plan="drain, remove, wipe",
        rollback_plan="put it back in the cluster",
    )
    Ticket.objects.filter(pk=ticket.pk).update(state="awaiting_approval")
    ticket.refresh_from_db()
    return ticket


def test_sites_without_windows_are_not_restricted(decommission, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        result = transition_apply(ticket=decommission, name="approve", system=True)
    assert result.ticket.state == "draining"


def test_the_engine_refuses_a_change_outside_its_window(fleet, decommission, django_capture_on_commit_callbacks):
    now = timezone.now()
    other_day = (now.astimezone(dt.UTC).weekday() + 3) % 7
    _weekly(fleet.site, other_day, "02:00", "03:00", tz="UTC")
    with pytest.raises(GuardError, match=r"Outside the maintenance window for site sh9; next window \w{3} \d{4}-"):
        transition_apply(ticket=decommission, name="approve", system=True)
    decommission.refresh_from_db()
    assert decommission.state == "awaiting_approval"


def test_the_engine_allows_a_change_inside_its_window(fleet, decommission, django_capture_on_commit_callbacks):
    now = timezone.now()
    _period(fleet.site, "one_off", now - dt.timedelta(hours=1), now + dt.timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=False):
        assert transition_apply(ticket=decommission, name="approve", system=True).ticket.state == "draining"


def test_a_freeze_refuses_a_change_inside_its_window(fleet, decommission):
    now = timezone.now()
    _period(fleet.site, "one_off", now - dt.timedelta(hours=1), now + dt.timedelta(hours=1))
    _period(fleet.site, "freeze", now - dt.timedelta(minutes=5), now + dt.timedelta(days=2), name="launch")
    with pytest.raises(GuardError, match="Change freeze 'launch'"):
        transition_apply(ticket=decommission, name="approve", system=True)


def test_an_emergency_approval_lets_the_change_start(
    fleet, decommission, lead, approvers, django_capture_on_commit_callbacks
):
    now = timezone.now()
    _period(fleet.site, "freeze", now - dt.timedelta(minutes=5), now + dt.timedelta(days=2), name="launch")
    with pytest.raises(ForbiddenError, match="own emergency"):
        emergency_approval_record(ticket=decommission, actor=lead, reason="x")
    with pytest.raises(GuardError, match="cannot wait"):
        emergency_approval_record(ticket=decommission, actor=approvers[0], reason=" ")
    emergency_approval_record(ticket=decommission, actor=approvers[0], reason="PDU on fire")
    with django_capture_on_commit_callbacks(execute=False):
        assert transition_apply(ticket=decommission, name="approve", system=True).ticket.state == "draining"
    assert decommission.timeline.filter(message__contains="emergency change").exists()


def test_the_api_refuses_with_the_next_window_and_records_emergencies(fleet, decommission, approvers, tech):
    now = timezone.now()
    other_day = (now.astimezone(dt.UTC).weekday() + 2) % 7
    _weekly(fleet.site, other_day, "02:00", "03:00", tz="UTC")
    client = Client()
    client.force_login(approvers[0])
    client.post(
        f"/api/workflows/tickets/{decommission.pk}/approve/", {"decision": "approved"}, content_type="application/json"
    )
    client.force_login(approvers[1])
    refused = client.post(
        f"/api/workflows/tickets/{decommission.pk}/approve/", {"decision": "approved"}, content_type="application/json"
    )
    assert refused.status_code == 400 and "next window" in str(refused.json())
    client.force_login(tech)
    assert (
        client.post(
            f"/api/workflows/tickets/{decommission.pk}/emergency-approval/",
            {"reason": "x"},
            content_type="application/json",
        ).status_code
        == 403
    )
    client.force_login(approvers[2])
    ok = client.post(
        f"/api/workflows/tickets/{decommission.pk}/emergency-approval/",
        {"reason": "security patch"},
        content_type="application/json",
    )
    assert ok.status_code == 200 and ok.json()["data"]["emergency_approval"]["by"] == approvers[2].username


def test_change_types_without_approval_get_default_plans_and_need_them_to_start(fleet, lead):
    from workflows.engine import change_plan_errors
    from workflows.registry import workflow

    wf = workflow("cabling")
    t = wf.transition("start_live")
    ticket = Ticket(type="cabling", change_plan="", rollback_plan="x", data={})
    assert change_plan_errors(ticket, wf, t) == ["Write the change plan before submitting."]
    plan, rollback = wf.default_plans(Ticket(type="cabling", data={"ports": ["leaf1:1"], "fabric": "ib0"}))
    assert "leaf1:1" in plan and "leaf1:1" in rollback
    assert workflow("provisioning").is_change and "start" in workflow("provisioning").window_transitions


def test_the_change_ticket_page_shows_the_refusal_and_the_next_windows(fleet, decommission, lead):
    now = timezone.now()
    other_day = (now.astimezone(dt.UTC).weekday() + 3) % 7
    _weekly(fleet.site, other_day, "02:00", "03:00", tz="UTC")
    client = Client()
    client.force_login(lead)
    page = client.get(f"/tickets/{decommission.pk}/")
    assert page.status_code == 200
    assert b'id="governance"' in page.content and b"Outside the maintenance window for site sh9" in page.content
