"""Ticket-page parts of learning from failures and change governance: the incident postmortem (form, action
items, Markdown download), the repeat-offender hint on repairs, the maintenance windows and emergency approval
of change tickets. Thin: the services decide (workflows.services.postmortems / governance)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from cmdb.services.windows import format_period, windows_upcoming

from .failures import REPEAT_WINDOW, slot_failures, slot_hint
from .models import Ticket
from .permissions import can_change, has_ticket_perm
from .registry import workflow_or_none
from .selectors import ticket_get
from .services.governance import (
    EMERGENCY_KEY,
    EMERGENCY_PERMISSION,
    change_scope_ids,
    change_window_errors,
    emergency_approval_record,
)
from .services.postmortems import (
    postmortem_action_add,
    postmortem_markdown,
    postmortem_report,
    postmortem_save,
    root_causes_offered,
)

POSTMORTEM_FIELDS = (
    "summary",
    "root_cause",
    "root_cause_detail",
    "started_at",
    "ended_at",
    "window_hours",
    "impact_nodes",
    "impact_cards",
    "impact_tenants",
    "impact_minutes",
)


def learning_context(request: HttpRequest, ticket: Ticket) -> dict[str, Any]:
    """What the ticket page adds for incidents (postmortem), repairs (repeat offender) and changes (windows)."""
    context: dict[str, Any] = {}
    wf = workflow_or_none(ticket.type)
    if ticket.type == "incident":
        context["postmortem"] = postmortem_report(ticket, request.user)
        context["root_causes"] = root_causes_offered()
        context["postmortem_editable"] = ticket.is_open and (
            can_change(request.user, ticket) or has_ticket_perm(request.user, "incident_work", ticket)
        )
    if ticket.type == "repair" and ticket.data.get("node_id") and ticket.data.get("slot_index") is not None:
        cards = slot_failures(int(ticket.data["node_id"]), int(ticket.data["slot_index"]), at=timezone.now())
        if cards >= 2:
            context["slot_hint"] = slot_hint(cards, REPEAT_WINDOW.days)
    if wf is not None and wf.is_change and ticket.is_open:
        site_ids, cluster_ids = change_scope_ids(ticket, wf)
        starts = [wf.transition(name) for name in sorted(wf.window_transitions)]
        context["governance"] = {
            "emergency": ticket.data.get(EMERGENCY_KEY),
            "may_grant_emergency": has_ticket_perm(request.user, EMERGENCY_PERMISSION, ticket)
            and ticket.requester_id != request.user.pk,
            "refusals": change_window_errors(ticket, wf, starts[0]) if starts else [],
            "upcoming": [
                {"window": w, "period": format_period(s.astimezone(w.zone()), e.astimezone(w.zone()))}
                for w, s, e in windows_upcoming(site_ids=site_ids, cluster_ids=cluster_ids)
            ],
        }
    return context


def _incident_or_404(request: HttpRequest, pk: int) -> Ticket:
    ticket = ticket_get(request.user, pk)
    if ticket is None or ticket.type != "incident":
        raise Http404("No such incident.")
    return ticket


def _back(ticket: Ticket, anchor: str = "") -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("workflows:ticket-detail", args=[ticket.pk]) + anchor)


def _refused(request: HttpRequest, ticket: Ticket, exc: Exception) -> HttpResponse:
    """Bad input: back to the ticket with the service's reasons (like the ticket page's other forms); a missing
    right or a closed ticket: 403 / 409 naming why."""
    from . import engine

    errors = getattr(exc, "errors", [str(exc)])
    if isinstance(exc, engine.ForbiddenError | engine.NotAllowedError):
        code = 403 if isinstance(exc, engine.ForbiddenError) else 409
        return HttpResponse("; ".join(errors), status=code, content_type="text/plain; charset=utf-8")
    for message in errors:
        messages.error(request, message)
    return _back(ticket, "#postmortem")


def markdown_response(ticket: Ticket, user: Any) -> HttpResponse:
    """The postmortem as a Markdown download (the page's link and the API's endpoint)."""
    response = HttpResponse(
        postmortem_markdown(postmortem_report(ticket, user)), content_type="text/markdown; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="postmortem-{ticket.reference}.md"'
    return response


@login_required
@require_POST
def postmortem_save_view(request: HttpRequest, pk: int) -> HttpResponse:
    from .engine import WorkflowError

    ticket = _incident_or_404(request, pk)
    data = {k: request.POST[k] for k in POSTMORTEM_FIELDS if k in request.POST}
    try:
        postmortem_save(ticket=ticket, actor=request.user, data=data)
    except WorkflowError as exc:
        return _refused(request, ticket, exc)
    messages.success(request, "Postmortem saved.")
    return _back(ticket, "#postmortem")


@login_required
@require_POST
def postmortem_action_view(request: HttpRequest, pk: int) -> HttpResponse:
    from .engine import WorkflowError

    ticket = _incident_or_404(request, pk)
    try:
        follow_up = postmortem_action_add(
            ticket=ticket,
            actor=request.user,
            title=request.POST.get("title", ""),
            description=request.POST.get("description", ""),
            priority=request.POST.get("priority") or "normal",
        )
    except WorkflowError as exc:
        return _refused(request, ticket, exc)
    messages.success(request, f"Action item {follow_up.reference} opened.")
    return _back(ticket, "#postmortem")


@login_required
def postmortem_markdown_view(request: HttpRequest, pk: int) -> HttpResponse:
    return markdown_response(_incident_or_404(request, pk), request.user)


@login_required
@require_POST
def emergency_approval_view(request: HttpRequest, pk: int) -> HttpResponse:
    from .engine import WorkflowError

    ticket = ticket_get(request.user, pk)
    if ticket is None:
        raise Http404("No such ticket.")
    try:
        emergency_approval_record(ticket=ticket, actor=request.user, reason=request.POST.get("reason", ""))
    except WorkflowError as exc:
        return _refused(request, ticket, exc)
    messages.success(request, "Emergency change approved: it may start outside the maintenance windows.")
    return _back(ticket)
