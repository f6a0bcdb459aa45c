"""Who may see and change what through the API: the permission matrix of cmdb.permissions, over HTTP."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from cmdb import models as m
from tests.cmdb.api.support import url
from tests.factories.cmdb import VendorFactory

pytestmark = pytest.mark.django_db


def ids(response) -> set[int]:
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


# --- anonymous -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["get", "post", "patch", "delete"])
def test_anonymous_is_401_with_a_token_challenge(api: APIClient, two_sites, method):
    target = url("nodes") if method in ("get", "post") else url("nodes", two_sites.node_a.pk)
    response = getattr(api, method)(target, {}, format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json()["error"]["code"] == "not_authenticated"


def test_bad_token_is_401(api, two_sites):
    api.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    response = api.get(url("nodes"))
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


# --- no grant ----------------------------------------------------------------------------------------------------


def test_without_grant_lists_are_empty_and_details_404(nobody, two_sites):
    assert ids(nobody.get(url("nodes"))) == set()
    assert ids(nobody.get(url("accelerators"))) == set()
    response = nobody.get(url("nodes", two_sites.node_a.pk))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_without_grant_writes_are_403(nobody, two_sites):
    response = nobody.patch(url("nodes", two_sites.node_a.pk), {"status": "maintenance"}, format="json")
    assert response.status_code == 403
    response = nobody.post(url("nodes"), {"hostname": "x"}, format="json")
    assert response.status_code == 403


def test_catalog_is_readable_by_every_authenticated_user(nobody, two_sites):
    vendor = VendorFactory(slug="nvidia")
    assert vendor.pk in ids(nobody.get(url("vendors")))
    assert nobody.get(url("vendors", vendor.pk)).status_code == 200
    response = nobody.patch(url("vendors", vendor.pk), {"name": "Green"}, format="json")
    assert response.status_code == 403


# --- view-only scope ---------------------------------------------------------------------------------------------


def test_view_scope_shows_only_its_site(viewer_a, two_sites):
    assert ids(viewer_a.get(url("nodes"))) == {two_sites.node_a.pk}
    assert ids(viewer_a.get(url("accelerators"))) == {c.pk for c in two_sites.cards_a}
    assert viewer_a.get(url("nodes", two_sites.node_a.pk)).status_code == 200
    assert viewer_a.get(url("nodes", two_sites.node_b.pk)).status_code == 404
    assert viewer_a.get(url("accelerators", two_sites.cards_b[0].pk)).status_code == 404


def test_view_scope_cannot_write_what_it_sees(viewer_a, two_sites):
    response = viewer_a.patch(url("nodes", two_sites.node_a.pk), {"status": "maintenance"}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    response = viewer_a.delete(url("accelerators", two_sites.cards_a[0].pk))
    assert response.status_code == 403
    two_sites.node_a.refresh_from_db()
    assert two_sites.node_a.status == "active"


def test_user_without_any_write_grant_is_refused_before_the_lookup(viewer_a, two_sites):
    """No write grant at all: 403 whatever the object (which says nothing about whether site B's node exists)."""
    response = viewer_a.patch(url("nodes", two_sites.node_b.pk), {"status": "maintenance"}, format="json")
    assert response.status_code == 403


# --- change scope (a site technician) ----------------------------------------------------------------------------


def test_change_scope_writes_inside_its_site(tech_a, two_sites):
    response = tech_a.patch(url("nodes", two_sites.node_a.pk), {"status": "maintenance"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "maintenance"


def test_change_scope_detail_outside_its_site_is_404(tech_a, two_sites):
    response = tech_a.patch(url("nodes", two_sites.node_b.pk), {"status": "maintenance"}, format="json")
    assert response.status_code == 404


def test_creating_into_a_foreign_scope_is_403(tech_a, two_sites):
    """The site B object is not even visible to the technician, so it cannot be referenced."""
    body = {
        "hostname": "new-b",
        "serial": "NEWB",
        "server_model": two_sites.node_a.server_model_id,
        "site": two_sites.site_b.pk,
        "status": "planned",
    }
    response = tech_a.post(url("nodes"), body, format="json")
    assert response.status_code == 400
    assert "site" in response.json()["error"]["fields"]
    assert not m.Node.objects.filter(hostname="new-b").exists()


def test_creating_into_a_foreign_scope_that_is_visible_is_403(tech_a, two_sites):
    """With view (not change) on site B, a create there is refused by the post-write check and rolled back."""
    from cmdb.permissions import grant_scope

    grant_scope(scope_obj=two_sites.site_b, perms=["view_scope"], users=[tech_a.user])
    body = {
        "hostname": "new-b",
        "serial": "NEWB",
        "server_model": two_sites.node_a.server_model_id,
        "site": two_sites.site_b.pk,
        "status": "planned",
    }
    response = tech_a.post(url("nodes"), body, format="json")
    assert response.status_code == 403
    assert not m.Node.objects.filter(hostname="new-b").exists()
    assert not m.ChangeRecord.objects.filter(object_repr="new-b").exists()


def test_moving_an_object_out_of_the_scope_is_403_and_rolled_back(tech_a, two_sites):
    from cmdb.permissions import grant_scope

    grant_scope(scope_obj=two_sites.site_b, perms=["view_scope"], users=[tech_a.user])
    response = tech_a.patch(url("nodes", two_sites.node_a.pk), {"site": two_sites.site_b.pk}, format="json")
    assert response.status_code == 403
    two_sites.node_a.refresh_from_db()
    assert two_sites.node_a.site_id == two_sites.site_a.pk


def test_change_scope_creates_inside_its_site(tech_a, two_sites):
    body = {
        "hostname": "new-a",
        "serial": "NEWA",
        "server_model": two_sites.node_a.server_model_id,
        "site": two_sites.site_a.pk,
        "status": "planned",
    }
    response = tech_a.post(url("nodes"), body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["site"]["code"] == "site-a"


def test_change_scope_cannot_write_the_catalog(tech_a, two_sites):
    response = tech_a.post(url("vendors"), {"slug": "metax", "name": "MetaX"}, format="json")
    assert response.status_code == 403


# --- global permission and superuser ----------------------------------------------------------------------------


def test_global_permission_covers_every_row(global_node_editor, two_sites):
    assert ids(global_node_editor.get(url("nodes"))) == {two_sites.node_a.pk, two_sites.node_b.pk}
    response = global_node_editor.patch(url("nodes", two_sites.node_b.pk), {"status": "maintenance"}, format="json")
    assert response.status_code == 200
    # ...and only its model: cards need their own permission.
    assert ids(global_node_editor.get(url("accelerators"))) == set()


def test_superuser_sees_and_changes_everything(root, two_sites):
    assert len(ids(root.get(url("accelerators")))) == 4
    response = root.patch(url("accelerators", two_sites.cards_b[0].pk), {"health": "degraded"}, format="json")
    assert response.status_code == 200


def test_global_change_history_needs_the_global_permission(tech_a, root, two_sites):
    tech_a.patch(url("nodes", two_sites.node_a.pk), {"status": "maintenance"}, format="json")
    assert ids(tech_a.get(url("changes"))) == set()
    assert len(ids(root.get(url("changes")))) >= 1
    # ...while the node's own history is visible to whoever sees the node.
    history = tech_a.get(url("nodes", two_sites.node_a.pk, "history"))
    assert history.status_code == 200
    assert history.json()["results"][0]["changes"]["status"] == ["active", "maintenance"]


def test_bulk_rows_are_checked_one_by_one(tech_a, two_sites):
    rows = [{"id": two_sites.node_a.pk, "status": "maintenance"}, {"id": two_sites.node_b.pk, "status": "maintenance"}]
    response = tech_a.patch(url("nodes"), rows, format="json")
    assert response.status_code == 404
    assert response.json()["error"]["row"] == 1
    two_sites.node_a.refresh_from_db()
    assert two_sites.node_a.status == "active"
