"""Cabling report API: `GET fabrics/<id>/cabling/` (summary + filtered findings) and
`POST fabrics/<id>/cabling/tickets/` (one incident ticket per miswired switch port, deduplicated)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cmdb.models import Fabric, Link, Node, Switch

from .cabling import CablingSummary, Finding, FindingKind, device_key
from .cabling_service import fabric_cabling_report

KIND_CHOICES = [k.value for k in FindingKind]


# --- filtering and serialising (shared with the HTML views) ---------------------------------------------------

def findings_filter(findings: Iterable[Finding], params: Mapping[str, Any]) -> list[Finding]:
    """`kind` (a finding kind, or `problems`), `switch` (name contains), `node` (expected or found host name
    contains); empty values do not filter."""
    kind = (params.get("kind") or "").strip()
    switch = (params.get("switch") or "").strip().lower()
    node = device_key(params.get("node") or "")
    out = []
    for f in findings:
        if kind == "problems" and not f.is_problem:
            continue
        if kind and kind != "problems" and f.kind.value != kind:
            continue
        if switch and switch not in f.switch.lower():
            continue
        if node and not any(ep is not None and ep.kind == "node" and node in ep.device.lower()
                            for ep in (f.expected, f.found)):
            continue
        out.append(f)
    return out


def finding_dict(f: Finding) -> dict[str, Any]:
    return {
        "kind": f.kind.value, "switch": f.switch, "port": f.port,
        "expected": str(f.expected) if f.expected else None,
        "found": str(f.found) if f.found else (str(f.observed) if f.observed else None),
        "swap_partner": str(f.swap_partner) if f.swap_partner else None,
        "rail_violation": f.rail_violation or None, "conflict": f.conflict or None,
        "elsewhere": str(f.elsewhere) if f.elsewhere else None, "message": f.message,
    }


def summary_dict(findings: Iterable[Finding]) -> dict[str, Any]:
    summary = CablingSummary.of(findings)
    problems = sum(v for k, v in summary.counts.items() if k != FindingKind.OK.value)
    return {**summary.counts, "rail_violations": summary.rail_violations, "problems": problems}


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
    elsewhere = serializers.CharField(allow_null=True,
                                      help_text="Where the planned peer's host reports its cable, switch:port.")
    message = serializers.CharField()


class CablingReportSerializer(serializers.Serializer):
    fabric = serializers.CharField()
    fabric_id = serializers.IntegerField()
    summary = CablingSummarySerializer(help_text="Counts over all findings, before filtering.")
    count = serializers.IntegerField(help_text="Findings after filtering.")
    findings = CablingFindingSerializer(many=True)


class CablingTicketSerializer(serializers.Serializer):
    switch = serializers.CharField()
    port = serializers.CharField()
    ticket = serializers.CharField(help_text="Ticket reference, e.g. INC-12.")
    ticket_id = serializers.IntegerField()


class CablingTicketsSerializer(serializers.Serializer):
    created = CablingTicketSerializer(many=True)
    existing = CablingTicketSerializer(many=True, help_text="Miswires that already have an open ticket.")


FILTERS = [
    OpenApiParameter("kind", str, enum=[*KIND_CHOICES, "problems"], description="Finding kind, or 'problems'."),
    OpenApiParameter("switch", str, description="Switch name contains."),
    OpenApiParameter("node", str, description="Planned or found node host name contains."),
]


# --- views ----------------------------------------------------------------------------------------------------

class FabricCablingView(APIView):
    """Planned vs observed cabling of one fabric."""

    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="fabric_cabling_report", parameters=FILTERS, responses=CablingReportSerializer,
                   tags=["switches"])
    def get(self, request: Request, pk: int) -> Response:
        fabric = get_object_or_404(Fabric, pk=pk)
        kind = request.query_params.get("kind", "")
        if kind and kind not in (*KIND_CHOICES, "problems"):
            raise exceptions.ValidationError({"kind": [f"One of {', '.join([*KIND_CHOICES, 'problems'])}."]})
        findings = fabric_cabling_report(fabric)
        shown = findings_filter(findings, request.query_params)
        return Response(CablingReportSerializer({
            "fabric": fabric.name, "fabric_id": fabric.pk, "summary": summary_dict(findings), "count": len(shown),
            "findings": [finding_dict(f) for f in shown],
        }).data)


def cabling_dedup_key(fabric: Fabric, switch: str, port: str) -> str:
    return f"cabling:{fabric.pk}:{switch}:{port}"


class FabricCablingTicketsView(APIView):
    """Open one incident ticket per miswired switch port; a port with an open ticket gets no second one."""

    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="fabric_cabling_tickets", request=None, tags=["switches"],
                   responses={201: CablingTicketsSerializer, 200: CablingTicketsSerializer})
    def post(self, request: Request, pk: int) -> Response:
        from workflows import engine
        from workflows.models import LinkRole, Ticket

        fabric = get_object_or_404(Fabric, pk=pk)
        miswired = [f for f in fabric_cabling_report(fabric) if f.kind == FindingKind.MISWIRED]
        switches = {s.name: s for s in Switch.objects.filter(fabric=fabric, name__in={f.switch for f in miswired})}
        created, existing = [], []
        for f in miswired:
            key = cabling_dedup_key(fabric, f.switch, f.port)
            twin = Ticket.objects.filter(dedup_key=key, is_open=True).first()
            if twin is not None:
                existing.append({"switch": f.switch, "port": f.port, "ticket": twin.reference, "ticket_id": twin.pk})
                continue
            links: list[tuple[str, Any]] = []
            if (switch := switches.get(f.switch)) is not None:
                links.append((LinkRole.SUBJECT, switch))
            planned = Link.objects.filter(b_switch_port__switch__name=f.switch, b_switch_port__name=f.port).first()
            if planned is not None:
                links.append((LinkRole.RELATED, planned))
            hosts = [ep.device for ep in (f.expected, f.found) if ep is not None and ep.kind == "node"]
            links += [(LinkRole.SUBJECT, n) for n in Node.objects.filter(hostname__in=hosts).order_by("hostname")]
            title = f"Miswired cable on {f.switch}:{f.port}"
            description = "\n".join([
                f"Cabling validation of fabric {fabric.name} found a miswire.", "",
                f"- expected: {f.expected}", f"- found: {f.found}",
                *([f"- crossed with: {f.swap_partner}"] if f.swap_partner else []),
                *([f"- the views disagree: {f.conflict}"] if f.conflict else []),
                *([f"- {f.rail_violation}"] if f.rail_violation else []),
            ])
            try:
                with transaction.atomic():
                    ticket = engine.ticket_create(type_="incident", title=title, description=description,
                                                  requester=request.user, links=links, dedup_key=key,
                                                  priority="high")
            except engine.ForbiddenError as exc:
                raise exceptions.PermissionDenied(exc.errors[0]) from exc
            except engine.WorkflowError as exc:
                raise exceptions.ValidationError({"non_field_errors": list(exc.errors)}) from exc
            created.append({"switch": f.switch, "port": f.port, "ticket": ticket.reference, "ticket_id": ticket.pk})
        return Response(CablingTicketsSerializer({"created": created, "existing": existing}).data,
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
