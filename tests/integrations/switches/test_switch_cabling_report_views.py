"""Cabling report API and pages against the demo fleet plus `switches_demo_observe` (a crossed pair on
sh1-h100-0003 mlx5_2/mlx5_5, and the cable of sh1-h100-0010 mlx5_6 moved to spare port p30)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from cmdb.models import Fabric, Link, Switch
from integrations.switches.cabling import FindingKind
from integrations.switches.cabling_service import fabric_cabling_report
from integrations.switches.models import ObservedLink, PollRun

FABRIC = "sh1-ib-compute"
LEAF = f"{FABRIC}-su001-leaf"
NODES, RAILS = 24, 8

pytestmark = pytest.mark.django_db


@pytest.fixture
def fabric(db) -> Fabric:
    from cmdb.services.demo import demo_load

    demo_load(scale="small", only="sh1-h100")
    call_command("switches_demo_observe", "--fabric", FABRIC, stdout=StringIO())
    return Fabric.objects.get(name=FABRIC)


@pytest.fixture
def user(db):
    return get_user_model().objects.create_superuser("ops", "ops@example.com", "pw")


@pytest.fixture
def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _planned_port(host: str, hca: str) -> tuple[str, str]:
    link = Link.objects.select_related("b_switch_port__switch").get(
        a_nic_port__nic__node__hostname=host, a_nic_port__nic__name=hca
    )
    return link.b_switch_port.switch.name, link.b_switch_port.name


def _problems(findings) -> set[tuple[str, str, str]]:
    return {(f.kind.value, f.switch, f.port) for f in findings if f.is_problem}


def test_demo_observe_injects_exactly_the_faults(fabric):
    findings = fabric_cabling_report(fabric)
    swap_a, swap_b = _planned_port("sh1-h100-0003", "mlx5_2"), _planned_port("sh1-h100-0003", "mlx5_5")
    moved = _planned_port("sh1-h100-0010", "mlx5_6")
    assert swap_a == (f"{LEAF}2", "p3") and moved == (f"{LEAF}6", "p10")
    assert _problems(findings) == {
        ("miswired", *swap_a),
        ("miswired", *swap_b),
        ("missing", *moved),
        ("unexpected", f"{LEAF}6", "p30"),
    }
    by_port = {(f.switch, f.port): f for f in findings}
    a, b = by_port[swap_a], by_port[swap_b]
    assert (str(a.swap_partner), str(b.swap_partner)) == (":".join(swap_b), ":".join(swap_a))
    assert a.rail_violation and b.rail_violation and "mlx5_5" in a.rail_violation
    assert str(by_port[(f"{LEAF}6", "p30")].found) == "sh1-h100-0010:mlx5_6/1"
    assert sum(f.kind == FindingKind.OK for f in findings) == NODES * RAILS - 3
    assert PollRun.objects.filter(switch__fabric=fabric).count() == RAILS


def test_demo_observe_leaves_link_statuses_agreeing_with_the_report(fabric):
    """The stored verdict (the dashboard's cabling faults, /links/?status=mismatch) says what the pages say."""

    mismatched = {
        (link.b_switch_port.switch.name, link.b_switch_port.name)
        for link in Link.objects.filter(fabric=fabric, status="mismatch").select_related("b_switch_port__switch")
    }
    planned_problems = {(switch, port) for kind, switch, port in _problems(fabric_cabling_report(fabric))}
    planned_problems.discard((f"{LEAF}6", "p30"))  # a spare port seeing a cable: no planned link to mark
    assert mismatched == planned_problems and len(mismatched) == 3


def test_demo_observe_is_idempotent(fabric):
    before = ObservedLink.objects.filter(switch__fabric=fabric).count()
    call_command("switches_demo_observe", stdout=StringIO())
    assert ObservedLink.objects.filter(switch__fabric=fabric).count() == before == NODES * RAILS
    assert PollRun.objects.filter(switch__fabric=fabric).count() == RAILS
    assert len(_problems(fabric_cabling_report(fabric))) == 4


def test_api_summary_and_findings(fabric, api):
    url = f"/api/integrations/switches/fabrics/{fabric.pk}/cabling/"
    body = api.get(url).json()
    assert body["summary"] == {
        "ok": NODES * RAILS - 3,
        "missing": 1,
        "miswired": 2,
        "unexpected": 1,
        "unknown_neighbor": 0,
        "rail_violations": 2,
        "problems": 4,
    }
    assert body["count"] == len(body["findings"]) == NODES * RAILS + 1

    miswired = api.get(url, {"kind": "miswired"}).json()
    assert miswired["count"] == 2
    first = miswired["findings"][0]
    assert first == {
        "kind": "miswired",
        "switch": f"{LEAF}2",
        "port": "p3",
        "expected": "sh1-h100-0003:mlx5_2/1",
        "found": "sh1-h100-0003:mlx5_5/1",
        "swap_partner": f"{LEAF}5:p3",
        "rail_violation": first["rail_violation"],
        "conflict": None,
        "elsewhere": None,
        "message": first["message"],
    }
    assert "rail violation" in first["rail_violation"] and "crossed with" in first["message"]

    problems = api.get(url, {"kind": "problems"}).json()["findings"]
    assert {(f["kind"], f["switch"], f["port"]) for f in problems} == {
        ("miswired", f"{LEAF}2", "p3"),
        ("miswired", f"{LEAF}5", "p3"),
        ("missing", f"{LEAF}6", "p10"),
        ("unexpected", f"{LEAF}6", "p30"),
    }
    by_switch = api.get(url, {"kind": "problems", "switch": "leaf6"}).json()["findings"]
    assert {f["kind"] for f in by_switch} == {"missing", "unexpected"}
    by_node = api.get(url, {"node": "sh1-h100-0003"}).json()["findings"]
    assert len(by_node) == RAILS and {f["kind"] for f in by_node} == {"ok", "miswired"}
    assert api.get(url, {"kind": "bogus"}).status_code == 400
    assert api.get("/api/integrations/switches/fabrics/999999/cabling/").status_code == 404


def test_api_requires_login(fabric):
    response = APIClient().get(f"/api/integrations/switches/fabrics/{fabric.pk}/cabling/")
    assert response.status_code in (401, 403)
    assert APIClient().post(f"/api/integrations/switches/fabrics/{fabric.pk}/cabling/tickets/").status_code in (
        401,
        403,
    )


def test_api_tickets_one_per_fault_idempotent(fabric, api, django_capture_on_commit_callbacks):
    from workflows.models import Ticket

    url = f"/api/integrations/switches/fabrics/{fabric.pk}/cabling/tickets/"
    with django_capture_on_commit_callbacks():
        first = api.post(url)
    assert first.status_code == 201
    # The crossed pair is ONE fault, and the cable in the spare port (missing p10 + unexpected p30) another.
    assert sorted((t["kind"], tuple(t["ports"])) for t in first.json()["created"]) == [
        ("crossed", (f"{LEAF}2:p3", f"{LEAF}5:p3")),
        ("moved", (f"{LEAF}6:p10", f"{LEAF}6:p30")),
    ]
    tickets = Ticket.objects.filter(type="cabling")
    assert tickets.count() == 2 and not Ticket.objects.filter(type="incident").exists()
    crossed = tickets.get(data__ports=[f"{LEAF}2:p3", f"{LEAF}5:p3"])
    assert crossed.title == f"Crossed cables on {LEAF}2:p3 and {LEAF}5:p3" and crossed.state == "open"
    assert f"Swap the cables on {LEAF}2:p3 and {LEAF}5:p3." in crossed.description
    assert "sh1-h100-0003:mlx5_2/1" in crossed.description and "sh1-h100-0003:mlx5_5/1" in crossed.description
    linked = {link.object_repr for link in crossed.links.all()}
    assert {f"{LEAF}2", f"{LEAF}5", "sh1-h100-0003"} <= linked
    assert sum(" <-> " in r for r in linked) == 2  # both planned cables
    assert crossed.site is not None and crossed.priority == "high"
    moved = tickets.get(data__ports=[f"{LEAF}6:p10", f"{LEAF}6:p30"])
    assert f"Move the cable of sh1-h100-0010:mlx5_6/1 from {LEAF}6:p30" in moved.description

    again = api.post(url)
    assert again.status_code == 200
    assert again.json()["created"] == [] and {t["ticket"] for t in again.json()["existing"]} == {
        crossed.reference,
        moved.reference,
    }
    assert tickets.count() == 2


def test_api_tickets_follow_the_report_filters_and_need_the_permission(fabric, api, django_capture_on_commit_callbacks):
    from workflows.models import Ticket

    url = f"/api/integrations/switches/fabrics/{fabric.pk}/cabling/tickets/"
    with django_capture_on_commit_callbacks():
        body = api.post(f"{url}?switch=leaf6").json()
    assert [t["kind"] for t in body["created"]] == ["moved"]
    assert api.post(url, {"kind": "bogus"}).status_code == 400

    outsider = APIClient()
    outsider.force_authenticate(get_user_model().objects.create_user("nobody", "n@example.com", "pw"))
    assert outsider.post(url).status_code == 404  # no grant on the fabric's site: not even its existence
    assert Ticket.objects.filter(type="cabling").count() == 1


def test_cabling_page_button_opens_tickets(fabric, client, user, django_capture_on_commit_callbacks):
    from workflows.models import Ticket

    client.force_login(user)
    page = client.get(f"/fabrics/{fabric.pk}/cabling/", {"kind": "miswired"})
    html = page.content.decode()
    assert page.context["fault_count"] == 1 and "Open repair tickets (1 fault)" in html
    assert f'action="/fabrics/{fabric.pk}/cabling/tickets/"' in html and "csrfmiddlewaretoken" in html
    with django_capture_on_commit_callbacks():
        response = client.post(f"/fabrics/{fabric.pk}/cabling/tickets/", {"kind": "miswired"}, follow=True)
    ticket = Ticket.objects.get(type="cabling")
    assert response.redirect_chain[-1][0] == f"/fabrics/{fabric.pk}/cabling/?kind=miswired"
    assert f"Opened 1 cabling ticket(s): {ticket.reference}." in response.content.decode()
    html = response.content.decode()
    assert html.count(f'<a href="/tickets/{ticket.pk}/" title="{ticket.title}">{ticket.reference}</a>') == 2
    response = client.post(f"/fabrics/{fabric.pk}/cabling/tickets/", {"kind": "miswired"}, follow=True)
    assert f"Already open for the other fault(s): {ticket.reference}." in response.content.decode()
    assert client.get(f"/fabrics/{fabric.pk}/cabling/tickets/").status_code == 405


def test_cabling_page_button_only_for_who_may_open_tickets(fabric, client):
    from cmdb.permissions import grant_scope

    viewer = get_user_model().objects.create_user("viewer", "v@example.com", "pw")
    grant_scope(scope_obj=fabric.site, perms=["view_scope"], users=[viewer])
    client.force_login(viewer)
    page = client.get(f"/fabrics/{fabric.pk}/cabling/")
    assert page.status_code == 200 and "Open repair tickets" not in page.content.decode()
    assert client.post(f"/fabrics/{fabric.pk}/cabling/tickets/").status_code == 403


def test_cabling_report_command_opens_tickets(fabric, django_capture_on_commit_callbacks):
    from workflows.models import Ticket

    out = StringIO()
    with django_capture_on_commit_callbacks():
        call_command("cabling_report", FABRIC, "--problems-only", "--open-tickets", stdout=out)
    tickets = Ticket.objects.filter(type="cabling", requester__isnull=True)
    assert tickets.count() == 2
    assert {f"{t.reference} opened: {t.title}" for t in tickets} <= set(out.getvalue().splitlines())
    out = StringIO()
    call_command("cabling_report", FABRIC, "--json", "--open-tickets", stdout=out)
    data = json.loads(out.getvalue())
    assert {t["ticket"] for t in data["tickets"]} == {t.reference for t in tickets}
    assert not any(t["created"] for t in data["tickets"]) and tickets.count() == 2


def test_schema_documents_the_report(api):
    schema = api.get("/api/schema/", {"format": "json"}).json()
    assert "/api/integrations/switches/fabrics/{id}/cabling/" in schema["paths"]
    assert "CablingReport" in schema["components"]["schemas"]


def test_fabric_list_page(fabric, client, user):
    client.force_login(user)
    response = client.get("/fabrics/")
    assert response.status_code == 200
    html = response.content.decode()
    assert FABRIC in html and f"/fabrics/{fabric.pk}/cabling/" in html


def test_cabling_page_shows_exactly_the_faults(fabric, client, user):
    client.force_login(user)
    url = f"/fabrics/{fabric.pk}/cabling/"
    response = client.get(url, {"kind": "problems"})
    assert response.status_code == 200
    rows = response.context["rows"]
    assert {(r["f"].kind.value, r["f"].switch, r["f"].port) for r in rows} == {
        ("miswired", f"{LEAF}2", "p3"),
        ("miswired", f"{LEAF}5", "p3"),
        ("missing", f"{LEAF}6", "p10"),
        ("unexpected", f"{LEAF}6", "p30"),
    }
    html = response.content.decode()
    assert html.count('class="finding kind-') == 4 and "rail violation" in html and f"{LEAF}5:p3" in html

    assert len(client.get(url, {"kind": "miswired"}).context["rows"]) == 2
    assert [r["f"].port for r in client.get(url, {"kind": "problems", "switch": "leaf6"}).context["rows"]] == [
        "p10",
        "p30",
    ]
    assert len(client.get(url, {"node": "sh1-h100-0010"}).context["rows"]) == RAILS + 1  # 7 ok, missing, moved
    assert len(client.get(url).context["rows"]) == NODES * RAILS + 1


@pytest.mark.parametrize("path", ["/fabrics/", "/fabrics/{pk}/cabling/"])
def test_pages_require_login(fabric, client, path):
    response = client.get(path.format(pk=fabric.pk))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_refused_fault_is_skipped_with_its_reason_and_the_others_still_get_tickets(
    fabric, api, client, user, monkeypatch, django_capture_on_commit_callbacks
):
    """The crossed pair's leaf is renamed between the report and the tickets: its fault is refused (no such
    switch) and listed as skipped; the moved cable, sorted after it, still gets its ticket."""
    from integrations.switches import cabling_tickets
    from workflows.models import Ticket, TicketLink

    stale = fabric_cabling_report(fabric)
    monkeypatch.setattr(cabling_tickets, "fabric_cabling_report", lambda fabric: stale)
    Switch.objects.filter(name=f"{LEAF}2").update(name=f"{LEAF}2-renamed")
    links = TicketLink.objects.count()

    with django_capture_on_commit_callbacks():
        response = api.post(f"/api/integrations/switches/fabrics/{fabric.pk}/cabling/tickets/")
    assert response.status_code == 201
    body = response.json()
    moved = Ticket.objects.get(type="cabling")
    assert [t["ticket"] for t in body["created"]] == [moved.reference] and body["existing"] == []
    assert body["skipped"] == [
        {
            "kind": "crossed",
            "ports": [f"{LEAF}2:p3", f"{LEAF}5:p3"],
            "title": f"Crossed cables on {LEAF}2:p3 and {LEAF}5:p3",
            "reason": f"No switch named {LEAF}2.",
        }
    ]
    assert TicketLink.objects.count() == links + moved.links.count()  # nothing of the refused one was kept

    client.force_login(user)
    page = client.post(f"/fabrics/{fabric.pk}/cabling/tickets/", follow=True).content.decode()
    assert f"Already open for the other fault(s): {moved.reference}." in page
    assert f"No ticket for 1 fault(s): Crossed cables on {LEAF}2:p3 and {LEAF}5:p3: No switch named {LEAF}2." in page

    from integrations.switches.management.commands import cabling_report as command

    monkeypatch.setattr(command, "fabric_cabling_report", lambda *args, **kwargs: stale)
    out = StringIO()
    call_command("cabling_report", FABRIC, "--problems-only", "--open-tickets", stdout=out)
    assert (
        f"- skipped: Crossed cables on {LEAF}2:p3 and {LEAF}5:p3 (No switch named {LEAF}2.)"
        in out.getvalue().splitlines()
    )
    out = StringIO()
    call_command("cabling_report", FABRIC, "--json", "--open-tickets", stdout=out)
    skipped = [t for t in json.loads(out.getvalue())["tickets"] if t["skipped"]]
    assert [(t["ticket"], t["created"], t["skipped"]) for t in skipped] == [(None, False, f"No switch named {LEAF}2.")]


def test_a_double_click_gets_the_twin_not_an_error(fabric, api, monkeypatch, django_capture_on_commit_callbacks):
    """Two requests race: the second passes every dedup check before the first commits, and its INSERT hits the
    unique index on open dedup keys. Simulated by blinding the second request's checks to the first's ticket."""
    from workflows.definitions import cabling as cabling_wf
    from workflows.models import Ticket, TicketLink, TimelineEntry

    url = f"/api/integrations/switches/fabrics/{fabric.pk}/cabling/tickets/"
    with django_capture_on_commit_callbacks():
        (twin,) = api.post(url, {"kind": "miswired"}).json()["created"]
    counts = (Ticket.objects.count(), TicketLink.objects.count(), TimelineEntry.objects.count())

    monkeypatch.setattr(cabling_wf, "open_tickets_by_port", lambda: {})  # read before the twin committed
    real_filter, blinded = Ticket.objects.filter, []

    def dedup_check_before_the_twin_committed(*args, **kwargs):
        if "dedup_key" in kwargs and not blinded:
            blinded.append(kwargs["dedup_key"])
            return real_filter(*args, **kwargs).none()
        return real_filter(*args, **kwargs)

    monkeypatch.setattr(Ticket.objects, "filter", dedup_check_before_the_twin_committed)
    with django_capture_on_commit_callbacks():
        response = api.post(url, {"kind": "miswired"})
    assert blinded, "the engine's dedup check was not the one blinded"
    assert response.status_code == 200
    assert response.json() == {"created": [], "existing": [twin], "skipped": []}
    assert (Ticket.objects.count(), TicketLink.objects.count(), TimelineEntry.objects.count()) == counts


@pytest.fixture
def site_b_tech(db, fabric):
    """A dc-technicians member with add_ticket and a change grant on another site only."""
    from cmdb.models import Site
    from cmdb.permissions import grant_scope
    from workflows.services.bootstrap import groups_bootstrap

    tech = get_user_model().objects.create_user("tech-elsewhere", "t@example.com", "pw")
    tech.groups.add(groups_bootstrap()["dc-technicians"])
    grant_scope(scope_obj=Site.objects.create(code="elsewhere", name="Elsewhere"), perms=["change_scope"], users=[tech])
    return tech


def test_cabling_report_and_pages_are_scoped_to_the_fabrics_site(fabric, client, site_b_tech):
    api = APIClient()
    api.force_authenticate(site_b_tech)
    assert api.get(f"/api/integrations/switches/fabrics/{fabric.pk}/cabling/").status_code == 404
    client.force_login(site_b_tech)
    assert client.get(f"/fabrics/{fabric.pk}/cabling/").status_code == 404
    listing = client.get("/fabrics/")
    assert listing.status_code == 200 and FABRIC not in listing.content.decode()


def test_cabling_tickets_action_needs_change_rights_on_the_fabric(fabric, client, site_b_tech):
    from cmdb.permissions import grant_scope
    from workflows.models import Ticket

    api = APIClient()
    api.force_authenticate(site_b_tech)
    url = f"/api/integrations/switches/fabrics/{fabric.pk}/cabling/tickets/"
    assert api.post(url).status_code == 404
    grant_scope(scope_obj=fabric.site, perms=["view_scope"], users=[site_b_tech])  # sees it, may not change it
    assert api.get(f"/api/integrations/switches/fabrics/{fabric.pk}/cabling/").status_code == 200
    assert api.post(url).status_code == 403
    client.force_login(site_b_tech)
    assert client.post(f"/fabrics/{fabric.pk}/cabling/tickets/").status_code == 403
    assert not Ticket.objects.filter(type="cabling").exists()


def test_findings_naming_devices_the_user_cannot_see_are_left_out(fabric, site_b_tech):
    from cmdb.models import Node
    from cmdb.permissions import grant_scope
    from integrations.switches.cabling_service import fabric_cabling_report, findings_visible

    grant_scope(scope_obj=fabric.site, perms=["view_scope"], users=[site_b_tech])
    findings = fabric_cabling_report(fabric)
    assert len(findings_visible(findings, site_b_tech)) == len(findings)
    # One of the fabric's nodes moves to a site the user cannot see: its findings go from their report.
    from cmdb.models import Site

    hidden_site = Site.objects.create(code="hidden", name="Hidden")
    node = Node.objects.filter(nics__ports__link__fabric=fabric).order_by("hostname").first()
    Node.objects.filter(pk=node.pk).update(site=hidden_site, rack=None, position=None)
    shown = findings_visible(findings, site_b_tech)
    assert len(shown) < len(findings)
    assert all(node.hostname not in {f.switch, *(e.device for e in (f.expected, f.found) if e)} for f in shown)
