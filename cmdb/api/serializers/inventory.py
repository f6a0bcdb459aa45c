"""Nodes and their components, accelerators and their placements, installed software, health events, stock."""

from __future__ import annotations

from gpuops.api.fields import BriefField

from ... import models as m
from ..base import CmdbRefField, CmdbSerializer
from .nested import (
    BriefNodeSerializer,
    BriefRackSerializer,
    BriefRoomSerializer,
    BriefSiteSerializer,
    BriefVendorSerializer,
)


class NodeSerializer(CmdbSerializer):
    # The rack's room and site come along for the validation of its position (one query for a whole batch).
    rack = CmdbRefField(queryset=m.Rack.objects.select_related("room__site"), allow_null=True, required=False)
    room = BriefField(BriefRoomSerializer, source="rack.room", help_text="The room of the node's rack.")

    class Meta:
        model = m.Node
        fields = "__all__"


class ComponentSerializer(CmdbSerializer):
    class Meta:
        model = m.Component
        fields = "__all__"


class NicSerializer(CmdbSerializer):
    class Meta:
        model = m.Nic
        fields = "__all__"


class NicPortSerializer(CmdbSerializer):
    node = BriefField(BriefNodeSerializer, source="nic.node", help_text="The node of the port's NIC.")

    class Meta:
        model = m.NicPort
        fields = "__all__"


class AcceleratorSerializer(CmdbSerializer):
    """A card with its whole context: node (id + hostname), rack, site, model and vendor.

    Moving a card (setting `node` + `slot_index`, `stock_location`, or a lifecycle of rma / scrapped /
    in_transit / failed) writes its placement history; `site` follows the node or stock location.
    """

    node = CmdbRefField(queryset=m.Node.objects.all(), allow_null=True, required=False)
    stock_location = CmdbRefField(queryset=m.StockLocation.objects.all(), allow_null=True, required=False)
    rack = BriefField(BriefRackSerializer, source="node.rack", help_text="The rack of the card's node.")
    vendor = BriefField(BriefVendorSerializer, source="model.vendor")
    site = BriefField(BriefSiteSerializer, help_text="Follows the node or stock location (read-only).")

    class Meta:
        model = m.Accelerator
        fields = "__all__"


class AcceleratorPlacementSerializer(CmdbSerializer):
    class Meta:
        model = m.AcceleratorPlacement
        fields = "__all__"
        read_only_fields = [f.name for f in m.AcceleratorPlacement._meta.concrete_fields]


class InstalledSoftwareSerializer(CmdbSerializer):
    class Meta:
        model = m.InstalledSoftware
        fields = "__all__"


class HealthEventSerializer(CmdbSerializer):
    class Meta:
        model = m.HealthEvent
        fields = "__all__"


class StockLocationSerializer(CmdbSerializer):
    class Meta:
        model = m.StockLocation
        fields = "__all__"


class PartItemSerializer(CmdbSerializer):
    class Meta:
        model = m.PartItem
        fields = "__all__"
