"""Fabric pages: the list of fabrics and one fabric's cabling report (planned vs observed)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Max, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from cmdb.models import Fabric

from .api import KIND_CHOICES, findings_filter, summary_dict
from .cabling import FindingKind
from .cabling_service import fabric_cabling_report
from .models import PollRun, PollStatus

TONES = {"ok": "done", "missing": "waiting", "miswired": "rejected", "unexpected": "approval",
         "unknown_neighbor": "new"}


@login_required
def fabric_list(request: HttpRequest) -> HttpResponse:
    fabrics = (Fabric.objects.select_related("site")
               .annotate(switch_count=Count("switches", distinct=True), link_count=Count("links", distinct=True),
                         mismatch_count=Count("links", filter=Q(links__status="mismatch"), distinct=True))
               .order_by("name"))
    last_polls = dict(PollRun.objects.filter(switch__fabric__isnull=False, status=PollStatus.OK)
                      .values_list("switch__fabric").annotate(last=Max("finished_at")))
    rows = [{"fabric": f, "last_poll": last_polls.get(f.pk)} for f in fabrics]
    return render(request, "switches/fabric_list.html", {"rows": rows})


@login_required
def fabric_cabling(request: HttpRequest, pk: int) -> HttpResponse:
    fabric = get_object_or_404(Fabric.objects.select_related("site"), pk=pk)
    findings = fabric_cabling_report(fabric)
    filters = {k: request.GET.get(k, "").strip() for k in ("kind", "switch", "node")}
    if filters["kind"] not in ("", "problems", *KIND_CHOICES):
        filters["kind"] = ""
    shown = findings_filter(findings, filters)
    summary = summary_dict(findings)
    kinds = [(k.value, k.value.replace("_", " "), summary[k.value], TONES[k.value]) for k in FindingKind]
    return render(request, "switches/fabric_cabling.html", {
        "fabric": fabric, "rows": [{"f": f, "tone": TONES[f.kind.value]} for f in shown], "summary": summary,
        "kinds": kinds, "filters": filters, "total": len(findings),
    })
