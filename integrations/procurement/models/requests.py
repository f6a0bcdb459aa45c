"""Procurement requests, their lines, the approval rules that pick their approvers, and the votes cast."""

from __future__ import annotations

import uuid
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q


def correlation_id_new() -> str:
    return uuid.uuid4().hex


class RequestState(models.TextChoices):
    """Where a request is on the gpuops side. The procurement system's view of the PO is `po_state`."""

    DRAFT = "draft", "Draft"
    SUBMITTED = "submitted", "Waiting for approval"
    APPROVED = "approved", "Approved (placing the PO)"
    ORDERED = "ordered", "Ordered"
    PARTIALLY_RECEIVED = "partially_received", "Partially received"
    RECEIVED = "received", "Received"
    CLOSED = "closed", "Closed (received and invoiced)"
    REJECTED = "rejected", "Rejected"
    CANCELLED = "cancelled", "Cancelled"


OPEN_REQUEST_STATES = (
    RequestState.DRAFT,
    RequestState.SUBMITTED,
    RequestState.APPROVED,
    RequestState.ORDERED,
    RequestState.PARTIALLY_RECEIVED,
)
EDITABLE_REQUEST_STATES = (RequestState.DRAFT, RequestState.SUBMITTED)


class PoState(models.TextChoices):
    """The purchase order as the procurement system reports it. Events only move it forward (see PO_RANK)."""

    NONE = "", "No PO yet"
    CREATED = "created", "Created"
    APPROVED = "approved", "Approved by procurement"
    DISPATCHED = "dispatched", "Dispatched"
    PARTIALLY_DELIVERED = "partially_delivered", "Partially delivered"
    DELIVERED = "delivered", "Delivered"
    INVOICED = "invoiced", "Invoiced"
    CANCELLED = "cancelled", "Cancelled"


# Events may arrive out of order (an approval after the dispatch it preceded); a PO state never moves back.
PO_RANK: dict[str, int] = {
    PoState.NONE: 0,
    PoState.CREATED: 1,
    PoState.APPROVED: 2,
    PoState.DISPATCHED: 3,
    PoState.PARTIALLY_DELIVERED: 4,
    PoState.DELIVERED: 5,
    PoState.INVOICED: 6,
    PoState.CANCELLED: 7,
}


class ApprovalRule(models.Model):
    """One level of the approval chain for requests whose amount lies in [min_amount, max_amount).

    Every rule whose range covers a request's amount applies; the request is approved when each applicable
    rule has `approvers_required` distinct approvals from members of its group. Rules are data: finance
    changes thresholds in the admin, not in code. An empty `max_amount` means no upper bound.
    """

    name = models.CharField(max_length=100, unique=True)
    level = models.PositiveSmallIntegerField(default=1, help_text="Order of the levels in the chain (1 first).")
    min_amount = models.DecimalField(
        max_digits=14, decimal_places=2, default=Decimal("0"), validators=[MinValueValidator(Decimal("0"))]
    )
    max_amount = models.DecimalField(
        max_digits=14,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="Exclusive upper bound; empty = no upper bound.",
    )
    approvers_required = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1)])
    # PROTECT: deleting the group would silently make a level impossible (or trivially) to satisfy.
    group = models.ForeignKey(Group, on_delete=models.PROTECT, related_name="procurement_approval_rules")
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["level", "min_amount", "name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(max_amount__isnull=True) | Q(max_amount__gt=models.F("min_amount")),
                name="approvalrule_range_not_empty",
            ),
            models.CheckConstraint(condition=Q(approvers_required__gte=1), name="approvalrule_needs_an_approver"),
        ]

    def __str__(self) -> str:
        upper = f"{self.max_amount:,.2f}" if self.max_amount is not None else "∞"
        return f"{self.name} (L{self.level}, {self.min_amount:,.2f}-{upper}: {self.approvers_required} of {self.group})"

    def covers(self, amount: Decimal) -> bool:
        return self.min_amount <= amount and (self.max_amount is None or amount < self.max_amount)


class ProcurementRequest(models.Model):
    """A request to buy hardware: lines of (item, quantity, site), a justification and a budget code.

    Lifecycle: draft -> submitted (the approval chain is fixed from the amount) -> approved -> ordered (the PO
    exists in the procurement system) -> partially_received / received -> closed (invoiced); or rejected /
    cancelled. `dedup_key` keeps one open request per key (minimum-stock refills: one per site and model),
    held by a partial unique constraint. `correlation_id` is stamped on every CMDB change its deliveries make.
    """

    title = models.CharField(max_length=200)
    justification = models.TextField()
    budget_code = models.CharField(max_length=64)
    currency = models.CharField(max_length=3, default="USD")
    state = models.CharField(max_length=24, choices=RequestState.choices, default=RequestState.DRAFT, db_index=True)
    is_open = models.BooleanField(default=True, db_index=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="procurement_requests",
        help_text="Empty when opened by gpuops.",
    )
    dedup_key = models.CharField(
        max_length=128,
        blank=True,
        db_index=True,
        help_text="At most one open request per key, e.g. 'minstock:3:accelerator_model:5'.",
    )
    # A stable id from birth: deliveries months later still group their CMDB changes under this request.
    correlation_id = models.CharField(max_length=64, unique=True, default=correlation_id_new, editable=False)
    ticket_ref = models.CharField(
        max_length=64,
        blank=True,
        db_index=True,
        help_text="The procurement ticket, e.g. 'ticket:42', once the workflow exists.",
    )

    approval_round = models.PositiveIntegerField(default=0, help_text="Bumped on each submit; older votes lapse.")
    # The chain fixed at submit time from the amount ([{"rule": id, "name", "level", "group": id, "required"}]):
    # editing a rule later does not change what a request in flight needs.
    approval_chain = models.JSONField(default=list, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True, help_text="Rejected or cancelled at.")

    # The purchase order in the procurement system.
    po_number = models.CharField(max_length=64, blank=True, db_index=True)
    po_state = models.CharField(max_length=24, choices=PoState.choices, default=PoState.NONE, blank=True)
    po_idempotency_key = models.CharField(
        max_length=128, blank=True, help_text="Sent with every attempt to create the PO: one PO, however many retries."
    )
    po_created_at = models.DateTimeField(null=True, blank=True)
    po_attempts = models.PositiveIntegerField(default=0)
    po_error = models.TextField(blank=True, help_text="The last error placing the PO (cleared on success).")
    supplier = models.CharField(max_length=200, blank=True)
    invoice_number = models.CharField(max_length=64, blank=True)
    invoiced_amount = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)

    # Minimum-stock refills: how often the trigger fired while this request was open.
    trigger_count = models.PositiveIntegerField(default=0)
    last_triggered_at = models.DateTimeField(null=True, blank=True)
    notes = models.TextField(blank=True, help_text="Appended by gpuops (refill updates, PO errors).")

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        permissions = [("approve_procurementrequest", "Can vote on procurement requests")]
        constraints = [
            models.UniqueConstraint(
                fields=["dedup_key"],
                condition=Q(is_open=True) & ~Q(dedup_key=""),
                name="procurementrequest_one_open_per_dedup_key",
            ),
            models.UniqueConstraint(
                fields=["po_number"], condition=~Q(po_number=""), name="procurementrequest_unique_po_number"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reference} {self.title}"

    @property
    def reference(self) -> str:
        return f"PR-{self.pk}" if self.pk else "PR-new"

    @property
    def total_amount(self) -> Decimal:
        """Sum of quantity x unit price over the lines (uses prefetched lines when present)."""
        return sum((line.amount for line in self.lines.all()), Decimal("0"))


class ItemKind(models.TextChoices):
    SERVER = "server", "Server"
    ACCELERATOR = "accelerator", "Accelerator card"
    PART = "part", "Part"


class RequestLine(models.Model):
    """One line: exactly one of a server model, an accelerator model or a part model; a quantity; a site.

    `received_quantity` counts what deliveries brought (serials or consumable units); `po_state` is the line's
    state in the procurement system. The line's external reference (`line_ref`) is what events name.
    """

    request = models.ForeignKey(ProcurementRequest, on_delete=models.CASCADE, related_name="lines")
    line_no = models.PositiveSmallIntegerField()
    server_model = models.ForeignKey(
        "cmdb.ServerModel", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    accelerator_model = models.ForeignKey(
        "cmdb.AcceleratorModel", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    part_model = models.ForeignKey("cmdb.PartModel", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    quantity = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    # PROTECT: a site with purchase history is not deleted by accident.
    site = models.ForeignKey("cmdb.Site", on_delete=models.PROTECT, related_name="+")
    unit_price = models.DecimalField(
        max_digits=14,
        decimal_places=2,
        default=Decimal("0"),
        validators=[MinValueValidator(Decimal("0"))],
        help_text="Estimated.",
    )
    received_quantity = models.PositiveIntegerField(default=0)
    po_line_ref = models.CharField(max_length=64, blank=True, help_text="The procurement system's line id.")
    po_state = models.CharField(max_length=24, choices=PoState.choices, default=PoState.NONE, blank=True)

    class Meta:
        ordering = ["request_id", "line_no"]
        constraints = [
            models.UniqueConstraint(fields=["request", "line_no"], name="requestline_unique_line_no"),
            models.CheckConstraint(
                condition=(
                    Q(server_model__isnull=False, accelerator_model__isnull=True, part_model__isnull=True)
                    | Q(server_model__isnull=True, accelerator_model__isnull=False, part_model__isnull=True)
                    | Q(server_model__isnull=True, accelerator_model__isnull=True, part_model__isnull=False)
                ),
                name="requestline_exactly_one_item",
            ),
            models.CheckConstraint(condition=Q(quantity__gte=1), name="requestline_quantity_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.line_ref}: {self.quantity} x {self.item} @ {self.site_id}"

    def clean(self) -> None:
        items = [self.server_model_id, self.accelerator_model_id, self.part_model_id]
        if sum(1 for i in items if i) != 1:
            raise ValidationError("A line names exactly one of a server model, an accelerator model or a part model.")

    @property
    def line_ref(self) -> str:
        """Our stable reference of the line, echoed by the procurement system in its events."""
        return f"PR-{self.request_id}-{self.line_no}"

    @property
    def item_kind(self) -> str:
        if self.server_model_id:
            return ItemKind.SERVER
        if self.accelerator_model_id:
            return ItemKind.ACCELERATOR
        return ItemKind.PART

    @property
    def item(self):
        return self.server_model or self.accelerator_model or self.part_model

    @property
    def sku(self) -> str:
        """What the procurement system's catalog calls the item (model name, or the part's SKU)."""
        if self.part_model_id:
            return self.part_model.sku
        return self.item.name

    @property
    def is_serialised(self) -> bool:
        return self.item_kind != ItemKind.PART or self.part_model.is_serialised

    @property
    def amount(self) -> Decimal:
        return self.unit_price * self.quantity


class ApprovalVote(models.TextChoices):
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


class RequestApproval(models.Model):
    """One approver's vote in one approval round, counted for one level (rule) of the chain.

    `snapshot` keeps what the approver saw (amount, lines), so an approval can be audited against what was
    bought. A requester never approves their own request (service rule).
    """

    request = models.ForeignKey(ProcurementRequest, on_delete=models.CASCADE, related_name="approvals")
    round = models.PositiveIntegerField()
    rule = models.ForeignKey(ApprovalRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    approver = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    approver_repr = models.CharField(max_length=150)
    decision = models.CharField(max_length=16, choices=ApprovalVote.choices)
    comment = models.TextField(blank=True)
    snapshot = models.JSONField(default=dict)
    at = models.DateTimeField()

    class Meta:
        ordering = ["request_id", "round", "at"]
        constraints = [
            models.UniqueConstraint(fields=["request", "round", "approver"], name="requestapproval_one_vote"),
        ]

    def __str__(self) -> str:
        return f"{self.approver_repr} {self.decision} (round {self.round})"
