"""Tickets, the CMDB objects they concern, their timeline and their approvals."""

from __future__ import annotations

from urllib.parse import quote

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q


class TicketPriority(models.TextChoices):
    CRITICAL = "critical", "Critical"
    HIGH = "high", "High"
    NORMAL = "normal", "Normal"
    LOW = "low", "Low"


class Ticket(models.Model):
    """A unit of operational work of one type (repair, decommission, incident), moved by its workflow.

    The workflow (workflows/definitions/<type>.py) owns `state`; only workflows.engine writes it.
    Invariants: one *open* ticket per non-empty `dedup_key` (the health hook keys repairs by card), held by a
    partial unique constraint; `is_open` is False exactly when `state` is terminal for the type.
    `correlation_id` is stamped on every CMDB change record the ticket's automated steps write.
    Visibility: django-guardian `view_ticket` grants (requester, assignee, assignee group, watchers), scope
    grants on the ticket's site/cluster (cmdb.permissions), or the global permission (ops leads).
    """

    type = models.CharField(max_length=32, db_index=True, help_text="Workflow name, e.g. 'repair'.")
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    state = models.CharField(max_length=32, db_index=True)
    priority = models.CharField(max_length=16, choices=TicketPriority.choices, default=TicketPriority.NORMAL)

    # SET_NULL: a ticket outlives the accounts and groups that touched it (its timeline keeps the names).
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tickets_requested",
        help_text="Empty when opened by the system.",
    )
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="tickets_assigned"
    )
    assignee_group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="tickets_assigned"
    )
    watchers = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="tickets_watched")

    # Denormalised from the subject node, so scope grants (cmdb.permissions.register_scope) need no joins.
    site = models.ForeignKey("cmdb.Site", null=True, blank=True, on_delete=models.SET_NULL, related_name="tickets")
    cluster = models.ForeignKey(
        "cmdb.Cluster", null=True, blank=True, on_delete=models.SET_NULL, related_name="tickets"
    )

    correlation_id = models.CharField(max_length=64, unique=True)
    dedup_key = models.CharField(
        max_length=128,
        blank=True,
        db_index=True,
        help_text="At most one open ticket per key, e.g. 'repair:accelerator:42'.",
    )
    is_open = models.BooleanField(default=True, db_index=True)
    is_paused = models.BooleanField(default=False, help_text="Automated steps wait until resumed.")

    change_plan = models.TextField(blank=True, help_text="What will be done, step by step (change tickets).")
    rollback_plan = models.TextField(blank=True, help_text="How to undo it (change tickets).")
    # Workflow data: operator inputs (verdict, serials, RMA number) and step results (reservation id).
    data = models.JSONField(default=dict, blank=True)
    approval_round = models.PositiveIntegerField(default=0, help_text="Bumped on each submit; old votes lapse.")

    # The API's Idempotency-Key (scoped per user) and a digest of the request it opened the ticket with: a retry
    # with the same key and body gets this ticket back; the same key with another body is refused.
    idempotency_key = models.CharField(max_length=200, null=True, blank=True, unique=True)
    request_digest = models.CharField(max_length=64, blank=True)

    due_at = models.DateTimeField(null=True, blank=True, help_text="From the type's SLA for this priority.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        permissions = [
            ("operate_ticket", "Can pause, resume and retry the automated steps of tickets"),
            ("approve_emergency_change", "Can let a change ticket start outside maintenance windows and freezes"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["dedup_key"], condition=Q(is_open=True) & ~Q(dedup_key=""), name="ticket_one_open_per_dedup_key"
            ),
        ]
        indexes = [models.Index(fields=["type", "state"]), models.Index(fields=["site", "is_open"])]

    def __str__(self) -> str:
        return f"{self.reference} {self.title}"

    def get_absolute_url(self) -> str:
        return f"/tickets/{self.pk}/"

    @property
    def reference(self) -> str:
        """Human reference, e.g. REP-42 (prefix from the workflow)."""
        from ..registry import workflow_or_none

        wf = workflow_or_none(self.type)
        return f"{wf.prefix if wf else 'TKT'}-{self.pk}"


class LinkRole(models.TextChoices):
    SUBJECT = "subject", "Subject"
    SPARE = "spare", "Spare"
    REPLACEMENT = "replacement", "RMA replacement"
    RELATED = "related", "Related"


class TicketLink(models.Model):
    """A CMDB object a ticket concerns. Explicit nullable foreign keys (not a generic FK) so lists can filter
    by node or site in one join. SET_NULL keeps the link (and `object_repr`) when the object is deleted."""

    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="links")
    role = models.CharField(max_length=16, choices=LinkRole.choices, default=LinkRole.SUBJECT)
    node = models.ForeignKey("cmdb.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    accelerator = models.ForeignKey(
        "cmdb.Accelerator", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    rack = models.ForeignKey("cmdb.Rack", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    switch = models.ForeignKey("cmdb.Switch", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    link = models.ForeignKey("cmdb.Link", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    object_repr = models.CharField(max_length=300)
    created_at = models.DateTimeField(auto_now_add=True)

    OBJECT_FIELDS = ("node", "accelerator", "rack", "switch", "link")

    class Meta:
        ordering = ["ticket_id", "id"]
        constraints = [
            # At most one object per row (none after the object was deleted).
            models.CheckConstraint(
                condition=(
                    Q(node__isnull=True, accelerator__isnull=True, rack__isnull=True, switch__isnull=True)
                    | Q(node__isnull=True, accelerator__isnull=True, rack__isnull=True, link__isnull=True)
                    | Q(node__isnull=True, accelerator__isnull=True, switch__isnull=True, link__isnull=True)
                    | Q(node__isnull=True, rack__isnull=True, switch__isnull=True, link__isnull=True)
                    | Q(accelerator__isnull=True, rack__isnull=True, switch__isnull=True, link__isnull=True)
                ),
                name="ticketlink_one_object",
            ),
        ]
        indexes = [models.Index(fields=["node", "ticket"]), models.Index(fields=["accelerator", "ticket"])]

    def __str__(self) -> str:
        return f"{self.role}: {self.object_repr}"

    @property
    def kind(self) -> str:
        """Model name of the linked object ('node', 'accelerator', ...), or '' if it was deleted."""
        return next((name for name in self.OBJECT_FIELDS if getattr(self, f"{name}_id")), "")

    @property
    def target(self) -> models.Model | None:
        kind = self.kind
        return getattr(self, kind) if kind else None

    @property
    def page_url(self) -> str:
        """The object's console page ('' when the object is gone); a cable has no page of its own, so its admin
        page. Reads the linked row: select_related the object fields when listing links."""
        kind = self.kind
        pages = {
            "node": lambda: f"/nodes/{quote(self.node.hostname)}/",
            "accelerator": lambda: f"/accelerators/{quote(self.accelerator.serial)}/",
            "rack": lambda: f"/racks/{self.rack_id}/",
            "switch": lambda: f"/switches/{quote(self.switch.name)}/",
        }
        return pages[kind]() if kind in pages else self.admin_url

    @property
    def admin_url(self) -> str:
        """The object's change page in the Django admin ('' when the object is gone)."""
        kind = self.kind
        return f"/admin/cmdb/{kind}/{getattr(self, f'{kind}_id')}/change/" if kind else ""


class TimelineKind(models.TextChoices):
    CREATED = "created", "Created"
    TRANSITION = "transition", "Transition"
    APPROVAL = "approval", "Approval"
    STEP = "step", "Automated step"
    COMMENT = "comment", "Comment"
    SIGNAL = "signal", "Health signal"
    ASSIGNMENT = "assignment", "Assignment"
    OPERATOR = "operator", "Operator action"
    NOTE = "note", "Note"


class TimelineEntry(models.Model):
    """One event in a ticket's life. Append-only. CMDB change records are not copied here: the timeline
    view merges them in by the ticket's correlation id (workflows.selectors.ticket_timeline)."""

    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="timeline")
    at = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=16, choices=TimelineKind.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_repr = models.CharField(max_length=150, blank=True)
    message = models.CharField(max_length=500)
    body = models.TextField(blank=True, help_text="Comment text.")
    data = models.JSONField(default=dict, blank=True)
    step_run = models.ForeignKey(
        "workflows.StepRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    idempotency_key = models.CharField(
        max_length=200,
        null=True,
        blank=True,
        unique=True,
        help_text="The API's Idempotency-Key of the comment (scoped per user).",
    )

    class Meta:
        ordering = ["at", "id"]
        verbose_name_plural = "timeline entries"
        indexes = [models.Index(fields=["ticket", "at"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.kind}: {self.message}"


class ApprovalDecision(models.TextChoices):
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


class Approval(models.Model):
    """One approver's decision in one approval round, with a snapshot of exactly what they saw and approved
    (plans, objects, planned changes). A requester never approves their own ticket (engine rule)."""

    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="approvals")
    round = models.PositiveIntegerField()
    approver = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    approver_repr = models.CharField(max_length=150)
    decision = models.CharField(max_length=16, choices=ApprovalDecision.choices)
    comment = models.TextField(blank=True)
    snapshot = models.JSONField(default=dict)
    at = models.DateTimeField()

    class Meta:
        ordering = ["ticket_id", "round", "at"]
        constraints = [
            models.UniqueConstraint(fields=["ticket", "round", "approver"], name="approval_one_vote_per_round"),
        ]

    def __str__(self) -> str:
        return f"{self.approver_repr} {self.decision} (round {self.round})"


class ProcurementNeed(models.Model):
    """A spare the fleet needs and does not have: recorded when a repair finds no compatible spare at its
    site. Procurement picks open needs up; the repair closes its need when a spare is finally reserved."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        FULFILLED = "fulfilled", "Fulfilled"
        CANCELLED = "cancelled", "Cancelled"

    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="procurement_needs")
    site = models.ForeignKey("cmdb.Site", on_delete=models.PROTECT, related_name="+")
    accelerator_model = models.ForeignKey("cmdb.AcceleratorModel", on_delete=models.PROTECT, related_name="+")
    quantity = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN, db_index=True)
    reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["ticket"], condition=Q(status="open"), name="procurementneed_one_open"),
        ]

    def __str__(self) -> str:
        return f"{self.quantity} x {self.accelerator_model} at {self.site} ({self.status})"


class NotificationOutbox(models.Model):
    """A notification owed to one notifier, written in the transaction that caused it (a transactional
    outbox). Sent after commit; when the broker is down the row stays unsent and the beat task
    `workflows.republish_runs` sends it later, so a comment or a new ticket never fails on its notification.
    `key` is the notification's id, shared by the rows of one event (notifiers may deduplicate on it)."""

    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="+")
    event = models.CharField(max_length=32)
    message = models.TextField()
    notifier_path = models.CharField(max_length=200)
    key = models.CharField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["sent_at", "created_at"])]

    def __str__(self) -> str:
        return f"{self.event} via {self.notifier_path} ({'sent' if self.sent_at else 'unsent'})"
