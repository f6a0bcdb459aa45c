"""Admin bulk actions need change rights on every selected row; list filters name only what the user sees;
the CSV import page writes nothing outside the user's scopes."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.core.files.uploadedfile import SimpleUploadedFile

from cmdb import models as m
from cmdb.permissions import grant_scope
from cmdb.services.nodes import nodes_set_status
from tests.factories.cmdb import (
    ClusterFactory,
    NodeFactory,
    RackFactory,
    ServerModelFactory,
    SiteFactory,
    TenantFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    a, b = SiteFactory(code="site-a"), SiteFactory(code="site-b")
    model = ServerModelFactory(name="HGX")
    cluster_b = ClusterFactory(name="zeta-cluster-b", site=b)
    tenant_b = TenantFactory(slug="zeta-tenant-b")
    rack_b = RackFactory(name="zeta-rack-b", room__site=b)
    node_a = NodeFactory(site=a, hostname="a-001", server_model=model)
    node_b = NodeFactory(
        site=b, hostname="b-001", server_model=model, cluster=cluster_b, tenant=tenant_b, rack=rack_b, position=1
    )
    viewer = UserFactory(username="viewer-a")
    grant_scope(scope_obj=a, perms=["view_scope"], users=[viewer])
    changer = UserFactory(username="changer-a")
    grant_scope(scope_obj=a, perms=["change_scope"], users=[changer])
    return {"node_a": node_a, "node_b": node_b, "viewer": viewer, "changer": changer}


def test_view_only_staff_cannot_run_a_bulk_status_action(client, world):
    client.force_login(world["viewer"])
    client.post("/admin/cmdb/node/", {"action": "mark_failed", "_selected_action": [world["node_a"].pk]})
    assert m.Node.objects.get(pk=world["node_a"].pk).status == "active"


def test_bulk_status_action_on_another_sites_node_changes_nothing(client, world):
    client.force_login(world["changer"])
    client.post(
        "/admin/cmdb/node/", {"action": "mark_failed", "_selected_action": [world["node_a"].pk, world["node_b"].pk]}
    )
    assert m.Node.objects.get(pk=world["node_b"].pk).status == "active"


def test_nodes_set_status_refuses_an_actor_without_change_rights(world):
    with pytest.raises(PermissionDenied):
        nodes_set_status(node_ids=[world["node_a"].pk, world["node_b"].pk], status="failed", actor=world["changer"])
    assert set(m.Node.objects.values_list("status", flat=True)) == {"active"}
    assert nodes_set_status(node_ids=[world["node_a"].pk], status="failed", actor=world["changer"]) == 1


def test_list_filters_name_only_objects_the_user_may_see(client, world):
    client.force_login(world["changer"])
    page = client.get("/admin/cmdb/node/")
    assert page.status_code == 200
    for name in (b"site-b", b"zeta-cluster-b", b"zeta-rack-b", b"zeta-tenant-b"):
        assert name not in page.content, name
    assert b"site-a" in page.content


def test_admin_csv_import_refuses_rows_outside_scopes(client, world):
    client.force_login(world["changer"])
    text = b"hostname,serial,server_model,site\nb-hijacked,%s,HGX,site-a\n" % world["node_b"].serial.encode()
    page = client.post("/admin/cmdb/node/import-csv/", {"file": SimpleUploadedFile("n.csv", text)})
    assert b"outside your scopes" in page.content
    node_b = m.Node.objects.get(pk=world["node_b"].pk)
    assert (node_b.hostname, node_b.site.code) == ("b-001", "site-b")
