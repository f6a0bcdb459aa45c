"""Cabling report API: `GET fabrics/<id>/cabling/` (summary + filtered findings) and
`POST fabrics/<id>/cabling/tickets/` (one cabling repair ticket per cabling fault, deduplicated; a fault the
ticket type refuses is listed as skipped, with the reason, and does not stop the others)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cmdb.models import Fabric
from cmdb.permissions import can, restrict
from gpuops.api.viewsets import ApiViewMixin

from .cabling import Finding, FindingKind
from .cabling_faults import FaultKind
from .cabling_service import cabling_summary, fabric_cabling_report, findings_filter, findings_visible
from .cabling_tickets import CablingTicketsForbidden, CablingTicketsRefused, FaultTicket, cabling_tickets_open

__all__ = ["KIND_CHOICES", "KIND_FILTERS", "FabricCablingTicketsView", "FabricCablingView", "summary_dict"]

KIND_CHOICES = [k.value for k in FindingKind]
KIND_FILTERS = [*KIND_CHOICES, "problems"]  # what the report's `kind` filter takes: a finding kind, or any problem


# --- serialising (shared with the HTML views) -----------------------------------------------------------------


def finding_dict(f: Finding) -> dict[str, Any]:
    return {
        "kind": f.kind.value,
        "switch": f.switch,
        "port": f.port,
        "expected": str(f.expected) if f.expected else None,
        "found": str(f.found) if f.found else (str(f.observed) if f.observed else None),
        "swap_partner": str(f.swap_partner) if f.swap_partner else None,
        "rail_violation": f.rail_violation or None,
        "conflict": f.conflict or None,
        "elsewhere": str(f.elsewhere) if f.elsewhere else None,
        "message": f.message,
    }


def summary_dict(findings: Iterable[Finding]) -> dict[str, Any]:
    return cabling_summary(findings)


# --- serializers ----------------------------------------------------------------------------------------------


class CablingSummarySerializer(serializers.Serializer):
    ok = serializers.IntegerField()
    missing = serializers.IntegerField()
    miswired = serializers.IntegerField()
    unexpected = serializers.IntegerField()
    unknown_neighbor = serializers.IntegerField()
    rail_violations = serializers.IntegerField()
    problems = serializers.IntegerField(help_text="Findings that are not ok.")


class CablingFindingSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=KIND_CHOICES)
    switch = serializers.CharField()
    port = serializers.CharField()
    expected = serializers.CharField(allow_null=True, help_text="Planned peer, device:port.")
    found = serializers.CharField(allow_null=True, help_text="Observed peer, device:port.")
    swap_partner = serializers.CharField(allow_null=True, help_text="The crossed port, switch:port.")
    rail_violation = serializers.CharField(allow_null=True)
    conflict = serializers.CharField(allow_null=True, help_text="How the switch's and the host's view disagree.")
    elsewhere = serializers.CharField(
        allow_null=True, help_text="Where the planned peer's host reports its cable, switch:port."
    )
    message = serializers.CharField()


class CablingReportSerializer(serializers.Serializer):
    fabric = serializers.CharField()
    fabric_id = serializers.IntegerField()
    summary = CablingSummarySerializer(help_text="Counts over all findings, before filtering.")
    count = serializers.IntegerField(help_text="Findings after filtering.")
    findings = CablingFindingSerializer(many=True)


class CablingTicketSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=[k.value for k in FaultKind],
        help_text="crossed (two cables to swap), moved (one cable to move), miswired, missing or unexpected.",
    )
    ports = serializers.ListField(child=serializers.CharField(), help_text="The fault's switch ports, switch:port.")
    title = serializers.CharField()
    ticket = serializers.CharField(help_text="Ticket reference, e.g. CAB-12.")
    ticket_id = serializers.IntegerField()


class CablingSkippedFaultSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=[k.value for k in FaultKind])
    ports = serializers.ListField(child=serializers.CharField(), help_text="The fault's switch ports, switch:port.")
    title = serializers.CharField()
    reason = serializers.CharField(help_text="Why no ticket was opened.")


class CablingTicketsSerializer(serializers.Serializer):
    created = CablingTicketSerializer(many=True)
    existing = CablingTicketSerializer(many=True, help_text="Faults that already have an open cabling ticket.")
    skipped = CablingSkippedFaultSerializer(many=True, help_text="Faults the ticket type refused: no ticket.")


FILTERS = [
    OpenApiParameter("kind", str, enum=KIND_FILTERS, description="Finding kind, or 'problems'."),
    OpenApiParameter("switch", str, description="Switch name contains."),
    OpenApiParameter("node", str, description="Planned or found node host name contains."),
]


# --- views ----------------------------------------------------------------------------------------------------


class FabricCablingView(ApiViewMixin, APIView):
    """Planned vs observed cabling of one fabric."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="fabric_cabling_report", parameters=FILTERS, responses=CablingReportSerializer, tags=["switches"]
    )
    def get(self, request: Request, pk: int) -> Response:
        fabric = get_object_or_404(restrict(Fabric.objects.all(), request.user, "view"), pk=pk)
        _kind_checked(request.query_params)
        findings = findings_visible(fabric_cabling_report(fabric), request.user)
        shown = findings_filter(findings, request.query_params)
        return Response(
            CablingReportSerializer(
                {
                    "fabric": fabric.name,
                    "fabric_id": fabric.pk,
                    "summary": summary_dict(findings),
                    "count": len(shown),
                    "findings": [finding_dict(f) for f in shown],
                }
            ).data
        )


def fault_ticket_dict(result: FaultTicket) -> dict[str, Any]:
    fault = {
        "kind": result.fault.kind.value,
        "ports": [str(p) for p in result.fault.ports],
        "title": result.fault.title,
    }
    if result.skipped:
        return {**fault, "reason": result.skipped}
    return {**fault, "ticket": result.reference, "ticket_id": result.ticket_id}


def _kind_checked(params: Mapping[str, Any]) -> None:
    kind = params.get("kind", "")
    if kind and kind not in KIND_FILTERS:
        raise exceptions.ValidationError({"kind": [f"One of {', '.join(KIND_FILTERS)}."]})


class FabricCablingTicketsView(ApiViewMixin, APIView):
    """Open one cabling repair ticket per cabling fault (a crossed pair is one fault); a fault with an open
    ticket gets no second one, and a fault the ticket type refuses is skipped with the reason."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="fabric_cabling_tickets",
        request=None,
        parameters=FILTERS,
        tags=["switches"],
        responses={201: CablingTicketsSerializer, 200: CablingTicketsSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        fabric = get_object_or_404(restrict(Fabric.objects.all(), request.user, "view"), pk=pk)
        if not can(request.user, "change", fabric):
            raise exceptions.PermissionDenied("Opening cabling tickets needs change rights on the fabric.")
        # The report's filters narrow which faults get a ticket: from the query string or the body.
        body = request.data if isinstance(request.data, Mapping) else {}
        params = {k: request.query_params.get(k) or str(body.get(k) or "") for k in ("kind", "switch", "node")}
        _kind_checked(params)
        try:
            results = cabling_tickets_open(fabric, requester=request.user, params=params)
        except CablingTicketsForbidden as exc:
            raise exceptions.PermissionDenied(exc.errors[0]) from exc
        except CablingTicketsRefused as exc:
            raise exceptions.ValidationError({"non_field_errors": list(exc.errors)}) from exc
        by_outcome: dict[str, list[dict[str, Any]]] = {"created": [], "existing": [], "skipped": []}
        for r in results:
            by_outcome[r.outcome].append(fault_ticket_dict(r))
        return Response(
            CablingTicketsSerializer(by_outcome).data,
            status=status.HTTP_201_CREATED if by_outcome["created"] else status.HTTP_200_OK,
        )
