"""The firmware and driver compliance report (cmdb.compliance): per-slice counts, per-component rows, CSV."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gpuops.api.viewsets import ApiViewMixin

from ...compliance import NODE_FILTERS, ROW_FIELDS, compliance_rows, compliance_scope, compliance_slices

PARAMETERS = [
    OpenApiParameter("site", str, description="Site code or id."),
    OpenApiParameter("cluster", str, description="Cluster name or id."),
    OpenApiParameter("tenant", str, description="Tenant slug or id."),
    OpenApiParameter("model", str, description="Server model name or id."),
    OpenApiParameter("hostname", str, description="Node hostname."),
    OpenApiParameter("component", str, description="Components, comma-separated (bios, bmc, nic, ..., nvidia-driver)."),
    OpenApiParameter(
        "status", str, description="Statuses, comma-separated: compliant, outdated, unknown, not_in_baseline."
    ),
]


def _scope(request: Request) -> Any:
    names = (*NODE_FILTERS, "component", "status")
    filters = {name: request.query_params[name] for name in names if name in request.query_params}
    try:
        return compliance_scope(user=request.user, filters=filters)
    except DjangoValidationError as exc:
        raise ValidationError(exc.message_dict) from exc


class SliceSerializer(serializers.Serializer):
    site = serializers.CharField()
    cluster = serializers.CharField()
    server_model = serializers.CharField()
    component = serializers.CharField()
    status = serializers.CharField()
    components = serializers.IntegerField()
    nodes = serializers.IntegerField()


class ComplianceSummarySerializer(serializers.Serializer):
    totals = serializers.DictField(child=serializers.IntegerField(), help_text="Status -> components.")
    nodes_outdated = serializers.IntegerField(help_text="Nodes with at least one outdated component.")
    slices = SliceSerializer(many=True)


class ComplianceRowSerializer(serializers.Serializer):
    node_id = serializers.IntegerField()
    hostname = serializers.CharField()
    component = serializers.CharField()
    device = serializers.CharField(help_text="Empty for driver packages.")
    model = serializers.CharField(help_text="The model the baseline is looked up for; empty for driver packages.")
    version = serializers.CharField()
    status = serializers.CharField()


class ComplianceRowPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = ComplianceRowSerializer(many=True)


class ComplianceSummaryView(ApiViewMixin, APIView):
    """Counts of firmware components and driver packages by site, cluster, server model, component and status."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        responses=ComplianceSummarySerializer,
        tags=["compliance"],
        operation_id="cmdb_compliance",
        parameters=PARAMETERS,
    )
    def get(self, request: Request) -> Response:
        return Response(compliance_slices(_scope(request)))


class ComplianceComponentsView(ApiViewMixin, APIView):
    """Each visible node's components with their status, by hostname (limit/offset pages)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        responses=ComplianceRowPageSerializer,
        tags=["compliance"],
        operation_id="cmdb_compliance_components",
        parameters=[
            *PARAMETERS,
            OpenApiParameter("limit", int, description="Rows per page (default 50, at most 1000)."),
            OpenApiParameter("offset", int, description="Rows to skip."),
        ],
    )
    def get(self, request: Request) -> Response:
        paginator = LimitOffsetPagination()
        paginator.default_limit, paginator.max_limit = 50, 1000
        page = paginator.paginate_queryset(compliance_rows(_scope(request)), request, view=self)
        return paginator.get_paginated_response(list(page or []))


class _Echo:
    def write(self, value: str) -> str:
        return value


class ComplianceCsvView(ApiViewMixin, APIView):
    """The component rows as CSV (every matching row, streamed)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        responses={
            (200, "text/csv"): OpenApiResponse(description="hostname, component, device, model, version, status")
        },
        tags=["compliance"],
        operation_id="cmdb_compliance_csv",
        parameters=PARAMETERS,
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        rows = compliance_rows(_scope(request))
        writer = csv.writer(_Echo())

        def lines() -> Iterator[str]:
            yield writer.writerow(ROW_FIELDS[1:])
            for row in rows.iterator(chunk_size=2000):
                yield writer.writerow([row[f] for f in ROW_FIELDS[1:]])

        response = StreamingHttpResponse(lines(), content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="compliance.csv"'
        return response
