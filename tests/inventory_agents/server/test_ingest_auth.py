"""Who may post: agent tokens (missing, wrong, revoked, another node's), decommissioned nodes, token issuing."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from cmdb import models as m
from inventory_agents.models import AgentToken, Report
from inventory_agents.services.tokens import agent_token_authenticate, agent_token_issue, token_hash
from tests.factories.cmdb import UserFactory
from tests.inventory_agents.server.ingest_support import make_node, report_of

pytestmark = pytest.mark.django_db


def test_missing_token_is_401_and_nothing_is_stored(node, post):
    response = post(report_of(node), None)
    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"
    assert not Report.objects.exists()


@pytest.mark.parametrize("header", ["Token gpa_not-a-real-token", "Bearer nonsense", "Token", "Basic dXNlcjpwdw=="])
def test_wrong_token_is_401(node, post, header):
    response = post(report_of(node), None, HTTP_AUTHORIZATION=header)
    assert response.status_code == 401


def test_agent_sends_token_keyword_and_bearer_works_too(node, token, post):
    assert post(report_of(node), None, HTTP_AUTHORIZATION=f"Token {token}").status_code == 200
    assert post(report_of(node), None, HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200


def test_revoked_token_is_401(node, post):
    old = agent_token_issue(node=node).token
    agent_token_issue(node=node)  # re-keying revokes the old one
    assert post(report_of(node), old).status_code == 401


def test_another_nodes_token_is_403_and_changes_nothing(node, post):
    other = make_node("gpu-0002")
    other_token = agent_token_issue(node=other).token
    report = report_of(node)
    report["system"]["cpu_model"] = "something else"
    response = post(report, other_token)
    assert response.status_code == 403
    assert response.json()["error"] == "hostname_mismatch"
    assert m.Node.objects.get(pk=node.pk).cpu_model == "Intel Xeon Platinum 8480+"
    stored = Report.objects.get()
    assert stored.node == other and stored.status == "rejected"


def test_decommissioned_node_is_refused(node, token, post):
    m.Node.objects.filter(pk=node.pk).update(status="decommissioned")
    response = post(report_of(node), token)
    assert response.status_code == 403
    assert response.json()["error"] == "node_decommissioned"


def test_tokens_are_stored_hashed_only(node):
    issued = agent_token_issue(node=node)
    row = AgentToken.objects.get(pk=issued.row.pk)
    assert row.token_hash == token_hash(issued.token) and issued.token not in row.token_hash
    assert issued.token.startswith("gpa_") and row.prefix == issued.token[:10]
    assert agent_token_authenticate(issued.token).node == node
    assert not m.ChangeRecord.objects.filter(changes__has_key="token_hash").exists()


def test_management_command_prints_a_working_token(node, post):
    out = StringIO()
    call_command("agent_token_issue", node.hostname, stdout=out)
    token = out.getvalue().strip()
    assert post(report_of(node), token).status_code == 200
    record = m.ChangeRecord.objects.filter(object_repr__startswith=token[:10]).get()
    assert record.source == "cli"


def test_admin_issues_a_token_and_shows_it_once(node, client):
    admin = UserFactory(username="root", is_superuser=True)
    client.force_login(admin)
    response = client.post(
        "/admin/inventory_agents/agenttoken/add/",
        {"node": node.pk, "description": "racked", "revoke_others": "on"},
        follow=True,
    )
    assert response.status_code == 200
    shown = [str(msg) for msg in response.context["messages"]]
    token = next(s.split("<code>")[1].split("</code>")[0] for s in shown if "<code>" in s)
    row = AgentToken.objects.get(node=node, revoked_at__isnull=True)
    assert row.token_hash == token_hash(token) and row.created_by == admin


def test_admin_revoke_action(node, client):
    admin = UserFactory(username="root", is_superuser=True)
    client.force_login(admin)
    issued = agent_token_issue(node=node)
    client.post("/admin/inventory_agents/agenttoken/", {"action": "revoke", "_selected_action": [issued.row.pk]})
    assert AgentToken.objects.get(pk=issued.row.pk).revoked_at is not None
    assert agent_token_authenticate(issued.token) is None
