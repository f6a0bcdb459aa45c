"""Invariants the database holds whatever the caller."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from cmdb import models as m
from tests.factories.cmdb import (
    AcceleratorFactory,
    NodeFactory,
    RackFactory,
    ServerModelFactory,
    SiteFactory,
    StockLocationFactory,
    SwitchFactory,
)

pytestmark = pytest.mark.django_db


def test_card_cannot_be_in_a_node_and_in_stock():
    card = AcceleratorFactory()
    card.stock_location = StockLocationFactory(site=card.site)
    with pytest.raises(IntegrityError), transaction.atomic():
        card.save()


def test_installed_card_needs_a_node():
    location = StockLocationFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        AcceleratorFactory(node=None, slot_index=None, stock_location=None, lifecycle="installed", site=location.site)


def test_one_card_per_node_slot():
    node = NodeFactory()
    AcceleratorFactory(node=node, slot_index=3)
    with pytest.raises(IntegrityError), transaction.atomic():
        AcceleratorFactory(node=node, slot_index=3)


def test_serial_is_unique_but_unknown_serials_may_repeat():
    AcceleratorFactory(serial="1654000000001")
    with pytest.raises(IntegrityError), transaction.atomic():
        AcceleratorFactory(serial="1654000000001")
    AcceleratorFactory(serial=None)
    AcceleratorFactory(serial=None)  # NULL is not an identity


def test_cordon_needs_a_reason_in_the_database():
    node = NodeFactory()
    node.is_cordoned = True
    with pytest.raises(IntegrityError), transaction.atomic():
        node.save()


def test_rack_overlap_is_refused_with_a_readable_error():
    rack = RackFactory(u_height=42)
    model = ServerModelFactory(u_height=8)
    first = NodeFactory(site=rack.room.site, rack=rack, position=1, server_model=model, hostname="gpu-a")
    assert m.RackUnit.objects.filter(node=first).count() == 8
    second = NodeFactory.build(site=rack.room.site, rack=rack, position=5, server_model=model, hostname="gpu-b")
    with pytest.raises(ValidationError) as exc:
        second.full_clean()
    assert "position" in exc.value.message_dict
    assert "U5" in exc.value.message_dict["position"][0] and "gpu-a" in exc.value.message_dict["position"][0]
    # The other face and the next free U are fine.
    NodeFactory.build(site=rack.room.site, rack=rack, position=9, server_model=model).full_clean()
    NodeFactory.build(site=rack.room.site, rack=rack, position=1, face="rear", server_model=model).full_clean()


def test_rack_overlap_is_held_by_the_database_too():
    """Two placements that both passed validation (a race) cannot both land: the occupancy table refuses."""
    rack = RackFactory()
    model = ServerModelFactory(u_height=8)
    NodeFactory(site=rack.room.site, rack=rack, position=1, server_model=model)
    with pytest.raises(ValueError, match="already occupied"), transaction.atomic():
        NodeFactory(site=rack.room.site, rack=rack, position=8, server_model=model)


def test_device_must_fit_the_rack():
    rack = RackFactory(u_height=42)
    node = NodeFactory.build(site=rack.room.site, rack=rack, position=40, server_model=ServerModelFactory(u_height=8))
    with pytest.raises(ValidationError, match="does not fit"):
        node.full_clean()


def test_switch_and_node_share_rack_units():
    rack = RackFactory()
    SwitchFactory(site=rack.room.site, rack=rack, position=42, u_height=1, name="leaf-1")
    node = NodeFactory.build(site=rack.room.site, rack=rack, position=35, server_model=ServerModelFactory(u_height=8))
    with pytest.raises(ValidationError, match="leaf-1"):
        node.full_clean()


def test_rack_must_be_in_the_nodes_site():
    rack = RackFactory()
    node = NodeFactory.build(rack=rack, position=1, site=SiteFactory(), server_model=ServerModelFactory())
    with pytest.raises(ValidationError) as exc:
        node.full_clean()
    assert "rack" in exc.value.message_dict


def test_moving_a_node_frees_its_old_units():
    rack = RackFactory()
    node = NodeFactory(site=rack.room.site, rack=rack, position=1, server_model=ServerModelFactory(u_height=4))
    node.position = 20
    node.save()
    assert sorted(m.RackUnit.objects.filter(node=node).values_list("unit", flat=True)) == [20, 21, 22, 23]
    node.rack, node.position = None, None
    node.save()
    assert not m.RackUnit.objects.filter(node=node).exists()


def test_vendors_are_data():
    """Adding a vendor is one row; its accelerators then work like any other."""
    cambricon = m.Vendor.objects.create(slug="cambricon", name="Cambricon", makes_accelerators=True)
    model = m.AcceleratorModel.objects.create(vendor=cambricon, name="MLU370-X8", memory_gib=48)
    card = AcceleratorFactory(model=model)
    assert card.model.vendor.slug == "cambricon"
