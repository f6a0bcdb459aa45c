"""Reads for the ticket UI and API: permission-scoped lists, the merged timeline, what a user may do now."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet
from django.utils import timezone

from cmdb.models import ChangeRecord

from .declarations import Transition, Workflow
from .models import (
    ACTIVE_STEP_STATUSES,
    StepRun,
    StepStatus,
    Ticket,
    TicketLink,
    TimelineEntry,
)
from .permissions import can_operate, can_take, can_view, has_ticket_perm, tickets_visible
from .registry import workflow, workflow_or_none

BUSY_STATUSES = (StepStatus.PENDING, StepStatus.RUNNING, StepStatus.RETRY)

#: Age buckets of open tickets (the list's `age` filter): key, label, from days, to days (None: no upper end).
AGE_BUCKETS: tuple[tuple[str, str, int, int | None], ...] = (
    ("lt1d", "< 1 day", 0, 1),
    ("1to3d", "1-3 days", 1, 3),
    ("3to7d", "3-7 days", 3, 7),
    ("gt7d", "> 7 days", 7, None),
)


def _age_q(key: str, now: dt.datetime) -> Q | None:
    """Tickets created within the bucket `key` (None for an unknown key: the filter is ignored)."""
    for name, _label, low, high in AGE_BUCKETS:
        if name == key:
            condition = Q(created_at__lte=now - dt.timedelta(days=low))
            if high is not None:
                condition &= Q(created_at__gt=now - dt.timedelta(days=high))
            return condition
    return None


def _overdue_q(now: dt.datetime) -> Q:
    """Past the due date the type's SLA gave it (open tickets only are ever overdue)."""
    return Q(is_open=True, due_at__lt=now)


def ticket_list(user: AbstractBaseUser, filters: Mapping[str, Any] | None = None) -> QuerySet[Ticket]:
    """Tickets `user` may see, filtered. Filters (all optional): type, state, status (open/closed/all, default
    open), assignee ('me', a user id, or 'group:<id>'), mine (requested, assigned, in my group or watched),
    node (hostname substring), site (code), q (reference like REP-12, or words of the title), age (an AGE_BUCKETS
    key: created that long ago), overdue (past the SLA's due date)."""
    # A QueryDict (request.GET / query_params) must give single values, not lists.
    f = filters.dict() if hasattr(filters, "dict") else dict(filters or {})
    qs = tickets_visible(user).select_related("requester", "assignee", "assignee_group", "site")
    status = f.get("status") or "open"
    if status == "open":
        qs = qs.filter(is_open=True)
    elif status == "closed":
        qs = qs.filter(is_open=False)
    if f.get("type"):
        qs = qs.filter(type=f["type"])
    if f.get("state"):
        qs = qs.filter(state=f["state"])
    assignee = str(f.get("assignee") or "")
    if assignee == "me":
        qs = qs.filter(assignee=user)
    elif assignee.startswith("group:") and assignee[6:].isdigit():
        qs = qs.filter(assignee_group_id=int(assignee[6:]))
    elif assignee.isdigit():
        qs = qs.filter(assignee_id=int(assignee))
    if str(f.get("mine") or "").lower() in {"1", "true", "on", "yes"}:
        qs = qs.filter(
            Q(requester=user) | Q(assignee=user) | Q(assignee_group__in=user.groups.all()) | Q(watchers=user)
        ).distinct()
    if f.get("node"):
        linked = TicketLink.objects.filter(ticket=OuterRef("pk"), node__hostname__icontains=f["node"])
        qs = qs.filter(Exists(linked))
    if f.get("site"):
        qs = qs.filter(site__code=f["site"])
    if q := str(f.get("q") or "").strip():
        qs = qs.filter(_search(q))
    now = timezone.now()
    if (age := _age_q(str(f.get("age") or ""), now)) is not None:
        qs = qs.filter(age)
    if str(f.get("overdue") or "").lower() in {"1", "true", "on", "yes"}:
        qs = qs.filter(_overdue_q(now))
    active = StepRun.objects.filter(ticket=OuterRef("pk"), status__in=BUSY_STATUSES)
    failed = StepRun.objects.filter(ticket=OuterRef("pk"), status=StepStatus.FAILED)
    qs = qs.annotate(has_busy_run=Exists(active), has_failed_run=Exists(failed))
    return qs.prefetch_related(Prefetch("links", queryset=TicketLink.objects.filter(role="subject")))


def open_ticket_ages(user: AbstractBaseUser, *, now: dt.datetime | None = None) -> dict[str, dict[str, int]]:
    """Open tickets `user` may see, per type: {type: {"total", "overdue", <AGE_BUCKETS key>: n}}, in one GROUP BY
    query. The same conditions as the list's `age` / `overdue` filters, so each number is its list's count."""
    now = now or timezone.now()
    aggregates = {key: Count("id", filter=_age_q(key, now)) for key, *_ in AGE_BUCKETS}
    rows = (
        tickets_visible(user)
        .filter(is_open=True)
        .order_by()
        .values("type")
        .annotate(total=Count("id"), overdue=Count("id", filter=_overdue_q(now)), **aggregates)
    )
    return {r["type"]: {k: v for k, v in r.items() if k != "type"} for r in sorted(rows, key=lambda r: r["type"])}


def _search(q: str) -> Q:
    head, _, tail = q.partition("-")
    if tail.isdigit() and head.isalpha():
        return Q(pk=int(tail))
    if q.isdigit():
        return Q(pk=int(q)) | Q(title__icontains=q)
    condition = Q()
    for word in q.split():
        condition &= Q(title__icontains=word) | Q(description__icontains=word)
    return condition


def ticket_get(user: AbstractBaseUser, pk: int) -> Ticket | None:
    """One ticket the user may see (None otherwise: never tell an outsider it exists)."""
    ticket = (
        Ticket.objects.select_related("requester", "assignee", "assignee_group", "site", "cluster")
        .filter(pk=pk)
        .first()
    )
    return ticket if ticket is not None and can_view(user, ticket) else None


@dataclass(frozen=True)
class TimelineItem:
    """One line of the merged timeline: a TimelineEntry or a CMDB ChangeRecord of the ticket's correlation id."""

    at: dt.datetime
    kind: str
    actor: str
    message: str
    body: str = ""
    url: str = ""
    changes: list[tuple[str, Any, Any]] = field(default_factory=list)


def ticket_timeline(ticket: Ticket) -> list[TimelineItem]:
    """Everything that happened to the ticket, oldest first, including every CMDB change its steps made."""
    items = [
        TimelineItem(at=e.at, kind=e.kind, actor=e.actor_repr or "system", message=e.message, body=e.body)
        for e in TimelineEntry.objects.filter(ticket=ticket).order_by("at", "id")
    ]
    records = ChangeRecord.objects.filter(correlation_id=ticket.correlation_id).select_related("content_type")
    for r in records.order_by("at", "id"):
        model = r.content_type.model
        url = f"/admin/{r.content_type.app_label}/{model}/{r.object_id}/change/" if r.action != "delete" else ""
        items.append(
            TimelineItem(
                at=r.at,
                kind="change",
                actor=r.actor_repr or r.source,
                message=f"{r.get_action_display()} {model} {r.object_repr}",
                url=url,
                changes=[(k, v[0], v[1]) for k, v in sorted(r.changes.items()) if isinstance(v, list) and len(v) == 2][
                    :12
                ],
            )
        )
    items.sort(key=lambda i: i.at)
    return items


def ticket_runs(ticket: Ticket) -> list[StepRun]:
    return list(StepRun.objects.filter(ticket=ticket).order_by("created_at").prefetch_related("log_lines"))


@dataclass(frozen=True)
class TicketActions:
    """What `user` may do on the ticket right now (drives buttons in the UI and `actions` in the API)."""

    transitions: list[Transition]
    can_approve: bool
    can_operate: bool
    can_comment: bool
    can_edit: bool
    can_assign: bool
    approval_needed: int
    approvals_so_far: int


def ticket_actions(user: AbstractBaseUser, ticket: Ticket) -> TicketActions:
    wf = workflow(ticket.type)
    from .permissions import can_change

    visible = can_view(user, ticket)
    transitions = (
        [
            t
            for t in wf.transitions_from(ticket.state)
            if can_take(user, ticket, t) and (not ticket.is_paused or t.allowed_when_paused)
        ]
        if visible and ticket.is_open
        else []
    )
    rule = wf.approval
    awaiting = bool(rule and ticket.state == rule.state)
    approvals = ticket.approvals.filter(round=ticket.approval_round, decision="approved").count() if awaiting else 0
    voted = awaiting and ticket.approvals.filter(round=ticket.approval_round, approver=user).exists()
    return TicketActions(
        transitions=transitions,
        can_approve=bool(
            awaiting
            and visible
            and rule
            and ticket.requester_id != user.pk
            and not voted
            and not ticket.is_paused
            and has_ticket_perm(user, rule.permission, ticket)
        ),
        can_operate=visible and ticket.is_open and can_operate(user, ticket),
        can_comment=visible,
        can_edit=visible and ticket.state in wf.editable_states and can_change(user, ticket),
        can_assign=visible and ticket.is_open and has_ticket_perm(user, "change_ticket", ticket),
        approval_needed=rule.required_count() if rule else 0,
        approvals_so_far=approvals,
    )


def state_tone(wf: Workflow | None, state: str) -> str:
    """A colour family for a state: new, active, waiting, approval, done, cancelled, rejected."""
    if wf is None:
        return "new"
    if state in wf.terminal:
        return "done" if state == "closed" else "cancelled"
    if wf.approval and state == wf.approval.state:
        return "approval"
    if state == "rejected":
        return "rejected"
    if state in wf.waiting_states:
        return "waiting"
    if state == wf.initial:
        return "new"
    return "active"


def poll_seconds(ticket: Ticket) -> int | None:
    """How often the ticket page should refresh its live part: often while steps are busy, slowly while one
    waits on the outside world, never when nothing is moving."""
    from .conf import workflows_setting

    statuses = set(
        StepRun.objects.filter(ticket=ticket, status__in=ACTIVE_STEP_STATUSES).values_list("status", flat=True)
    )
    if statuses & set(BUSY_STATUSES):
        return int(workflows_setting("UI_POLL_SECONDS"))
    if StepStatus.WAITING in statuses:
        return int(workflows_setting("UI_POLL_WAITING_SECONDS"))
    return None


__all__ = [
    "AGE_BUCKETS",
    "TicketActions",
    "TimelineItem",
    "open_ticket_ages",
    "poll_seconds",
    "state_tone",
    "ticket_actions",
    "ticket_get",
    "ticket_list",
    "ticket_runs",
    "ticket_timeline",
    "workflow_or_none",
]
