"""Fabric pages: the list of fabrics, one fabric's cabling report (planned vs observed), and its button that opens
a cabling repair ticket per fault."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from cmdb.models import Fabric
from cmdb.permissions import can, restrict

from .api import KIND_FILTERS
from .cabling import FindingKind
from .cabling_faults import cabling_faults
from .cabling_service import fabric_cabling_overview, fabric_cabling_overviews, findings_filter
from .cabling_tickets import (
    CablingTicketsRefused,
    cabling_tickets_by_port,
    cabling_tickets_may_open,
    cabling_tickets_open,
)
from .models import PollRun, PollStatus

TONES = {
    "ok": "done",
    "missing": "waiting",
    "miswired": "rejected",
    "unexpected": "approval",
    "unknown_neighbor": "new",
}


@login_required
def fabric_list(request: HttpRequest) -> HttpResponse:
    fabrics = list(
        restrict(Fabric.objects.select_related("site"), request.user, "view")
        .annotate(
            switch_count=Count("switches", distinct=True),
            link_count=Count("links", distinct=True),
        )
        .order_by("name")
    )
    last_polls = dict(
        PollRun.objects.filter(switch__fabric__isnull=False, status=PollStatus.OK)
        .values_list("switch__fabric")
        .annotate(last=Max("finished_at"))
    )
    # The problem count is the cabling page's own (one selector, all fabrics in the queries of one).
    cabling = fabric_cabling_overviews(fabrics, request.user)
    rows = [{"fabric": f, "last_poll": last_polls.get(f.pk), "cabling": cabling[f.pk]} for f in fabrics]
    return render(request, "switches/fabric_list.html", {"rows": rows})


def _filters(params: Mapping[str, str]) -> dict[str, str]:
    filters = {k: params.get(k, "").strip() for k in ("kind", "switch", "node")}
    if filters["kind"] not in ("", *KIND_FILTERS):
        filters["kind"] = ""
    return filters


@login_required
def fabric_cabling(request: HttpRequest, pk: int) -> HttpResponse:
    fabric = get_object_or_404(restrict(Fabric.objects.select_related("site"), request.user, "view"), pk=pk)
    overview = fabric_cabling_overview(fabric, request.user)
    findings = overview.findings
    filters = _filters(request.GET)
    shown = findings_filter(findings, filters)
    summary = overview.summary
    kinds = [(k.value, k.value.replace("_", " "), summary[k.value], TONES[k.value]) for k in FindingKind]
    shown_ids = {id(f) for f in shown}
    faults = [fault for fault in cabling_faults(findings) if any(id(f) in shown_ids for f in fault.findings)]
    tickets = cabling_tickets_by_port(request.user)  # the findings someone is already re-cabling, that they may see
    rows = [{"f": f, "tone": TONES[f.kind.value], "ticket": tickets.get(f"{f.switch}:{f.port}")} for f in shown]
    return render(
        request,
        "switches/fabric_cabling.html",
        {
            "fabric": fabric,
            "rows": rows,
            "summary": summary,
            "kinds": kinds,
            "filters": filters,
            "total": len(findings),
            "fault_count": len(faults),
            "problem_count": overview.problem_count,
            "can_open_tickets": cabling_tickets_may_open(request.user) and can(request.user, "change", fabric),
        },
    )


@login_required
@require_POST
def fabric_cabling_tickets(request: HttpRequest, pk: int) -> HttpResponse:
    """Open a cabling repair ticket per fault among the findings the page's filters show (POST, CSRF)."""
    fabric = get_object_or_404(restrict(Fabric.objects.all(), request.user, "view"), pk=pk)
    if not (cabling_tickets_may_open(request.user) and can(request.user, "change", fabric)):
        raise PermissionDenied("Opening cabling tickets needs change rights on the fabric.")
    filters = _filters(request.POST)
    try:
        results = cabling_tickets_open(fabric, requester=request.user, params=filters)
    except CablingTicketsRefused as exc:
        messages.error(request, "; ".join(exc.errors))
    else:
        created = [r.reference for r in results if r.outcome == "created"]
        existing = [r.reference for r in results if r.outcome == "existing"]
        skipped = [f"{r.fault.title}: {r.skipped.rstrip('.')}" for r in results if r.outcome == "skipped"]
        if created:
            messages.success(request, f"Opened {len(created)} cabling ticket(s): {', '.join(created)}.")
        if existing:
            messages.info(request, f"Already open for the other fault(s): {', '.join(existing)}.")
        if skipped:
            messages.warning(request, f"No ticket for {len(skipped)} fault(s): {'; '.join(skipped)}.")
        if not results:
            messages.info(request, "No cabling fault among the findings shown: no ticket opened.")
    query = urlencode({k: v for k, v in filters.items() if v})
    return HttpResponseRedirect(reverse("fabrics:fabric-cabling", args=[fabric.pk]) + (f"?{query}" if query else ""))
