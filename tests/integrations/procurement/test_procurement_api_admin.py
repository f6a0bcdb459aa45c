"""The procurement REST API (requests, votes, discrepancies, events) and the admin pages."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from integrations.procurement.inbound import event_record, event_run
from integrations.procurement.models import Discrepancy, EventStatus, InboundEvent, RequestState
from integrations.procurement.services.events import procurement_event_handle
from tests.factories.cmdb import ServerModelFactory, UserFactory
from tests.integrations.procurement.procurement_helpers import event_body

pytestmark = pytest.mark.django_db
BASE = "/api/integrations/procurement"


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def grant(user, *codenames: str) -> None:
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    for cache in ("_perm_cache", "_user_perm_cache", "_group_perm_cache"):
        user.__dict__.pop(cache, None)  # Django caches permissions on the user object


def test_create_submit_vote_and_read_back(site, approvers, django_capture_on_commit_callbacks):
    requester = approvers["requester"]
    grant(requester, "add_procurementrequest")
    server_model = ServerModelFactory()
    body = {
        "title": "sh1 expansion",
        "justification": "Q3 capacity",
        "budget_code": "CAPEX-26",
        "submit": True,
        "lines": [
            {"kind": "server", "model": server_model.name, "quantity": 4, "site": "sh1", "unit_price": "12000"},
            {
                "kind": "accelerator",
                "model": str(server_model.accelerator_model_id),
                "quantity": 8,
                "site": str(site.pk),
            },
        ],
    }
    created = api(requester).post(f"{BASE}/requests/", body, format="json")
    assert created.status_code == 201, created.content
    data = created.json()
    assert (data["state"], data["total_amount"], data["requested_by"]) == ("submitted", "48000.00", "req")
    assert [lv["rule"] for lv in data["approval_progress"]] == ["ops lead"]
    assert api(requester).post(f"{BASE}/requests/{data['id']}/approve/", {}, format="json").status_code == 400
    with django_capture_on_commit_callbacks(execute=True):
        voted = api(approvers["lead"]).post(f"{BASE}/requests/{data['id']}/approve/", {"comment": "go"}, format="json")
    assert voted.status_code == 200
    read = api(requester).get(f"{BASE}/requests/{data['id']}/").json()
    assert (read["state"], read["po_number"]) == ("ordered", "PO-1001")
    assert read["approvals"][0]["approver_repr"] == "lead"
    assert [line["po_line_ref"] for line in read["lines"]] == ["PO-1001-1", "PO-1001-2"]


def test_bad_lines_name_the_field(site, approvers):
    grant(approvers["requester"], "add_procurementrequest")
    response = api(approvers["requester"]).post(
        f"{BASE}/requests/",
        {
            "title": "t",
            "justification": "j",
            "budget_code": "b",
            "lines": [{"kind": "server", "model": "no-such-model", "quantity": 1, "site": "sh1"}],
        },
        format="json",
    )
    assert response.status_code == 400 and "model" in str(response.json())
    assert api(UserFactory(username="nobody")).post(f"{BASE}/requests/", {}, format="json").status_code == 403


def test_requesters_see_their_own_requests_and_approvers_all(approved_request, approvers):
    other = UserFactory(username="other")
    assert api(other).get(f"{BASE}/requests/").json()["count"] == 0
    assert api(approvers["requester"]).get(f"{BASE}/requests/").json()["count"] == 1
    assert api(approvers["cfo"]).get(f"{BASE}/requests/").json()["count"] == 1
    grant(other, "view_procurementrequest")
    assert api(other).get(f"{BASE}/requests/?state=ordered").json()["count"] == 1


def test_resolving_the_last_discrepancy_closes_an_invoiced_request(approved_request, approvers):
    line = next(ln for ln in approved_request.lines.all() if ln.accelerator_model_id)
    for event_type, data in [
        (
            "shipment.dispatched",
            {
                "po_number": approved_request.po_number,
                "shipment_id": "S1",
                "lines": [{"line_ref": line.line_ref, "serials": ["G1", "G2", "G3"]}],
            },
        ),
        (
            "shipment.delivered",
            {
                "po_number": approved_request.po_number,
                "shipment_id": "S1",
                "site": "sh1",
                "lines": [{"line_ref": line.line_ref, "serials": ["G1", "G2", "G4"]}],
            },
        ),
    ]:
        row, _ = event_record(channel="procurement", source="procurement", event=event_body(event_type, data))
        assert event_run(row.pk, procurement_event_handle) == EventStatus.PROCESSED
    from integrations.procurement.models import ProcurementRequest

    ProcurementRequest.objects.filter(pk=approved_request.pk).update(
        state=RequestState.RECEIVED, invoice_number="INV-1"
    )
    lead = approvers["lead"]
    grant(lead, "change_discrepancy", "view_procurementrequest")
    listed = api(lead).get(f"{BASE}/discrepancies/?status=open&request={approved_request.pk}").json()
    assert sorted(d["kind"] for d in listed["results"]) == ["missing", "unexpected"]
    for d in listed["results"]:
        resolved = api(lead).post(
            f"{BASE}/discrepancies/{d['id']}/resolve/", {"reason": "vendor swapped G3/G4"}, format="json"
        )
        assert resolved.json()["status"] == "resolved"
    approved_request.refresh_from_db()
    assert approved_request.state == RequestState.CLOSED
    assert Discrepancy.objects.filter(resolved_by=lead).count() == 2


def test_failed_events_are_listed_and_re_run(approvers, django_capture_on_commit_callbacks):
    row, _ = event_record(
        channel="procurement",
        source="procurement",
        event=event_body("po.created", {"po_number": "PO-1", "request_ref": "PR-999"}),
    )
    assert event_run(row.pk, procurement_event_handle) == EventStatus.FAILED
    lead = approvers["lead"]
    assert api(lead).get(f"{BASE}/inbound-events/").status_code == 403
    grant(lead, "view_inboundevent", "change_inboundevent")
    listed = api(lead).get(f"{BASE}/inbound-events/?status=failed").json()
    assert listed["count"] == 1 and "unknown request PR-999" in listed["results"][0]["error"]
    with django_capture_on_commit_callbacks(execute=True):
        rerun = api(lead).post(f"{BASE}/inbound-events/{row.pk}/rerun/")
    assert rerun.status_code == 202
    assert InboundEvent.objects.get().status == EventStatus.FAILED  # still no such request: failed again
    assert InboundEvent.objects.get().attempts == 2


def test_admin_pages_render(admin_client, approved_request):
    row, _ = event_record(
        channel="procurement",
        source="procurement",
        event=event_body("po.approved", {"po_number": approved_request.po_number}),
    )
    for url in [
        "/admin/procurement/procurementrequest/",
        f"/admin/procurement/procurementrequest/{approved_request.pk}/change/",
        "/admin/procurement/approvalrule/",
        "/admin/procurement/inboundevent/",
        f"/admin/procurement/inboundevent/{row.pk}/change/",
        "/admin/procurement/discrepancy/",
        "/admin/procurement/shipment/",
        "/admin/warehouse/minimumstock/",
        "/admin/warehouse/ledgermovement/",
        "/admin/warehouse/sparereservation/",
        "/admin/warehouse/stockdiscrepancy/",
        "/admin/warehouse/wmssyncrun/",
        "/admin/warehouse/sitestockoverview/",
    ]:
        assert admin_client.get(url).status_code == 200, url
    page = admin_client.get("/admin/warehouse/sitestockoverview/?site=sh1").content.decode()
    assert "stock-overview" in page


def test_request_list_query_count_does_not_grow(site, approvers, part_models, django_assert_max_num_queries):
    from tests.integrations.procurement.procurement_helpers import request_make

    lead = approvers["lead"]
    request_make(site=site, requester=lead, cables=3, cable_model=part_models["cable"])
    with django_assert_max_num_queries(20) as small:
        assert api(lead).get(f"{BASE}/requests/").json()["count"] == 1
    for _ in range(10):
        request_make(site=site, requester=lead, cables=3, cable_model=part_models["cable"])
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert api(lead).get(f"{BASE}/requests/").json()["count"] == 11
