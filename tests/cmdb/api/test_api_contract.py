"""One API contract under /api/: unknown query parameters are a 400, every error is the JSON envelope, bad input
is a clear 4xx (never a 500), the schema needs a login and matches what list endpoints return."""

from __future__ import annotations

import json

import pytest
from django.test import Client, RequestFactory
from django.utils import timezone
from drf_spectacular.generators import EndpointEnumerator
from rest_framework.test import APIClient

from cmdb import models as m
from cmdb.services import imports
from gpuops.api.django_errors import server_error
from gpuops.api.viewsets import ApiViewMixin
from tests.factories.cmdb import FabricFactory, NodeFactory, SwitchFactory, UserFactory

pytestmark = pytest.mark.django_db


def _list_routes() -> list[tuple[str, type]]:
    """Every GET route without a path parameter under /api/, from the URL conf (the schema and docs excluded)."""
    routes = []
    for path, _regex, method, callback in EndpointEnumerator().get_api_endpoints():
        if (
            method == "GET"
            and "{" not in path
            and path.startswith("/api/")
            and path not in ("/api/schema/", "/api/docs/")
        ):
            routes.append((path, callback.cls))
    return sorted(set(routes), key=lambda r: r[0])


LIST_ROUTES = _list_routes()


def _error(response) -> dict:
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    return json.loads(response.content)["error"]


def test_the_route_walk_finds_the_lists_of_every_app():
    paths = {p for p, _ in LIST_ROUTES}
    assert {
        "/api/cmdb/nodes/",
        "/api/cmdb/summary/",
        "/api/workflows/tickets/",
        "/api/agent/reports/",
        "/api/integrations/warehouse/movements/",
        "/api/integrations/procurement/requests/",
        "/api/rollouts/",
    } <= paths


@pytest.mark.parametrize(("path", "view"), LIST_ROUTES, ids=[p for p, _ in LIST_ROUTES])
def test_every_list_route_rejects_an_unknown_query_parameter(root, path, view):
    assert issubclass(view, ApiViewMixin), f"{view.__name__} must use gpuops.api.viewsets.ApiViewMixin"
    response = root.get(path, {"helth": "failed"})
    assert response.status_code == 400, (path, response.content[:300])
    error = _error(response)
    assert error["code"] == "invalid" and "helth" in error["fields"]
    assert "allowed" in error["fields"]["helth"][0]


def test_unknown_parameter_names_the_parameter_and_the_allowed_ones(root):
    NodeFactory.create_batch(2)
    response = root.get("/api/cmdb/nodes/", {"helth": "failed", "warranty_end__before": "2026-01-01", "limit": 5})
    assert response.status_code == 400
    error = _error(response)
    assert set(error["fields"]) == {"helth", "warranty_end__before"}
    allowed = error["fields"]["helth"][0]
    for name in ("health", "site", "limit", "offset", "cursor", "mode", "ordering", "q", "format"):
        assert f" {name}," in allowed or allowed.endswith(f" {name}.")
    assert root.get("/api/cmdb/nodes/", {"health": "ok", "limit": 5, "format": "json"}).status_code == 200


def test_known_manual_filters_still_work(root):
    for path, params in [
        ("/api/integrations/warehouse/movements/", {"site": "x", "kind": "receive"}),
        ("/api/integrations/procurement/requests/", {"state": "draft", "is_open": "true"}),
        ("/api/agent/reports/", {"node": "n1", "status": "applied"}),
        ("/api/workflows/tickets/", {"status": "all", "q": "x"}),
    ]:
        assert root.get(path, params).status_code == 200, path


def test_summary_takes_the_list_filters(root, two_sites):
    everything = root.get("/api/cmdb/summary/").json()
    assert everything["accelerators"]["total"] == 4 and everything["nodes"]["total"] == 2
    site_a = root.get("/api/cmdb/summary/", {"site": "site-a"}).json()
    assert site_a["accelerators"]["total"] == 2 and site_a["accelerators"]["by_site"] == {"site-a": 2}
    assert site_a["nodes"]["total"] == 1
    model = two_sites.cards_a[0].model.name
    assert root.get("/api/cmdb/summary/", {"model": model}).status_code == 200
    assert root.get("/api/cmdb/summary/", {"site": "nowhere"}).json()["accelerators"]["total"] == 0
    response = root.get("/api/cmdb/summary/", {"sites": "site-a"})
    assert response.status_code == 400 and "sites" in _error(response)["fields"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/workflows/tickets/",
        "/api/agent/reports/",
        "/api/integrations/procurement/requests/",
        "/api/integrations/warehouse/movements/",
        "/api/cmdb/nodes/",
    ],
)
def test_nul_in_a_query_parameter_is_a_400_naming_it(root, path):
    name = {"/api/workflows/tickets/": "q", "/api/cmdb/nodes/": "hostname"}.get(path, "status")
    response = root.get(f"{path}?{name}=a%00b")
    assert response.status_code == 400
    assert _error(response)["fields"] == {name: ["NUL characters are not allowed."]}


def test_a_huge_limit_is_capped(root):
    for path in ("/api/integrations/warehouse/movements/", "/api/cmdb/nodes/", "/api/workflows/tickets/"):
        response = root.get(path, {"limit": "9" * 40})
        assert response.status_code == 200, path
    # the cap is the documented 1,000 rows per page
    assert "limit=1000" in (root.get("/api/cmdb/sites/", {"limit": 10**9}).json()["next"] or "limit=1000")


def test_warehouse_movement_locations_are_names_not_method_wrappers(root):
    site = m.Site.objects.create(code="wh9", name="wh9")
    location = m.StockLocation.objects.create(site=site, name="shelf-1", kind="shelf")
    part = m.PartModel.objects.create(sku="CBL-1", name="cable", kind="cable", is_serialised=False)
    m.StockMovement.objects.create(kind="receive", part_model=part, quantity=3, location=location, at=timezone.now())
    (row,) = root.get("/api/integrations/warehouse/movements/").json()["results"]
    assert row["location"] == str(location) and row["to_location"] is None


# --- the error envelope ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/api/nothing-here/", "/api/integrations/nothing/", "/api/workflows/x/y/", "/api/cmdb/nodes/abc/"]
)
def test_unknown_api_paths_are_a_json_404(root, path):
    response = root.get(path)
    assert response.status_code == 404 and _error(response)["code"] == "not_found"


def test_405_of_drf_and_of_plain_django_views_is_json(root):
    response = root.delete("/api/cmdb/summary/")
    assert response.status_code == 405 and _error(response)["code"] == "method_not_allowed"
    response = root.get("/api/integrations/procurement/events/")  # a plain Django view (the webhook)
    assert response.status_code == 405 and _error(response)["code"] == "method_not_allowed"
    assert "POST" in response["Allow"]


def test_django_500_handler_answers_json_under_api_only():
    request = RequestFactory().get("/api/cmdb/nodes/")
    response = server_error(request)
    assert response.status_code == 500 and _error(response)["code"] == "server_error"
    assert "html" in server_error(RequestFactory().get("/tickets/"))["Content-Type"]


def test_csrf_failure_of_a_session_user_is_a_json_403(superuser):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(superuser)
    response = client.post("/api/cmdb/sites/", {"code": "x1", "name": "x1"}, format="json")
    assert response.status_code == 403 and "CSRF" in _error(response)["message"]
    plain = Client(enforce_csrf_checks=True)
    plain.force_login(superuser)
    response = plain.post("/api/agent/enroll/", data=b"{}", content_type="application/json")
    assert response.status_code != 500 and response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize(
    "path",
    [
        "/api/cmdb/nodes/",
        "/api/integrations/warehouse/movements/",
        "/api/integrations/procurement/requests/",
        "/api/workflows/tickets/",
        "/api/rollouts/",
        "/api/schema/",
    ],
)
def test_missing_or_bad_credentials_are_a_401_with_www_authenticate(path):
    for client in (APIClient(), APIClient(HTTP_AUTHORIZATION="Token nope")):
        response = client.get(path)
        assert response.status_code == 401, path
        assert response["WWW-Authenticate"].startswith("Token")
        assert _error(response)["code"] in ("not_authenticated", "authentication_failed")


def test_a_known_user_without_the_right_gets_403(nobody):
    response = nobody.post("/api/integrations/warehouse/minimum-stock/", {}, format="json")
    assert response.status_code == 403 and _error(response)["code"] == "permission_denied"
    response = nobody.post("/api/cmdb/vendors/", {"slug": "v", "name": "v"}, format="json")
    assert response.status_code == 403 and _error(response)["code"] == "permission_denied"


def test_schema_and_docs_need_a_login(root):
    anonymous = Client()
    response = anonymous.get("/api/schema/")
    assert response.status_code == 401 and _error(response)["code"] == "not_authenticated"
    response = anonymous.get("/api/docs/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=/api/docs/")
    assert root.get("/api/schema/", {"format": "json"}).status_code == 200
    assert root.get("/api/docs/").status_code == 200


# --- bad input elsewhere ------------------------------------------------------------------------------------------


def test_deleting_a_cabled_nic_port_or_nic_removes_its_link_and_records_it(root):
    node = NodeFactory(hostname="n-0001")
    switch = SwitchFactory(name="leaf-1")
    links = []
    for i in range(2):
        nic = m.Nic.objects.create(node=node, name=f"ib{i}")
        port = m.NicPort.objects.create(nic=nic)
        switch_port = m.SwitchPort.objects.create(switch=switch, name=f"1/{i}")
        links.append(m.Link.objects.create(fabric=FabricFactory(), a_nic_port=port, b_switch_port=switch_port))
    assert root.delete(f"/api/cmdb/nic-ports/{links[0].a_nic_port_id}/").status_code == 204
    assert root.delete(f"/api/cmdb/nics/{links[1].a_nic_port.nic_id}/").status_code == 204
    assert not m.Link.objects.exists()
    reprs = set(
        m.ChangeRecord.objects.filter(action="delete", content_type__model="link").values_list("object_repr", flat=True)
    )
    assert len(reprs) == 2 and all("leaf-1" in r and "<->" in r for r in reprs)


def test_a_non_utf8_csv_is_a_clear_import_error():
    result = imports.nodes_import_csv("hostname,serial\nnode-é,1\n".encode("latin-1"))
    assert not result.ok and "not UTF-8" in str(result.errors[0])


def test_admin_stock_overview_works_for_a_scoped_staff_user(client, two_sites):
    from cmdb.permissions import grant_scope

    user = UserFactory(username="staff-a", is_staff=True)
    grant_scope(scope_obj=two_sites.site_a, perms=["view_scope"], users=[user])
    client.force_login(user)
    response = client.get("/admin/warehouse/sitestockoverview/")
    assert response.status_code == 200
    assert b"site-b" not in response.content
