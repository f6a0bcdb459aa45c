"""The fleet summary: counts for dashboards, computed with aggregate queries over what the user may see."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gpuops.api.viewsets import ApiViewMixin

from ...selectors import SUMMARY_FILTERS, fleet_summary


def _counts(help_text: str) -> serializers.DictField:
    return serializers.DictField(child=serializers.IntegerField(), help_text=help_text)


class AcceleratorCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    by_site = _counts("Site code -> cards ('none' for cards at a vendor or scrapped).")
    by_vendor = _counts("Vendor slug -> cards.")
    by_model = _counts("Accelerator model name -> cards.")
    by_health = _counts("ok / degraded / failed / unknown -> cards.")
    by_lifecycle = _counts("Lifecycle -> cards.")


class NodeCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    by_status = _counts("Node status -> nodes.")
    by_health = _counts("Node health -> nodes.")


class FleetSummarySerializer(serializers.Serializer):
    accelerators = AcceleratorCountsSerializer()
    nodes = NodeCountsSerializer()


class FleetSummaryView(ApiViewMixin, APIView):
    """Accelerator counts by site, vendor, model, health and lifecycle; node counts by status and health."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        responses=FleetSummarySerializer,
        tags=["summary"],
        operation_id="cmdb_summary_retrieve",
        parameters=[
            OpenApiParameter(name, str, description=text)
            for name, text in (
                ("site", "Site code or id."),
                ("cluster", "Cluster name or id."),
                ("tenant", "Tenant slug or id."),
                ("vendor", "Vendor slug or id (of the card or server)."),
                ("model", "Accelerator model name or id (nodes: those built for it)."),
            )
        ],
    )
    def get(self, request: Request) -> Response:
        filters = {name: request.query_params[name] for name in SUMMARY_FILTERS if name in request.query_params}
        return Response(fleet_summary(user=request.user, filters=filters))
