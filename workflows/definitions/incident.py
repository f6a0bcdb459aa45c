"""Incidents and requests: a ticket moved by people. Its one automated step lists the jobs that ran on the affected
node before the incident, for the people to tell and the postmortem to name.

    open --start_work--> in_progress [jobs_impact] --wait--> waiting --continue_work--> in_progress
    open / in_progress / waiting --resolve--> resolved --close--> closed
    resolved --reopen--> in_progress
    open / in_progress / waiting --cancel--> cancelled

Closing needs a complete postmortem (summary and root cause category; workflows.services.postmortems): the
close transition's guard names what is missing.

Ticket data: wait_reason, resolution, cancel_reason, jobs_impact (start_work, with a node linked).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from django.db import models

from ..declarations import Field, Transition, Workflow, step
from ..models import Ticket
from ..services.job_impact import jobs_impact_collect, jobs_impact_summary
from ..steps import Done, StepContext, StepOutcome


class IncidentState(models.TextChoices):
    OPEN = "open", "Open"
    IN_PROGRESS = "in_progress", "In progress"
    WAITING = "waiting", "Waiting"
    RESOLVED = "resolved", "Resolved"
    CLOSED = "closed", "Closed"
    CANCELLED = "cancelled", "Cancelled"


S = IncidentState
NOTE = Field("note", "Note", kind="textarea", required=False, store=False)
WORKING = frozenset({S.OPEN, S.IN_PROGRESS, S.WAITING})


def _postmortem_complete(ticket: Ticket, values: Mapping[str, Any]) -> list[str]:
    from ..services.postmortems import postmortem_missing

    if missing := postmortem_missing(ticket):
        return [f"Write the postmortem before closing: missing {', '.join(missing)}."]
    return []


@step("jobs_impact", label="List the jobs on the node", time_limit_s=120)
def jobs_impact(ctx: StepContext) -> StepOutcome:
    """The jobs that ran on the incident's node in the hours before it was opened (nothing to do without one)."""
    node = ctx.subject_node()
    if node is None:
        return Done(message="no node linked; no jobs to list")
    impact = jobs_impact_collect(ctx, node, failed_at=ctx.ticket.created_at)
    return Done(data={"jobs_impact": impact}, message=jobs_impact_summary(impact))


TRANSITIONS = (
    Transition(
        "start_work",
        "Start work",
        frozenset({S.OPEN}),
        S.IN_PROGRESS,
        "incident_work",
        fields=(NOTE,),
        step="jobs_impact",
    ),
    Transition(
        "wait",
        "Wait on someone",
        frozenset({S.IN_PROGRESS}),
        S.WAITING,
        "incident_work",
        style="secondary",
        fields=(Field("wait_reason", "Waiting for"),),
    ),
    Transition("continue_work", "Continue", frozenset({S.WAITING}), S.IN_PROGRESS, "incident_work", fields=(NOTE,)),
    Transition(
        "resolve",
        "Resolve",
        WORKING,
        S.RESOLVED,
        "incident_work",
        fields=(Field("resolution", "Resolution", kind="textarea"),),
    ),
    Transition(
        "reopen",
        "Reopen",
        frozenset({S.RESOLVED}),
        S.IN_PROGRESS,
        "incident_work",
        allow_requester=True,
        style="secondary",
        fields=(Field("note", "Why reopen", kind="textarea", store=False),),
    ),
    Transition(
        "close",
        "Close",
        frozenset({S.RESOLVED}),
        S.CLOSED,
        "incident_work",
        allow_requester=True,
        fields=(NOTE,),
        guards=(_postmortem_complete,),
        description="Needs the postmortem: a summary and a root cause category.",
    ),
    Transition(
        "cancel",
        "Cancel",
        WORKING,
        S.CANCELLED,
        "incident_cancel",
        allow_requester=True,
        allowed_when_paused=True,
        style="danger",
        fields=(Field("cancel_reason", "Why cancel", kind="textarea"),),
    ),
)

WORKFLOW = Workflow(
    type="incident",
    label="Incident / request",
    prefix="INC",
    states=IncidentState,
    initial=S.OPEN,
    terminal=frozenset({S.CLOSED, S.CANCELLED}),
    transitions=TRANSITIONS,
    create_fields=(Field("node", "Affected node (hostname, optional)", kind="node", required=False),),
    waiting_states=frozenset({S.WAITING}),
    steps=(jobs_impact,),
    editable_states=frozenset({S.OPEN, S.IN_PROGRESS, S.WAITING}),
    sla={
        "critical": dt.timedelta(hours=4),
        "high": dt.timedelta(hours=24),
        "normal": dt.timedelta(days=3),
        "low": dt.timedelta(days=10),
    },
    description=__doc__ or "",
)
