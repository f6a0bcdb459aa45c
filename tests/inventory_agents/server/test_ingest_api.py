"""Reading stored reports through the API and the admin (scoped like the nodes they belong to)."""

from __future__ import annotations

import pytest

from cmdb import permissions
from tests.factories.cmdb import UserFactory
from tests.inventory_agents.server.ingest_support import REPORTS_URL, make_node, report_of

pytestmark = pytest.mark.django_db


def test_reports_are_listed_for_those_who_see_the_node(node, token, post, client):
    body = post(report_of(node), token).json()
    other = make_node("gpu-0777", site=None)
    assert other.site_id != node.site_id
    admin = UserFactory(username="root", is_superuser=True)
    client.force_login(admin)
    listing = client.get(REPORTS_URL, {"node": node.hostname}).json()
    assert [r["id"] for r in listing["results"]] == [body["report_id"]]
    assert listing["results"][0]["summary"] == body["summary"] and "payload" not in listing["results"][0]
    detail = client.get(f"{REPORTS_URL}{body['report_id']}/").json()
    assert detail["payload"]["hostname"] == node.hostname
    tech = UserFactory(username="tech")
    client.force_login(tech)
    assert client.get(REPORTS_URL).json()["results"] == []
    permissions.grant_scope(scope_obj=node.site, perms=["view_scope"], users=[tech])
    assert [r["id"] for r in client.get(REPORTS_URL).json()["results"]] == [body["report_id"]]
    assert client.get(f"{REPORTS_URL}{body['report_id']}/").status_code == 200


def test_anonymous_get_is_refused(node, client):
    assert client.get(REPORTS_URL).status_code in (401, 403)


def test_admin_pages_render(node, token, post, client):
    body = post(report_of(node), token).json()
    client.force_login(UserFactory(username="root", is_superuser=True))
    for url in (
        "/admin/inventory_agents/report/",
        f"/admin/inventory_agents/report/{body['report_id']}/change/",
        "/admin/inventory_agents/agenttoken/",
        "/admin/inventory_agents/agentstate/",
        "/admin/inventory_agents/enrollmenttoken/",
        "/admin/inventory_agents/enrollmenttoken/add/",
        "/admin/inventory_agents/agenttoken/add/",
    ):
        response = client.get(url)
        assert response.status_code == 200, url
    page = client.get(f"/admin/inventory_agents/report/{body['report_id']}/change/").content.decode()
    assert f"q={body['report_id']}" in page
