"""Every endpoint answers list and detail on a real fleet, with related objects in their brief forms."""

from __future__ import annotations

import pytest

from cmdb import models as m
from tests.cmdb.api.support import url

pytestmark = pytest.mark.django_db

RESOURCES = [
    "sites",
    "rooms",
    "racks",
    "clusters",
    "tenants",
    "vendors",
    "accelerator-models",
    "server-models",
    "part-models",
    "driver-packages",
    "health-policies",
    "nodes",
    "components",
    "nics",
    "nic-ports",
    "installed-software",
    "health-events",
    "accelerators",
    "accelerator-placements",
    "stock-locations",
    "fabrics",
    "switches",
    "switch-ports",
    "links",
    "changes",
]


def test_every_endpoint_lists_and_retrieves(root, fleet):
    index = root.get("/api/cmdb/").json()
    assert set(RESOURCES) <= set(index)
    for resource in RESOURCES:
        listed = root.get(url(resource), {"limit": 2})
        assert listed.status_code == 200, resource
        first = listed.json()["results"][0]
        detail = root.get(url(resource, first["id"]))
        assert detail.status_code == 200, resource
        assert detail.json() == first, resource


def test_an_accelerator_carries_its_whole_context(root, fleet):
    card = m.Accelerator.objects.select_related("node__rack", "site", "model__vendor").filter(node__isnull=False)[0]
    body = root.get(url("accelerators", card.pk)).json()
    assert body["node"] == {"id": card.node_id, "hostname": card.node.hostname}
    assert body["rack"] == {"id": card.node.rack_id, "name": card.node.rack.name}
    assert body["site"] == {"id": card.site_id, "code": card.site.code, "name": card.site.name}
    assert body["model"] == {"id": card.model_id, "name": card.model.name}
    assert body["vendor"]["slug"] == card.model.vendor.slug
    assert list(body)[:3] == ["id", "model", "serial"]  # model order, bookkeeping last
    assert list(body)[-3:] == ["created_at", "updated_at", "version"]


def test_a_link_names_both_ends(root, fleet):
    link = m.Link.objects.select_related("a_nic_port__nic__node", "b_switch_port__switch").first()
    body = root.get(url("links", link.pk)).json()
    assert body["a_nic_port"]["node"] == link.a_nic_port.nic.node.hostname
    assert body["a_nic_port"]["nic"] == link.a_nic_port.nic.name
    assert body["b_switch_port"]["switch"] == link.b_switch_port.switch.name


def test_node_history_lists_its_changes_newest_first(root, fleet):
    node = m.Node.objects.first()
    root.patch(url("nodes", node.pk), {"status": "maintenance"}, format="json")
    root.patch(url("nodes", node.pk), {"status": "active"}, format="json")
    rows = root.get(url("nodes", node.pk, "history")).json()["results"]
    assert [r["changes"].get("status") for r in rows[:2]] == [["maintenance", "active"], ["active", "maintenance"]]
    assert rows[-1]["action"] == "create"


def test_fast_rendering_matches_drf(fleet):
    """BaseModelSerializer renders plain columns without DRF's per-field machinery; the output must be the
    same as DRF's own Serializer.to_representation, field for field, on every endpoint."""
    from rest_framework import serializers

    from cmdb.api.urls import router
    from tests.factories.cmdb import UserFactory

    m.Tag.objects.create(slug="canary").nodes.add(m.Node.objects.first())
    part_model = m.PartModel.objects.first()
    m.PartItem.objects.create(part_model=part_model, serial="P-1", stock_location=m.StockLocation.objects.first())
    m.ChangeRecord.objects.update(actor=UserFactory(username="someone"))
    for prefix, viewset, _ in router.registry:
        rows = list(viewset.queryset.model._default_manager.order_by("-pk")[:20])
        assert rows, prefix
        for row in rows:
            serializer = viewset.serializer_class(context={"request": None})
            drf = serializers.Serializer.to_representation(serializer, row)
            assert serializer.to_representation(row) == drf, (prefix, row.pk)
