"""Models of the workflows app: tickets (with links, timeline, approvals, procurement needs) and runs."""

from .learning import Postmortem, PostmortemAction, RootCauseCategory
from .runs import ACTIVE_STEP_STATUSES, StepEffect, StepLogLine, StepRun, StepStatus, TransitionLog
from .tickets import (
    Approval,
    ApprovalDecision,
    LinkRole,
    NotificationOutbox,
    ProcurementNeed,
    Ticket,
    TicketLink,
    TicketPriority,
    TimelineEntry,
    TimelineKind,
)

__all__ = [
    "ACTIVE_STEP_STATUSES",
    "Approval",
    "ApprovalDecision",
    "LinkRole",
    "NotificationOutbox",
    "Postmortem",
    "PostmortemAction",
    "ProcurementNeed",
    "RootCauseCategory",
    "StepEffect",
    "StepLogLine",
    "StepRun",
    "StepStatus",
    "Ticket",
    "TicketLink",
    "TicketPriority",
    "TimelineEntry",
    "TimelineKind",
    "TransitionLog",
]
