"""Single-object writes: validation, ETags and If-Match, change records, and writes through services."""

from __future__ import annotations

import pytest

from cmdb import models as m
from tests.cmdb.api.support import url
from tests.factories.cmdb import DriverPackageFactory, RackFactory, ServerModelFactory

pytestmark = pytest.mark.django_db


def node_body(two_sites, **extra) -> dict:
    return {
        "hostname": "n-new",
        "serial": "SN-NEW",
        "server_model": two_sites.node_a.server_model_id,
        "site": two_sites.site_a.pk,
        "status": "planned",
        **extra,
    }


# --- validation and error shape ----------------------------------------------------------------------------------


def test_validation_error_names_the_field(root, two_sites):
    response = root.post(url("nodes"), {"hostname": "x"}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert {"serial", "server_model", "site"} <= set(error["fields"])
    assert error["request_id"] == response["X-Request-ID"]
    assert "row" not in error


def test_unique_serial_is_a_field_error(root, two_sites):
    response = root.post(url("nodes"), node_body(two_sites, serial=two_sites.node_a.serial), format="json")
    assert response.status_code == 400
    assert "already exists" in response.json()["error"]["fields"]["serial"][0]


def test_model_clean_and_constraints_are_field_errors(root, two_sites):
    rack_b = RackFactory(room__site=two_sites.site_b)
    response = root.post(url("nodes"), node_body(two_sites, rack=rack_b.pk, position=1), format="json")
    assert response.status_code == 400
    assert "not in site" in response.json()["error"]["fields"]["rack"][0]
    response = root.post(url("nodes"), node_body(two_sites, is_cordoned=True), format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["cordon_reason"]


def test_unknown_reference_reads_as_does_not_exist(root, two_sites):
    response = root.post(url("nodes"), node_body(two_sites, site=999999), format="json")
    assert response.status_code == 400
    assert "999999" in response.json()["error"]["fields"]["site"][0]


def test_reference_accepts_an_id_object(root, two_sites):
    response = root.post(url("nodes"), node_body(two_sites, site={"id": two_sites.site_a.pk}), format="json")
    assert response.status_code == 201, response.content


def test_other_error_codes_share_the_shape(root, two_sites):
    response = root.put(url("summary"), {}, format="json")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    response = root.post(url("nodes"), "hostname=x", content_type="text/plain")
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"
    response = root.post(url("nodes"), "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"
    response = root.get("/api/cmdb/no-such-thing/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "slash" in root.get("/api/cmdb/nodes").json()["error"]["message"]


def test_protected_delete_is_409(root, two_sites):
    response = root.delete(url("sites", two_sites.site_a.pk))
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"
    assert m.Site.objects.filter(pk=two_sites.site_a.pk).exists()


# --- ETags -----------------------------------------------------------------------------------------------------


def test_get_returns_the_version_as_etag_and_304_when_unchanged(root, two_sites):
    response = root.get(url("nodes", two_sites.node_a.pk))
    etag = response["ETag"]
    assert etag == f'"{two_sites.node_a.version}"' == f'"{response.json()["version"]}"'
    assert root.get(url("nodes", two_sites.node_a.pk), HTTP_IF_NONE_MATCH=etag).status_code == 304


def test_if_match_current_etag_writes_and_returns_the_new_one(root, two_sites):
    etag = root.get(url("nodes", two_sites.node_a.pk))["ETag"]
    response = root.patch(
        url("nodes", two_sites.node_a.pk), {"status": "maintenance"}, format="json", HTTP_IF_MATCH=etag
    )
    assert response.status_code == 200
    assert response["ETag"] != etag
    assert response.json()["version"] == two_sites.node_a.version + 1


def test_stale_if_match_is_412_and_writes_nothing(root, two_sites):
    etag = root.get(url("nodes", two_sites.node_a.pk))["ETag"]
    root.patch(url("nodes", two_sites.node_a.pk), {"status": "maintenance"}, format="json")  # someone else
    records = m.ChangeRecord.objects.count()
    response = root.patch(url("nodes", two_sites.node_a.pk), {"status": "draining"}, format="json", HTTP_IF_MATCH=etag)
    assert response.status_code == 412
    error = response.json()["error"]
    assert error["code"] == "precondition_failed"
    assert error["current_version"] == two_sites.node_a.version + 1
    two_sites.node_a.refresh_from_db()
    assert two_sites.node_a.status == "maintenance"
    assert m.ChangeRecord.objects.count() == records


def test_stale_version_in_the_body_is_412(root, two_sites):
    response = root.patch(url("nodes", two_sites.node_a.pk), {"status": "draining", "version": 99}, format="json")
    assert response.status_code == 412


def test_stale_if_match_on_delete_is_412(root, two_sites):
    card = two_sites.cards_a[0]
    response = root.delete(url("accelerators", card.pk), HTTP_IF_MATCH='"999"')
    assert response.status_code == 412
    assert m.Accelerator.objects.filter(pk=card.pk).exists()


# --- change records ------------------------------------------------------------------------------------------------


def test_writes_record_actor_source_and_request_id(root, superuser, two_sites):
    response = root.patch(
        url("nodes", two_sites.node_a.pk), {"status": "maintenance"}, format="json", HTTP_X_REQUEST_ID="req-42"
    )
    assert response["X-Request-ID"] == "req-42"
    record = m.ChangeRecord.objects.filter(object_id=two_sites.node_a.pk, content_type__model="node").first()
    assert record.actor_id == superuser.pk  # the token's user, resolved after DRF authenticated it
    assert record.source == "api"
    assert record.correlation_id == "req-42"
    assert record.changes == {"status": ["active", "maintenance"]}


def test_create_and_delete_are_recorded(root, two_sites):
    response = root.post(url("nodes"), node_body(two_sites), format="json")
    pk = response.json()["id"]
    request_id = response["X-Request-ID"]
    assert root.delete(url("nodes", pk)).status_code == 204
    actions = list(
        m.ChangeRecord.objects.filter(object_id=pk, content_type__model="node")
        .order_by("id")
        .values_list("action", "source")
    )
    assert actions == [("create", "api"), ("delete", "api")]
    assert m.ChangeRecord.objects.filter(correlation_id=request_id).count() == 1


# --- writes through services ----------------------------------------------------------------------------------


def test_moving_a_card_to_stock_writes_its_placement_history(root, two_sites):
    card = two_sites.cards_a[0]
    m.AcceleratorPlacement.objects.create(
        accelerator=card, serial=card.serial, kind="node", node=card.node, started_at=card.created_at
    )
    response = root.patch(url("accelerators", card.pk), {"stock_location": two_sites.stock_a.pk}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["lifecycle"] == "in_stock" and body["node"] is None and body["rack"] is None
    placements = list(m.AcceleratorPlacement.objects.filter(accelerator=card).order_by("id"))
    assert [p.kind for p in placements] == ["node", "stock"]
    assert placements[0].ended_at is not None and placements[1].ended_at is None
    assert placements[1].source == "api"


def test_installing_a_card_into_a_taken_slot_is_a_field_error(root, two_sites):
    spare = m.Accelerator.objects.create(
        model=two_sites.cards_a[0].model,
        serial="SPARE",
        lifecycle="in_stock",
        stock_location=two_sites.stock_a,
        site=two_sites.site_a,
    )
    response = root.patch(url("accelerators", spare.pk), {"node": two_sites.node_a.pk, "slot_index": 0}, format="json")
    assert response.status_code == 400
    assert "slot_index" in response.json()["error"]["fields"]


def test_failing_a_card_out_of_its_node_keeps_lifecycle_failed(root, two_sites):
    card = two_sites.cards_a[1]
    response = root.patch(url("accelerators", card.pk), {"lifecycle": "failed", "health": "failed"}, format="json")
    assert response.status_code == 200, response.content
    card.refresh_from_db()
    assert (card.lifecycle, card.health, card.node_id) == ("failed", "failed", None)
    assert card.placements.get(ended_at__isnull=True).kind == "in_transit"


def test_creating_a_card_opens_its_placement(root, two_sites):
    body = {"model": two_sites.cards_a[0].model_id, "serial": "NEW-CARD", "node": two_sites.node_a.pk, "slot_index": 5}
    response = root.post(url("accelerators"), body, format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["lifecycle"] == "installed"
    assert data["site"]["code"] == "site-a"
    assert data["node"] == {"id": two_sites.node_a.pk, "hostname": "a-0001"}
    assert m.AcceleratorPlacement.objects.get(accelerator_id=data["id"]).kind == "node"


def test_cordon_action_goes_through_the_service(root, two_sites):
    response = root.post(url("nodes", two_sites.node_a.pk, "cordon"), {"reason": "xid 79"}, format="json")
    assert response.status_code == 200
    assert response.json()["is_cordoned"] is True
    assert response.json()["cordon_reason"] == "xid 79"
    response = root.post(url("nodes", two_sites.node_a.pk, "uncordon"), format="json")
    assert response.json()["is_cordoned"] is False


def test_racked_node_gets_its_rack_units(root, two_sites):
    rack = RackFactory(room__site=two_sites.site_a)
    response = root.post(url("nodes"), node_body(two_sites, rack=rack.pk, position=3), format="json")
    assert response.status_code == 201, response.content
    assert response.json()["room"]["id"] == rack.room_id
    units = m.RackUnit.objects.filter(node_id=response.json()["id"]).values_list("unit", flat=True)
    assert sorted(units) == list(range(3, 3 + two_sites.node_a.server_model.u_height))
    # The next node overlapping those units is refused, naming the position.
    response = root.post(
        url("nodes"), node_body(two_sites, hostname="n2", serial="S2", rack=rack.pk, position=4), format="json"
    )
    assert response.status_code == 400
    assert "occupied" in response.json()["error"]["fields"]["position"][0]


def test_driver_package_version_string_is_data_not_a_row_version(root, two_sites):
    """DriverPackage.version is the package version; updates must not treat it as the row version."""
    package = DriverPackageFactory()
    response = root.get(url("driver-packages", package.pk))
    assert "ETag" not in response
    response = root.patch(url("driver-packages", package.pk), {"notes": "known good"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["version"] == "550.127.05"
    model = ServerModelFactory().accelerator_model
    response = root.patch(url("driver-packages", package.pk), {"supported_models": [model.pk]}, format="json")
    assert [x["name"] for x in response.json()["supported_models"]] == [model.name]
