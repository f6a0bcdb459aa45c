"""CSV import: per-row errors, and nothing half-imported when any row is bad."""

from __future__ import annotations

import pytest

from cmdb import models as m
from cmdb.services.imports import accelerators_import_csv, nodes_export_csv, nodes_import_csv
from tests.factories.cmdb import (
    AcceleratorModelFactory,
    ClusterFactory,
    NodeFactory,
    RackFactory,
    ServerModelFactory,
)

pytestmark = pytest.mark.django_db

HEADER = "hostname,serial,server_model,site,rack,position,status,cluster,tags\n"


@pytest.fixture
def rack():
    r = RackFactory(name="r01", room__name="hall1", room__site__code="sh1")
    ServerModelFactory(name="HGX", u_height=8)
    ClusterFactory(name="train", site=r.room.site)
    return r


def test_good_file_creates_nodes_with_units_tags_and_records(rack):
    text = (
        HEADER + "gpu-1,S1,HGX,sh1,hall1/r01,1,racked,train,canary;su-01\ngpu-2,S2,HGX,sh1,hall1/r01,9,racked,train,\n"
    )
    result = nodes_import_csv(text)
    assert result.ok and (result.created, result.updated) == (2, 0)
    node = m.Node.objects.get(hostname="gpu-1")
    assert node.rack == rack and node.cluster.name == "train"
    assert sorted(node.tags.values_list("slug", flat=True)) == ["canary", "su-01"]
    assert m.RackUnit.objects.filter(rack=rack).count() == 16
    assert m.ChangeRecord.objects.filter(source="import", action="create").count() == 2


@pytest.mark.parametrize(
    ("rows", "row", "field", "fragment"),
    [
        ("gpu-1,S1,HGX,sh1,hall1/r01,1,,,\ngpu-2,S1,HGX,sh1,hall1/r01,9,,,\n", 2, "serial", "duplicate of row 1"),
        ("gpu-1,S1,HGX,sh1,hall1/r01,1,,,\ngpu-2,S2,HGX,sh1,hall1/r01,5,,,\n", 2, "position", "overlaps row 1"),
        ("gpu-1,S1,HGX,sh1,hall1/r01,1,,,\ngpu-2,S2,NoSuch,sh1,,,,,\n", 2, "server_model", "unknown server model"),
        ("gpu-1,S1,HGX,sh1,hall1/r99,1,,,\n", 1, "rack", "unknown rack"),
        ("gpu-1,S1,HGX,sh1,hall1/r01,1,bogus,,\n", 1, "status", "not a valid choice"),
        ("gpu-1,S1,HGX,sh1,hall1/r01,x,,,\n", 1, "position/date", "invalid literal"),
    ],
)
def test_a_bad_row_rejects_the_whole_file(rack, rows, row, field, fragment):
    result = nodes_import_csv(HEADER + rows)
    assert not result.ok
    assert any(e.row == row and e.field == field and fragment in e.message for e in result.errors), result.errors
    assert not m.Node.objects.exists()
    assert not m.ChangeRecord.objects.filter(source="import").exists()


def test_overlap_with_an_existing_node_is_reported(rack):
    NodeFactory(
        site=rack.room.site, rack=rack, position=1, server_model=m.ServerModel.objects.get(name="HGX"), hostname="old"
    )
    result = nodes_import_csv(HEADER + "gpu-1,S1,HGX,sh1,hall1/r01,4,,,\n")
    assert [(e.row, e.field) for e in result.errors] == [(1, "position")]
    assert "old" in result.errors[0].message


def test_missing_columns_are_named():
    result = nodes_import_csv("hostname,serial\nx,y\n")
    assert {e.field for e in result.errors} == {"server_model", "site"}


def test_reimport_of_an_export_updates_in_place(rack):
    nodes_import_csv(HEADER + "gpu-1,S1,HGX,sh1,hall1/r01,1,racked,train,\n")
    exported = nodes_export_csv(m.Node.objects.all()).replace("racked", "active")
    result = nodes_import_csv(exported)
    assert result.ok and (result.created, result.updated) == (0, 1)
    assert m.Node.objects.get().status == "active"


def test_accelerator_import_rejects_duplicate_slots_and_unknown_nodes():
    AcceleratorModelFactory(name="H100-SXM5-80GB")
    node = NodeFactory(hostname="n1")
    text = "serial,model,node,slot_index\nA1,H100-SXM5-80GB,n1,0\nA2,H100-SXM5-80GB,n1,0\nA3,H100-SXM5-80GB,ghost,1\n"
    result = accelerators_import_csv(text)
    assert {(e.row, e.field) for e in result.errors} == {(2, "slot_index"), (3, "node")}
    assert not m.Accelerator.objects.exists()
    ok = accelerators_import_csv("serial,model,node,slot_index\nA1,H100-SXM5-80GB,n1,0\n")
    assert ok.ok
    card = m.Accelerator.objects.get(serial="A1")
    assert (card.node, card.lifecycle, card.site) == (node, "installed", node.site)
    assert card.placements.get().node_hostname == "n1"
