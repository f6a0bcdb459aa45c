"""Self-enrollment: a new node registers with the shared enrollment token and gets its own agent token."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone

from cmdb import models as m
from inventory_agents.models import AgentToken, EnrollmentToken
from inventory_agents.services.tokens import agent_token_issue, enrollment_token_issue
from tests.factories.cmdb import NodeFactory, ServerModelFactory, SiteFactory
from tests.inventory_agents.server.ingest_support import card_entry, report_of

pytestmark = pytest.mark.django_db
ENROLL_URL = "/api/agent/enroll/"


@pytest.fixture
def enrollment():
    return enrollment_token_issue(
        name="sh1-build-2026", site=SiteFactory(code="sh1"), server_model=ServerModelFactory(), max_uses=2
    )


def _enroll(client, token: str | None, body: dict):
    headers = {"HTTP_AUTHORIZATION": f"Token {token}"} if token else {}
    return client.generic("POST", ENROLL_URL, json.dumps(body).encode(), content_type="application/json", **headers)


def test_new_node_registers_itself_received_and_reports(client, enrollment, post):
    response = _enroll(client, enrollment.token, {"hostname": "SH1-H100-9001", "serial": "SYS-9001"})
    assert response.status_code == 201
    body = response.json()
    node = m.Node.objects.get(pk=body["node_id"])
    assert (node.hostname, node.serial, node.status, node.site.code) == ("sh1-h100-9001", "SYS-9001", "received", "sh1")
    assert body["token"].startswith("gpa_") and body["report_url"].endswith("/api/agent/reports/")
    assert EnrollmentToken.objects.get().uses == 1
    created = m.ChangeRecord.objects.get(object_id=node.pk, action="create", content_type__model="node")
    assert created.changes["status"] == [None, "received"]
    report = report_of(node, accelerators=[card_entry(0, "1654ENROLL001")])
    assert post(report, body["token"]).json()["status"] == "applied"
    assert m.Accelerator.objects.get(serial="1654ENROLL001").node == node


def test_junk_serial_is_replaced_by_the_first_real_one(client, enrollment, post):
    body = _enroll(client, enrollment.token, {"hostname": "n1", "serial": "To Be Filled By O.E.M."}).json()
    node = m.Node.objects.get(pk=body["node_id"])
    assert node.serial == "unknown:n1"
    report = report_of(node)
    report["system"]["serial"] = "REAL-SERIAL-1"
    post(report, body["token"])
    assert m.Node.objects.get(pk=node.pk).serial == "REAL-SERIAL-1"


def test_planned_node_is_adopted(client, enrollment):
    planned = NodeFactory(hostname="gy1-k100-0001", serial="HG-1", status="planned")
    response = _enroll(client, enrollment.token, {"hostname": "gy1-k100-0001", "serial": "HG-1"})
    assert response.status_code == 201 and response.json()["node_id"] == planned.pk
    assert m.Node.objects.get(pk=planned.pk).status == "planned"


@pytest.mark.parametrize(
    ("status", "has_token", "serial"),
    [("active", False, "SN-A"), ("planned", True, "SN-A"), ("planned", False, "OTHER")],
)
def test_existing_node_is_not_taken_over(client, enrollment, status, has_token, serial):
    node = NodeFactory(hostname="victim", serial="SN-A", status=status)
    if has_token:
        agent_token_issue(node=node)
    response = _enroll(client, enrollment.token, {"hostname": "victim", "serial": serial})
    assert response.status_code == 409
    assert response.json()["error"] == "enrollment_refused"
    assert AgentToken.objects.filter(node=node).count() == (1 if has_token else 0)


def test_bad_expired_and_used_up_tokens(client, enrollment):
    assert _enroll(client, None, {"hostname": "a"}).status_code == 401
    assert _enroll(client, "gpe_wrong", {"hostname": "a"}).status_code == 401
    assert _enroll(client, enrollment.token, {"hostname": "a"}).status_code == 201
    assert _enroll(client, enrollment.token, {"hostname": "b"}).status_code == 201
    assert _enroll(client, enrollment.token, {"hostname": "c"}).status_code == 401  # max_uses=2
    EnrollmentToken.objects.update(max_uses=None, expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert _enroll(client, enrollment.token, {"hostname": "d"}).status_code == 401
    assert not m.Node.objects.filter(hostname__in=["c", "d"]).exists()


def test_enrollment_token_is_no_agent_token(enrollment, node, post):
    assert post(report_of(node), enrollment.token).status_code == 401


def test_missing_hostname_is_400(client, enrollment):
    response = _enroll(client, enrollment.token, {"serial": "x"})
    assert response.status_code == 400 and response.json()["errors"][0]["path"] == "$.hostname"
