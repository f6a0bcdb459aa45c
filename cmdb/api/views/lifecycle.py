"""Lifecycle reports of the capacity review (cmdb.lifecycle): warranties ending, idle cards, RMA turnaround."""

from __future__ import annotations

import csv

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gpuops.api.viewsets import ApiViewMixin

from ...capacity import DIMENSIONS, STATES, CapacityQuery, card_hours
from ...lifecycle import ReportQueryError, days_param, idle_cards, rma_turnaround, warranty_ending


def _days(request: Request, name: str, default: int) -> int:
    try:
        return days_param(request.query_params, name, default)
    except ReportQueryError as exc:
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


def _capacity_query(request: Request) -> CapacityQuery:
    try:
        return CapacityQuery.from_params(request.query_params, today=timezone.localdate())
    except ReportQueryError as exc:
        raise exceptions.ValidationError({exc.field: [str(exc)]}) from exc


CAPACITY_PARAMETERS = [
    OpenApiParameter("from", str, description="First month, YYYY-MM (default: last month)."),
    OpenApiParameter("to", str, description="Last month, YYYY-MM, inclusive (default: the first)."),
    OpenApiParameter("by", str, enum=list(DIMENSIONS), description="Group by (default tenant)."),
]


class CardHoursView(_Report):
    """Card-hours by state (in service, idle, repair, RMA, burn-in, in stock, in transit, retired) and their cost
    per tenant, cluster, site, vendor or model, per month and in total, from the hourly rollup of the history."""

    @extend_schema(tags=["reports"], parameters=CAPACITY_PARAMETERS, responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        return Response(card_hours(request.user, _capacity_query(request)).as_dict())


class CardHoursCsvView(_Report):
    """The same rows as CSV: one line per group with hours and cost per state."""

    @extend_schema(
        tags=["reports"],
        parameters=CAPACITY_PARAMETERS,
        responses={(200, "text/csv"): OpenApiResponse(description="key, hours and cost per state, totals")},
        operation_id="cmdb_reports_card_hours_csv",
    )
    def get(self, request: Request) -> HttpResponse:
        report = card_hours(request.user, _capacity_query(request))
        response = HttpResponse(content_type="text/csv")
        response["Content-Disposition"] = (
            f'attachment; filename="card-hours-{report.query.start:%Y-%m}-{report.query.end:%Y-%m}.csv"'
        )
        writer = csv.writer(response)
        hours_heads, cost_heads = [f"{s}_hours" for s in STATES], [f"{s}_cost" for s in STATES]
        writer.writerow(
            [report.query.by, *hours_heads, "total_hours", *cost_heads, "total_cost", "cost_of_idle", "cost_of_repair"]
        )
        for row in [*report.rows, report.total]:
            data = row.as_dict()
            hours, costs = [data["hours"][s] for s in STATES], [data["cost"][s] for s in STATES]
            totals = [data["total_cost"], data["idle_cost"], data["repair_cost"]]
            writer.writerow([data["key"], *hours, data["total_hours"], *costs, *totals])
        return response
