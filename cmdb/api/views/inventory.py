"""CMDB model endpoints: declarations on the CMDB base viewset (queryset, serializer, filters, joins)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers as drf_serializers
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from gpuops.api.etag import check_if_match

from ... import filtersets as f
from ... import models as m
from ...selectors import change_list, node_history
from ...services.nodes import node_cordon, node_uncordon
from ...services.topology import node_topology_current, topology_departures
from .. import serializers as s
from ..base import CmdbReadOnlyViewSet, CmdbViewSet
from ..changefeed import ChangeFeedPagination
from ..writers import override_requested

# --- locations and organisation --------------------------------------------------------------------------------


class SiteViewSet(CmdbViewSet):
    queryset = m.Site.objects.all()
    serializer_class = s.SiteSerializer
    filterset_class = f.SiteFilterSet


class RoomViewSet(CmdbViewSet):
    queryset = m.Room.objects.all()
    serializer_class = s.RoomSerializer
    filterset_class = f.RoomFilterSet
    select_related = ("site",)


class RackViewSet(CmdbViewSet):
    queryset = m.Rack.objects.all()
    serializer_class = s.RackSerializer
    filterset_class = f.RackFilterSet
    select_related = ("room__site",)


class ClusterViewSet(CmdbViewSet):
    queryset = m.Cluster.objects.all()
    serializer_class = s.ClusterSerializer
    filterset_class = f.ClusterFilterSet
    select_related = ("site",)


class TenantViewSet(CmdbViewSet):
    queryset = m.Tenant.objects.all()
    serializer_class = s.TenantSerializer
    filterset_class = f.TenantFilterSet


# --- catalog -----------------------------------------------------------------------------------------------------


class VendorViewSet(CmdbViewSet):
    queryset = m.Vendor.objects.all()
    serializer_class = s.VendorSerializer
    filterset_class = f.VendorFilterSet


class AcceleratorModelViewSet(CmdbViewSet):
    queryset = m.AcceleratorModel.objects.all()
    serializer_class = s.AcceleratorModelSerializer
    filterset_class = f.AcceleratorModelFilterSet
    select_related = ("vendor",)


class ServerModelViewSet(CmdbViewSet):
    queryset = m.ServerModel.objects.all()
    serializer_class = s.ServerModelSerializer
    filterset_class = f.ServerModelFilterSet
    select_related = ("vendor", "accelerator_model")


class PartModelViewSet(CmdbViewSet):
    queryset = m.PartModel.objects.all()
    serializer_class = s.PartModelSerializer
    filterset_class = f.PartModelFilterSet
    select_related = ("vendor",)


class TagViewSet(CmdbViewSet):
    queryset = m.Tag.objects.all()
    serializer_class = s.TagSerializer
    filterset_class = f.TagFilterSet


class DriverPackageViewSet(CmdbViewSet):
    queryset = m.DriverPackage.objects.all()
    serializer_class = s.DriverPackageSerializer
    filterset_class = f.DriverPackageFilterSet
    select_related = ("vendor",)
    prefetch_related = ("supported_models",)


class FirmwareBaselineViewSet(CmdbViewSet):
    """Approved firmware / driver versions per model (docs/compliance.md); history under /changes/."""

    queryset = m.FirmwareBaseline.objects.all()
    serializer_class = s.FirmwareBaselineSerializer
    filterset_class = f.FirmwareBaselineFilterSet


class HealthPolicyViewSet(CmdbViewSet):
    queryset = m.HealthPolicy.objects.all()
    serializer_class = s.HealthPolicySerializer
    filterset_class = f.HealthPolicyFilterSet
    select_related = ("vendor",)


# --- nodes -------------------------------------------------------------------------------------------------------


class CordonSerializer(drf_serializers.Serializer):
    reason = drf_serializers.CharField(max_length=300, help_text="Why the node is unschedulable.")


class TopologyDepartureSerializer(drf_serializers.Serializer):
    a = drf_serializers.CharField()
    b = drf_serializers.CharField()
    expected = drf_serializers.CharField()
    actual = drf_serializers.CharField(allow_null=True)
    message = drf_serializers.CharField()


class NodeTopologySerializer(drf_serializers.Serializer):
    node = drf_serializers.CharField()
    sources = drf_serializers.ListField(child=drf_serializers.CharField())
    devices = drf_serializers.ListField(child=drf_serializers.DictField())
    links = drf_serializers.ListField(child=drf_serializers.DictField())
    updated_at = drf_serializers.DateTimeField()
    version = drf_serializers.IntegerField()
    has_expected = drf_serializers.BooleanField()
    departures = TopologyDepartureSerializer(many=True)


@extend_schema_view(
    topology=extend_schema(
        summary="The node's reported topology and its departures from the server model's expected one",
        responses=NodeTopologySerializer,
    ),
    history=extend_schema(
        summary="The node's change records, newest first", responses=s.ChangeRecordSerializer(many=True)
    ),
    cordon=extend_schema(summary="Cordon the node (unschedulable, with a reason)", request=CordonSerializer),
    uncordon=extend_schema(summary="Uncordon the node", request=None),
)
class NodeViewSet(CmdbViewSet):
    hold_override = True  # writes take ?override_hold=1 (cmdb.holds)
    queryset = m.Node.objects.all()
    serializer_class = s.NodeSerializer
    filterset_class = f.NodeFilterSet
    select_related = ("site", "rack__room__site", "cluster", "tenant", "server_model")
    prefetch_related = ("tags",)

    @action(detail=True, methods=["get"], filter_backends=[])
    def history(self, request: Request, pk: Any = None) -> Response:
        node = self.get_object()
        page = self.paginate_queryset(node_history(node=node))
        data = s.ChangeRecordSerializer(page, many=True, context=self.get_serializer_context()).data
        return self.get_paginated_response(data)

    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def topology(self, request: Request, pk: Any = None) -> Response:
        """The node's last reported topology and its departures from the server model's expected one
        (read-only; the agent writes it). 404 when the node is outside the caller's scope or reported none."""
        node = self.get_object()
        current = node_topology_current(node)
        if current is None:
            raise NotFound(f"{node.hostname} has reported no topology.")
        expected = node.server_model.expected_topology if node.server_model else {}
        departures = topology_departures(expected, {"links": current.links, "devices": current.devices})
        return Response(
            {
                "node": node.hostname,
                "sources": current.sources,
                "devices": current.devices,
                "links": current.links,
                "updated_at": current.updated_at,
                "version": current.version,
                "has_expected": bool(expected and expected.get("links")),
                "departures": [
                    {"a": d.a, "b": d.b, "expected": d.expected, "actual": d.actual, "message": d.message}
                    for d in departures
                ],
            }
        )

    @action(detail=True, methods=["post"], filter_backends=[])
    def cordon(self, request: Request, pk: Any = None) -> Response:
        body = CordonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        with transaction.atomic():
            node = self.get_object()
            check_if_match(request, self.lock([node.pk])[node.pk])
            node = node_cordon(
                node=node, reason=body.validated_data["reason"], override_hold=override_requested(request)
            )
        return self._respond(self.refetch([node])[0])

    @action(detail=True, methods=["post"], filter_backends=[])
    def uncordon(self, request: Request, pk: Any = None) -> Response:
        with transaction.atomic():
            node = self.get_object()
            check_if_match(request, self.lock([node.pk])[node.pk])
            node = node_uncordon(node=node, override_hold=override_requested(request))
        return self._respond(self.refetch([node])[0])


class ComponentViewSet(CmdbViewSet):
    queryset = m.Component.objects.all()
    serializer_class = s.ComponentSerializer
    filterset_class = f.ComponentFilterSet
    select_related = ("node",)


class NicViewSet(CmdbViewSet):
    queryset = m.Nic.objects.all()
    serializer_class = s.NicSerializer
    filterset_class = f.NicFilterSet
    select_related = ("node",)


class NicPortViewSet(CmdbViewSet):
    queryset = m.NicPort.objects.all()
    serializer_class = s.NicPortSerializer
    filterset_class = f.NicPortFilterSet
    select_related = ("nic__node",)


class InstalledSoftwareViewSet(CmdbViewSet):
    queryset = m.InstalledSoftware.objects.all()
    serializer_class = s.InstalledSoftwareSerializer
    filterset_class = f.InstalledSoftwareFilterSet
    select_related = ("node", "package")


class HealthEventViewSet(CmdbViewSet):
    queryset = m.HealthEvent.objects.all()
    serializer_class = s.HealthEventSerializer
    filterset_class = f.HealthEventFilterSet
    select_related = ("node", "accelerator")


# --- accelerators ------------------------------------------------------------------------------------------------


class AcceleratorViewSet(CmdbViewSet):
    hold_override = True  # card moves take ?override_hold=1 (cmdb.holds)
    queryset = m.Accelerator.objects.all()
    serializer_class = s.AcceleratorSerializer
    filterset_class = f.AcceleratorFilterSet
    select_related = ("model__vendor", "site", "node__rack", "stock_location")


class AcceleratorPlacementViewSet(CmdbReadOnlyViewSet):
    """Where each card has been (append-only; written by moves of accelerators)."""

    queryset = m.AcceleratorPlacement.objects.all()
    serializer_class = s.AcceleratorPlacementSerializer
    filterset_class = f.AcceleratorPlacementFilterSet
    select_related = ("accelerator", "node", "stock_location", "actor")


# --- stock -------------------------------------------------------------------------------------------------------


class StockLocationViewSet(CmdbViewSet):
    queryset = m.StockLocation.objects.all()
    serializer_class = s.StockLocationSerializer
    filterset_class = f.StockLocationFilterSet
    select_related = ("site", "parent")


class PartItemViewSet(CmdbViewSet):
    queryset = m.PartItem.objects.all()
    serializer_class = s.PartItemSerializer
    filterset_class = f.PartItemFilterSet
    select_related = ("part_model", "stock_location", "node")


# --- network -----------------------------------------------------------------------------------------------------


class FabricViewSet(CmdbViewSet):
    queryset = m.Fabric.objects.all()
    serializer_class = s.FabricSerializer
    filterset_class = f.FabricFilterSet
    select_related = ("site",)


class SwitchViewSet(CmdbViewSet):
    queryset = m.Switch.objects.all()
    serializer_class = s.SwitchSerializer
    filterset_class = f.SwitchFilterSet
    select_related = ("vendor", "site", "rack__room__site", "fabric")
    prefetch_related = ("tags",)


class SwitchPortViewSet(CmdbViewSet):
    queryset = m.SwitchPort.objects.all()
    serializer_class = s.SwitchPortSerializer
    filterset_class = f.SwitchPortFilterSet
    select_related = ("switch",)


class LinkViewSet(CmdbViewSet):
    queryset = m.Link.objects.all()
    serializer_class = s.LinkSerializer
    filterset_class = f.LinkFilterSet
    select_related = ("fabric", "a_nic_port__nic__node", "a_switch_port__switch", "b_switch_port__switch")


# --- history -----------------------------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(
        description="The global change history (needs the global "
        "cmdb.view_changerecord permission; a node's own history is at "
        "/nodes/{id}/history/)."
    )
)
class ChangeRecordViewSet(CmdbReadOnlyViewSet):
    queryset = m.ChangeRecord.objects.all()
    serializer_class = s.ChangeRecordSerializer
    filterset_class = f.ChangeRecordFilterSet
    # ?mode=cursor follows the feed order and never skips a row committed late (cmdb/changefeed.py).
    pagination_class = ChangeFeedPagination

    def get_queryset(self):  # type: ignore[override]
        return change_list(user=self.request.user)


__all__ = [
    "AcceleratorModelViewSet",
    "AcceleratorPlacementViewSet",
    "AcceleratorViewSet",
    "ChangeRecordViewSet",
    "ClusterViewSet",
    "ComponentViewSet",
    "DriverPackageViewSet",
    "FabricViewSet",
    "FirmwareBaselineViewSet",
    "HealthEventViewSet",
    "HealthPolicyViewSet",
    "InstalledSoftwareViewSet",
    "LinkViewSet",
    "NicPortViewSet",
    "NicViewSet",
    "NodeViewSet",
    "PartItemViewSet",
    "PartModelViewSet",
    "RackViewSet",
    "RoomViewSet",
    "ServerModelViewSet",
    "SiteViewSet",
    "StockLocationViewSet",
    "SwitchPortViewSet",
    "SwitchViewSet",
    "TagViewSet",
    "TenantViewSet",
    "VendorViewSet",
]
