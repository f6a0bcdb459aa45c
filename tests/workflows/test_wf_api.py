"""The workflows REST API: the same operations as the UI, with the house error shape and OpenAPI."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.workflows.helpers import open_by_hook, ticket_fresh
from workflows.models import Ticket

pytestmark = pytest.mark.django_db


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def test_anonymous_is_refused():
    assert api().get("/api/workflows/tickets/").status_code == 401


def test_list_is_scoped_and_filtered(wf, fleet, tech, lead, outsider):
    repair = open_by_hook(wf, fleet)
    body = api(tech).get("/api/workflows/tickets/").json()
    assert [t["reference"] for t in body["results"]] == [repair.reference]
    assert body["results"][0]["state"] == "diagnosing" and body["results"][0]["assignee_group"] == "dc-technicians"
    assert api(outsider).get("/api/workflows/tickets/").json()["results"] == []
    assert api(lead).get("/api/workflows/tickets/?type=incident").json()["results"] == []
    assert len(api(lead).get("/api/workflows/tickets/?node=sh9-h100").json()["results"]) == 1
    assert api(outsider).get(f"/api/workflows/tickets/{repair.pk}/").status_code == 404


def test_create_and_take_transitions(wf, fleet, tech):
    client = api(tech)
    fleet.spare()
    with wf.committing():
        response = client.post(
            "/api/workflows/tickets/",
            {
                "type": "repair",
                "title": "XID 48 on slot 3",
                "priority": "high",
                "inputs": {"accelerator": fleet.failed.serial},
                "start": True,
            },
            format="json",
        )
    assert response.status_code == 201, response.json()
    assert response.json()["state"] == "draining"  # answered before the drain step ran (on commit)
    ticket = client.get(f"/api/workflows/tickets/{response.json()['id']}/").json()
    assert ticket["state"] == "diagnosing" and ticket["requester"] == "tech"
    assert {a["name"] for a in ticket["actions"]["transitions"]} >= {"diagnose_replace", "cancel"}
    assert any(link["kind"] == "node" and link["object_repr"] == "sh9-h100-0001" for link in ticket["links"])
    assert ticket["runs"][0]["step"] == "drain" and ticket["runs"][0]["status"] == "succeeded"

    url = f"/api/workflows/tickets/{ticket['id']}/transitions"
    with wf.committing():
        response = client.post(
            f"{url}/diagnose_replace/", {"inputs": {"note": "dead"}}, format="json", HTTP_IDEMPOTENCY_KEY="d-1"
        )
    assert response.status_code == 200 and response.json()["state"] == "reserving_spare"
    with wf.committing():
        again = client.post(
            f"{url}/diagnose_replace/", {"inputs": {"note": "dead"}}, format="json", HTTP_IDEMPOTENCY_KEY="d-1"
        )
    assert again.status_code == 200 and again.json()["state"] == "awaiting_swap"  # replayed, not refused

    bad = client.post(
        f"{url}/confirm_swap/", {"inputs": {"old_serial": "X", "new_serial": "SPARE-0001"}}, format="json"
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid" and "is not the failed card" in bad.json()["error"]["message"]
    missing = client.post(f"{url}/confirm_swap/", {"inputs": {}}, format="json").json()["error"]
    assert set(missing["fields"]) == {"old_serial", "new_serial"}
    wrong_state = client.post(f"{url}/reverify/", {}, format="json")
    assert wrong_state.status_code == 409 and "'Awaiting swap'" in wrong_state.json()["error"]["message"]
    system = client.post(f"{url}/spare_reserved/", {}, format="json")
    assert system.status_code == 409


def test_create_errors(wf, fleet, tech, outsider):
    assert api(tech).post("/api/workflows/tickets/", {"type": "nope", "title": "x"}, format="json").status_code == 400
    response = api(tech).post(
        "/api/workflows/tickets/", {"type": "repair", "title": "x", "inputs": {"accelerator": "NOPE"}}, format="json"
    )
    assert response.status_code == 400 and "accelerator" in response.json()["error"]["fields"]
    assert (
        api(outsider).post("/api/workflows/tickets/", {"type": "incident", "title": "x"}, format="json").status_code
        == 403
    )


def test_approvals_comments_pause_resume_cancel(wf, fleet, tech, approvers, lead):
    client = api(tech)
    created = client.post(
        "/api/workflows/tickets/",
        {
            "type": "decommission",
            "title": "retire",
            "inputs": {"node": fleet.node.hostname},
            "change_plan": "drain, wipe, unrack",
            "rollback_plan": "resume",
        },
        format="json",
    ).json()
    base = f"/api/workflows/tickets/{created['id']}"
    assert client.post(f"{base}/transitions/submit/", {}, format="json").json()["state"] == "awaiting_approval"
    own = client.post(f"{base}/approve/", {"decision": "approved"}, format="json")
    assert own.status_code == 403 and "own ticket" in own.json()["error"]["message"]
    detail = api(approvers[0]).get(f"{base}/").json()
    assert detail["actions"]["can_approve"] and detail["actions"]["approval_needed"] == 2
    with wf.committing():
        body = api(approvers[0]).post(f"{base}/approve/", {"decision": "approved"}, format="json").json()
    assert body["approvals"][0]["snapshot"]["change_plan"] == "drain, wipe, unrack"

    posted = client.post(f"{base}/comments/", {"body": "waiting for the second approver"}, format="json")
    assert posted.status_code == 201 and posted.json()[-1]["body"] == "waiting for the second approver"
    assert len(client.get(f"{base}/comments/").json()) == 1

    assert api(lead).post(f"{base}/pause/", {"reason": "freeze"}, format="json").json()["is_paused"]
    assert client.post(f"{base}/pause/", {}, format="json").status_code == 409  # paused already
    assert not api(lead).post(f"{base}/resume/", format="json").json()["is_paused"]
    with wf.committing():
        cancelled = client.post(f"{base}/cancel/", {"reason": "not this quarter"}, format="json").json()
    assert cancelled["state"] == "cancelled" and cancelled["data"]["cancel_reason"] == "not this quarter"


def test_retry_step_and_runs_and_timeline(wf, fleet, lead):
    wf.scheduler.fail_next["drain"] = 5
    ticket = open_by_hook(wf, fleet)
    client = api(lead)
    runs = client.get(f"/api/workflows/tickets/{ticket.pk}/runs/").json()
    assert runs[0]["status"] == "failed" and runs[0]["id"] == str(ticket.runs.get().pk)
    assert any("transient error" in line for line in runs[0]["log"])
    with wf.committing():
        client.post(f"/api/workflows/tickets/{ticket.pk}/retry-step/", {"run_id": runs[0]["id"]}, format="json")
    assert client.get(f"/api/workflows/tickets/{ticket.pk}/").json()["state"] == "diagnosing"
    timeline = client.get(f"/api/workflows/tickets/{ticket.pk}/timeline/").json()
    kinds = {item["kind"] for item in timeline}
    assert {"created", "signal", "transition", "step", "operator", "change"} <= kinds
    change = next(i for i in timeline if i["kind"] == "change")
    assert change["url"].startswith("/admin/cmdb/node/")


def test_types_and_schema(lead):
    client = api(lead)
    types = {t["type"]: t for t in client.get("/api/workflows/types/").json()}
    assert {"repair", "decommission", "incident"} <= set(types)
    confirm = next(t for t in types["repair"]["transitions"] if t["name"] == "confirm_swap")
    assert confirm["permission"] == "workflows.repair_swap" and [f["name"] for f in confirm["fields"]][:2] == [
        "old_serial",
        "new_serial",
    ]
    assert client.get("/api/workflows/types/repair/").json()["prefix"] == "REP"
    schema = client.get("/api/schema/?format=json").json()
    assert "/api/workflows/tickets/{id}/transitions/{name}/" in schema["paths"]
    assert "/api/workflows/tickets/{id}/retry-step/" in schema["paths"]


def test_ticket_ids_of_others_are_404(wf, fleet, outsider):
    ticket = open_by_hook(wf, fleet)
    client = api(outsider)
    assert client.post(f"/api/workflows/tickets/{ticket.pk}/comments/", {"body": "x"}, format="json").status_code == 404
    assert ticket_fresh(ticket).timeline.filter(kind="comment").count() == 0
    assert Ticket.objects.count() == 1


def test_nested_ticket_lists_are_plain_lists_in_the_schema_and_the_response(wf, fleet, lead):
    from drf_spectacular.generators import SchemaGenerator

    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    ticket = open_by_hook(wf, fleet)
    client = api(lead)
    for name in ("comments", "timeline", "runs"):
        operation = paths[f"/api/workflows/tickets/{{id}}/{name}/"]["get"]
        schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert schema["type"] == "array", (name, schema)  # was documented as a paginated object
        assert not {"limit", "offset"} & {p["name"] for p in operation.get("parameters", [])}
        body = client.get(f"/api/workflows/tickets/{ticket.pk}/{name}/").json()
        assert isinstance(body, list), name
