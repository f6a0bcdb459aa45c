"""Lifecycle reports of the capacity review (cmdb.lifecycle): warranties ending, idle cards, RMA turnaround."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gpuops.api.viewsets import ApiViewMixin

from ...lifecycle import LifecycleQueryError, days_param, idle_cards, rma_turnaround, warranty_ending


def _days(request: Request, name: str, default: int) -> int:
    try:
        return days_param(request.query_params, name, default)
    except LifecycleQueryError as exc:
        raise exceptions.ValidationError({exc.field: [str(exc)]}) from exc


class _Report(ApiViewMixin, APIView):
    permission_classes = [IsAuthenticated]


class WarrantyReportView(_Report):
    """Nodes and cards whose warranty ends in the next `days` days, by site and vendor, and the ones listed
    (first 200 by date; the lists' `?warranty_ends_within=` filter gives all)."""

    @extend_schema(
        tags=["reports"],
        parameters=[
            OpenApiParameter("days", int, description="Window from today (default 90)."),
            OpenApiParameter("site", str, description="Site code."),
            OpenApiParameter("vendor", str, description="Vendor slug (of the card, or of the server)."),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        report = warranty_ending(
            request.user,
            days=_days(request, "days", 90),
            site=params.get("site", "").strip(),
            vendor=params.get("vendor", "").strip(),
        )
        return Response(report.as_dict())


class IdleCardsView(_Report):
    """Installed cards on cluster nodes whose scheduler allocated none of them for `days` days, by tenant and
    cluster, with the nodes (first 200, longest idle first)."""

    @extend_schema(
        tags=["reports"],
        parameters=[
            OpenApiParameter("days", int, description="Idle for at least this many days (default 7)."),
            OpenApiParameter("site", str, description="Site code."),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        report = idle_cards(
            request.user, days=_days(request, "days", 7), site=request.query_params.get("site", "").strip()
        )
        return Response(report.as_dict())


class RmaTurnaroundView(_Report):
    """Per vendor: cards back from RMA in the last `days` days with how long they were away, and the cards at
    the vendor now."""

    @extend_schema(
        tags=["reports"],
        parameters=[OpenApiParameter("days", int, description="Returns in this many days (default 365).")],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        days = _days(request, "days", 365)
        rows = rma_turnaround(request.user, days=days)
        return Response({"days": days, "rows": [r.as_dict() for r in rows]})
