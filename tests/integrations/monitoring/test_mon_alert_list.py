"""GET /api/integrations/alerts/: scoped like the inventory (a site's people see its nodes' alerts; unmatched
alerts without a node only with the global view permission), a constant number of queries; the admin shows a
new source's token once and keeps only its hash."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cmdb.permissions import grant_scope
from integrations.monitoring.models import AlertSource, ReceivedAlert
from tests.factories.cmdb import UserFactory
from tests.integrations.monitoring.conftest import LIST_URL, am_alert, am_body, fleet_make

pytestmark = pytest.mark.django_db


def _xid(host: str, fingerprint: str) -> dict:
    return am_alert({"alertname": "DCGMXidError", "Hostname": host, "gpu": "0", "xid": "13"}, fingerprint=fingerprint)


@pytest.fixture
def two_sites(fleet, post):
    fleet_make(hostname="qzxb-b01", site_code="sh9")
    post(am_body(_xid("gpu-a01", "fa"), _xid("qzxb-b01", "fb"), _xid("gpu-nowhere", "fu")))
    return fleet


def _names(client, user, **params) -> list[str]:
    client.force_login(user)
    response = client.get(LIST_URL, params)
    assert response.status_code == 200, response.content
    return sorted(a["labels"]["Hostname"] for a in response.json()["results"])


def test_a_site_user_sees_only_the_alerts_of_their_sites_nodes(client, two_sites):
    user = UserFactory(username="tech-bj1", is_staff=False)
    grant_scope(scope_obj=two_sites.site, perms=["view_scope"], users=[user])
    assert _names(client, user) == ["gpu-a01"]
    response = client.get(LIST_URL)
    assert "qzxb" not in response.content.decode() and "gpu-nowhere" not in response.content.decode()


def test_unmatched_alerts_need_the_global_view_permission(client, two_sites):
    user = UserFactory(username="noc", is_staff=False)
    user.user_permissions.add(Permission.objects.get(codename="view_receivedalert"))
    assert _names(client, user) == ["gpu-a01", "gpu-nowhere", "qzxb-b01"]
    assert _names(client, user, matched="false") == ["gpu-nowhere"]
    assert client.get(LIST_URL, {"matched": "maybe"}).status_code == 400
    assert client.get(LIST_URL, {"status": "open"}).status_code == 400


def test_anonymous_is_refused(client, two_sites):
    assert client.get(LIST_URL).status_code in (401, 403)


def test_the_list_costs_the_same_queries_for_2_and_12_alerts(client, fleet, post):
    admin = UserFactory(username="root", is_superuser=True)
    client.force_login(admin)

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(LIST_URL).status_code == 200
        return len(ctx.captured_queries)

    post(am_body(*[_xid("gpu-a01", f"s{i}") for i in range(2)]))
    small = count()
    post(am_body(*[_xid(f"gpu-x{i}", f"l{i}") for i in range(10)]))
    assert ReceivedAlert.objects.count() == 12
    assert count() == small


def test_the_admin_shows_a_new_sources_token_once(client, db):
    client.force_login(UserFactory(username="root", is_superuser=True))
    response = client.post(
        "/admin/monitoring/alertsource/add/", {"name": "zabbix-bj1", "kind": "generic", "description": ""}, follow=True
    )
    assert response.status_code == 200
    source = AlertSource.objects.get(name="zabbix-bj1")
    shown = [str(msg) for msg in response.context["messages"]]
    token = next(word for msg in shown for word in msg.split() if word.startswith("gpm_"))
    assert token not in (source.token_hash, source.token_prefix) and source.kind == "generic"
    change = client.get(f"/admin/monitoring/alertsource/{source.pk}/change/").content.decode()
    assert token not in change
    assert client.get("/admin/monitoring/alertrule/").status_code == 200


def test_the_dashboard_selector_counts_unmatched_firing_alerts_in_scope(two_sites):
    from integrations.monitoring.selectors import unmatched_alerts_firing

    noc = UserFactory(username="noc2", is_staff=False)
    noc.user_permissions.add(Permission.objects.get(codename="view_receivedalert"))
    count, newest = unmatched_alerts_firing(noc)
    assert count == 1 and newest[0].labels["Hostname"] == "gpu-nowhere"
    tech = UserFactory(username="tech2", is_staff=False)
    grant_scope(scope_obj=two_sites.site, perms=["view_scope"], users=[tech])
    assert unmatched_alerts_firing(tech) == (0, [])
