"""The ticket UI: list, create, detail (with a live htmx partial), transitions, approvals, comments and the
operator actions. Views are thin: they parse the request, call engine services, and render."""

from __future__ import annotations

import functools
import logging
import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.template import TemplateDoesNotExist
from django.template.loader import get_template, render_to_string
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_POST

from . import engine
from .conf import workflows_setting
from .declarations import Transition, Workflow
from .engine import ForbiddenError, WorkflowError
from .forms import InputsForm, PlansForm, TicketCreateForm
from .models import StepRun, Ticket
from .registry import workflow_or_none, workflows
from .selectors import (
    poll_seconds,
    state_tone,
    ticket_actions,
    ticket_get,
    ticket_list,
    ticket_runs,
    ticket_timeline,
)

logger = logging.getLogger(__name__)

LIST_FILTERS = ("type", "state", "status", "assignee", "mine", "node", "site", "q", "age", "overdue")


def _ticket_or_404(request: HttpRequest, pk: int) -> Ticket:
    ticket = ticket_get(request.user, pk)
    if ticket is None:
        raise Http404("No such ticket.")
    return ticket


def _workflow_or_404(type_: str) -> Workflow:
    wf = workflow_or_none(type_)
    if wf is None:
        raise Http404("No such ticket type.")
    return wf


def _back(ticket: Ticket) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("workflows:ticket-detail", args=[ticket.pk]))


def _refuse(request: HttpRequest, exc: WorkflowError) -> None:
    for message in exc.errors:
        messages.error(request, message)


# --- list and create ----------------------------------------------------------------------------------------------


@login_required
def ticket_list_view(request: HttpRequest) -> HttpResponse:
    filters = {k: request.GET.get(k, "") for k in LIST_FILTERS}
    page = Paginator(ticket_list(request.user, filters).order_by("-created_at", "-id"), 50).get_page(
        request.GET.get("page")
    )
    rows = [
        {"ticket": t, "wf": workflow_or_none(t.type), "tone": state_tone(workflow_or_none(t.type), t.state)}
        for t in page.object_list
    ]
    for row in rows:
        row["state_label"] = row["wf"].state_label(row["ticket"].state) if row["wf"] else row["ticket"].state
    selected = workflow_or_none(filters["type"]) if filters["type"] else None
    states = (
        selected.states.choices
        if selected
        else sorted({(v, label) for wf in workflows() for v, label in wf.states.choices})
    )
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "tickets/list.html",
        {
            "page": page,
            "rows": rows,
            "filters": filters,
            "workflows": workflows(),
            "states": states,
            "assignee_choices": [
                ("me", "Me"),
                *((f"group:{g.pk}", f"Group: {g.name}") for g in Group.objects.order_by("name")),
            ],
            "query": query.urlencode(),
        },
    )


@login_required
def ticket_new_view(request: HttpRequest) -> HttpResponse:
    return render(request, "tickets/new.html", {"workflows": workflows()})


@login_required
def ticket_create_view(request: HttpRequest, type_: str) -> HttpResponse:
    wf = _workflow_or_404(type_)
    form = TicketCreateForm(wf, request.POST or None, initial={**request.GET.dict()})
    status = 200
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            ticket = engine.ticket_create(
                type_=wf.type,
                title=data["title"],
                requester=request.user,
                description=data.get("description", ""),
                priority=data["priority"],
                inputs={f.name: data.get(f.name) for f in wf.create_fields},
                change_plan=data.get("change_plan", ""),
                rollback_plan=data.get("rollback_plan", ""),
                assignee_group=data.get("assignee_group"),
                start=bool(data.get("start")),
            )
        except WorkflowError as exc:
            form.add_engine_errors(exc.field_errors, exc.errors)
            status = 403 if isinstance(exc, ForbiddenError) else 400
        else:
            messages.success(request, f"{ticket.reference} opened.")
            return _back(ticket)
    elif request.method == "POST":
        status = 400
    return render(request, "tickets/create.html", {"wf": wf, "form": form}, status=status)


# --- detail and live partial --------------------------------------------------------------------------------------


@functools.cache
def _panel_exists(name: str) -> bool:
    try:
        get_template(name)
    except TemplateDoesNotExist:
        return False
    return True


def _detail_context(request: HttpRequest, ticket: Ticket) -> dict[str, Any]:
    wf = _workflow_or_404(ticket.type)
    actions = ticket_actions(request.user, ticket)
    runs = ticket_runs(ticket)
    labels = {s.name: s.label for s in wf.steps}
    one_click = [t for t in actions.transitions if not any(f.required for f in t.fields)]
    return {
        "ticket": ticket,
        "wf": wf,
        "tone": state_tone(wf, ticket.state),
        "state_label": wf.state_label(ticket.state),
        "actions": actions,
        "one_click": one_click,
        "with_inputs": [t for t in actions.transitions if t not in one_click],
        "runs": [{"run": r, "label": labels.get(r.step, r.step)} for r in runs],
        "timeline": ticket_timeline(ticket),
        "poll": poll_seconds(ticket),
        "links": ticket.links.select_related("node", "accelerator", "rack", "switch"),
        "approvals": ticket.approvals.filter(round=ticket.approval_round).order_by("at"),
        "snapshot": engine.approval_snapshot(ticket) if wf.approval and ticket.state == wf.approval.state else None,
        "idempotency_key": uuid.uuid4().hex,
        "is_watching": ticket.watchers.filter(pk=request.user.pk).exists(),
        "data_rows": sorted((k, v) for k, v in ticket.data.items() if not isinstance(v, dict | list)),
        "groups": Group.objects.order_by("name") if actions.can_assign else [],
        "panels": _panels_render(request, ticket),
    }


def _panels_render(request: HttpRequest, ticket: Ticket) -> list[str]:
    """Other apps' ticket panels, rendered here so that one broken panel (its app's URLs not mounted, say)
    costs that panel, not the ticket page."""
    html = []
    for name in workflows_setting("TICKET_PANELS"):
        if not _panel_exists(name):
            continue
        try:
            html.append(render_to_string(name, {"ticket": ticket}, request=request))
        except NoReverseMatch:
            logger.warning("ticket panel %s skipped: a URL it needs is not mounted", name, exc_info=True)
    return html


@login_required
def ticket_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    from .learning_views import learning_context

    ticket = _ticket_or_404(request, pk)
    context = {**_detail_context(request, ticket), **learning_context(request, ticket)}
    return render(request, "tickets/detail.html", context)


@login_required
def ticket_live_view(request: HttpRequest, pk: int) -> HttpResponse:
    """The part of the detail page that changes while steps run (polled by htmx)."""
    ticket = _ticket_or_404(request, pk)
    return render(request, "tickets/_live.html", _detail_context(request, ticket))


# --- transitions --------------------------------------------------------------------------------------------------


def _transition_or_404(wf: Workflow, name: str) -> Transition:
    try:
        t = wf.transition(name)
    except KeyError:
        raise Http404("No such transition.") from None
    if t.is_system:
        raise Http404("This transition is taken by the workflow itself.")
    return t


@login_required
def ticket_transition_view(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    """GET: the inputs of a transition and what it will do. POST: take it."""
    ticket = _ticket_or_404(request, pk)
    wf = _workflow_or_404(ticket.type)
    t = _transition_or_404(wf, name)
    form = InputsForm(t.fields, request.POST or None, initial={"idempotency_key": uuid.uuid4().hex})
    status = 200
    if request.method == "POST":
        data = {k: v for k, v in request.POST.items() if k not in ("csrfmiddlewaretoken", "idempotency_key")}
        key = request.POST.get("idempotency_key") or None
        try:
            result = engine.transition_apply(
                ticket=ticket,
                name=name,
                actor=request.user,
                data=data,
                idempotency_key=f"ui:{request.user.pk}:{key}" if key else None,
            )
        except WorkflowError as exc:
            form.is_valid()
            form.add_engine_errors(exc.field_errors, exc.errors)
            status = 403 if isinstance(exc, ForbiddenError) else 409 if isinstance(exc, engine.NotAllowedError) else 400
        else:
            if not result.replayed:
                messages.success(
                    request, f"{t.label}: {ticket.reference} is now '{wf.state_label(result.ticket.state)}'."
                )
            return _back(ticket)
    step = wf.step_spec(t.step) if t.step else None
    return render(
        request,
        "tickets/transition.html",
        {
            "ticket": ticket,
            "wf": wf,
            "t": t,
            "form": form,
            "step": step,
            "source_label": wf.state_label(ticket.state),
            "target_label": wf.state_label(t.target),
            "tone": state_tone(wf, ticket.state),
        },
        status=status,
    )


# --- approvals, comments, operator actions ------------------------------------------------------------------------


@login_required
@require_POST
def ticket_approve_view(request: HttpRequest, pk: int) -> HttpResponse:
    ticket = _ticket_or_404(request, pk)
    decision = request.POST.get("decision", "")
    try:
        engine.approval_record(
            ticket=ticket, actor=request.user, decision=decision, comment=request.POST.get("comment", "")
        )
    except WorkflowError as exc:
        _refuse(request, exc)
    else:
        messages.success(request, f"Your decision on {ticket.reference} is recorded: {decision}.")
    return _back(ticket)


@login_required
@require_POST
def ticket_comment_view(request: HttpRequest, pk: int) -> HttpResponse:
    ticket = _ticket_or_404(request, pk)
    try:
        engine.comment_add(ticket=ticket, actor=request.user, body=request.POST.get("body", ""))
    except WorkflowError as exc:
        _refuse(request, exc)
    return HttpResponseRedirect(reverse("workflows:ticket-detail", args=[ticket.pk]) + "#timeline")


@login_required
@require_POST
def ticket_pause_view(request: HttpRequest, pk: int) -> HttpResponse:
    ticket = _ticket_or_404(request, pk)
    try:
        engine.ticket_pause(ticket=ticket, actor=request.user, reason=request.POST.get("reason", ""))
    except WorkflowError as exc:
        _refuse(request, exc)
    return _back(ticket)


@login_required
@require_POST
def ticket_resume_view(request: HttpRequest, pk: int) -> HttpResponse:
    ticket = _ticket_or_404(request, pk)
    try:
        engine.ticket_resume(ticket=ticket, actor=request.user)
    except WorkflowError as exc:
        _refuse(request, exc)
    return _back(ticket)


@login_required
@require_POST
def run_retry_view(request: HttpRequest, pk: int, run_id: uuid.UUID) -> HttpResponse:
    ticket = _ticket_or_404(request, pk)
    run = get_object_or_404(StepRun, pk=run_id, ticket=ticket)
    try:
        engine.step_retry(run=run, actor=request.user)
    except WorkflowError as exc:
        _refuse(request, exc)
    return _back(ticket)


@login_required
@require_POST
def ticket_watch_view(request: HttpRequest, pk: int) -> HttpResponse:
    ticket = _ticket_or_404(request, pk)
    engine.ticket_watch(ticket=ticket, user=request.user, watching=request.POST.get("watch") == "1")
    return _back(ticket)


@login_required
@require_POST
def ticket_assign_view(request: HttpRequest, pk: int) -> HttpResponse:
    ticket = _ticket_or_404(request, pk)
    username = request.POST.get("assignee", "").strip()
    user = get_user_model().objects.filter(username=username, is_active=True).first() if username else None
    group = Group.objects.filter(pk=request.POST.get("assignee_group") or 0).first()
    if username and user is None:
        messages.error(request, f"No active user {username!r}.")
        return _back(ticket)
    try:
        engine.ticket_assign(ticket=ticket, actor=request.user, assignee=user, assignee_group=group)
    except WorkflowError as exc:
        _refuse(request, exc)
    return _back(ticket)


@login_required
def ticket_edit_view(request: HttpRequest, pk: int) -> HttpResponse:
    ticket = _ticket_or_404(request, pk)
    wf = _workflow_or_404(ticket.type)
    form = PlansForm(
        request.POST or None,
        initial={
            "title": ticket.title,
            "description": ticket.description,
            "change_plan": ticket.change_plan,
            "rollback_plan": ticket.rollback_plan,
        },
    )
    if request.method == "POST" and form.is_valid():
        try:
            engine.ticket_plans_update(ticket=ticket, actor=request.user, **form.cleaned_data)
        except WorkflowError as exc:
            _refuse(request, exc)
        else:
            messages.success(request, "Saved.")
            return _back(ticket)
    return render(
        request,
        "tickets/edit.html",
        {
            "ticket": ticket,
            "wf": wf,
            "form": form,
            "tone": state_tone(wf, ticket.state),
            "state_label": wf.state_label(ticket.state),
        },
    )
