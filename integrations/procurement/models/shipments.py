"""Shipments of a purchase order, the items they were expected to carry and did carry, and discrepancies."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from .requests import ProcurementRequest, RequestLine


class ShipmentStatus(models.TextChoices):
    DISPATCHED = "dispatched", "Dispatched"
    DELIVERED = "delivered", "Delivered"


class Shipment(models.Model):
    """One shipment of a PO, known from `shipment.dispatched` and/or `shipment.delivered`.

    Either event may come first. Delivered is authoritative for what is on the dock (assets are created from
    it at once); the dispatch notice says what *should* be in the boxes. Serials are compared only when both
    are known (`is_dispatch_known` and `delivered_at`), and re-compared whenever either changes.
    """

    request = models.ForeignKey(ProcurementRequest, on_delete=models.CASCADE, related_name="shipments")
    shipment_ref = models.CharField(max_length=100, unique=True, help_text="The procurement system's shipment id.")
    status = models.CharField(max_length=16, choices=ShipmentStatus.choices, default=ShipmentStatus.DISPATCHED)
    carrier = models.CharField(max_length=100, blank=True)
    tracking = models.CharField(max_length=100, blank=True)
    is_dispatch_known = models.BooleanField(default=False, help_text="A dispatch notice (expected serials) arrived.")
    dispatched_at = models.DateTimeField(null=True, blank=True)
    expected_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    # When we learned of the delivery: the grace for a missing dispatch notice runs from here, not from the
    # peer's delivered_at (a delivery reported days late must not be flagged the moment it arrives).
    delivery_recorded_at = models.DateTimeField(null=True, blank=True)
    site = models.ForeignKey(
        "cmdb.Site",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Where it was delivered.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["request_id", "created_at"]

    def __str__(self) -> str:
        return f"{self.shipment_ref} ({self.status})"


class ShipmentItemStatus(models.TextChoices):
    EXPECTED = "expected", "Expected (in transit)"
    RECEIVED = "received", "Received"
    MISSING = "missing", "Missing (expected, not delivered)"


class ShipmentItem(models.Model):
    """A serial (or a quantity of a consumable) on a shipment: expected by the dispatch notice, received by the
    delivery, or both. `is_expected` / `is_received` are independent so the order of the events does not
    matter. The asset created on receipt is linked (node, accelerator or part item)."""

    shipment = models.ForeignKey(Shipment, on_delete=models.CASCADE, related_name="items")
    line = models.ForeignKey(RequestLine, null=True, blank=True, on_delete=models.SET_NULL, related_name="items")
    serial = models.CharField(max_length=100, blank=True, help_text="Empty for consumables (by quantity).")
    expected_quantity = models.PositiveIntegerField(default=0)
    received_quantity = models.PositiveIntegerField(default=0)
    is_expected = models.BooleanField(default=False)
    is_received = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=ShipmentItemStatus.choices, default=ShipmentItemStatus.EXPECTED)
    node = models.ForeignKey("cmdb.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    accelerator = models.ForeignKey(
        "cmdb.Accelerator", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    part_item = models.ForeignKey("cmdb.PartItem", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["shipment_id", "line_id", "serial"]
        constraints = [
            models.UniqueConstraint(
                fields=["shipment", "serial"], condition=~Q(serial=""), name="shipmentitem_unique_serial"
            ),
            models.UniqueConstraint(
                fields=["shipment", "line"], condition=Q(serial=""), name="shipmentitem_one_quantity_row_per_line"
            ),
        ]
        indexes = [models.Index(fields=["serial"])]

    def __str__(self) -> str:
        return self.serial or f"{self.received_quantity}/{self.expected_quantity} of line {self.line_id}"


class DiscrepancyKind(models.TextChoices):
    MISSING = "missing", "Expected serial not delivered"
    UNEXPECTED = "unexpected", "Delivered serial not expected"
    DUPLICATE_SERIAL = "duplicate_serial", "Serial already known elsewhere"
    UNKNOWN_LINE = "unknown_line", "Delivered against an unknown line"
    QUANTITY_SHORT = "quantity_short", "Fewer units than dispatched"
    QUANTITY_OVER = "quantity_over", "More units than dispatched"
    OVER_DELIVERED = "over_delivered", "More than the line ordered"
    SITE_MISMATCH = "site_mismatch", "Delivered to another site than the line's"
    NO_SERIALS = "no_serials", "Serialised items delivered without serials"
    NO_DISPATCH_NOTICE = "no_dispatch_notice", "Delivered without a dispatch notice"
    INVOICE_MISMATCH = "invoice_mismatch", "Invoice amount differs from the order"
    CANCELLED_AFTER_RECEIPT = "cancelled_after_receipt", "PO cancelled after goods were received"


class DiscrepancyStatus(models.TextChoices):
    OPEN = "open", "Open"
    RESOLVED = "resolved", "Resolved"


class Discrepancy(models.Model):
    """Something a delivery or an invoice did not match: never silently dropped, shown on the request.

    At most one *open* discrepancy per (request, subject_key) - recomputing after each event updates
    rather than duplicates. A discrepancy the events later explain (a missing serial that came in the next
    shipment) is resolved by gpuops with a note; the rest are resolved by a person.
    """

    request = models.ForeignKey(ProcurementRequest, on_delete=models.CASCADE, related_name="discrepancies")
    shipment = models.ForeignKey(
        Shipment, null=True, blank=True, on_delete=models.CASCADE, related_name="discrepancies"
    )
    line = models.ForeignKey(RequestLine, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=32, choices=DiscrepancyKind.choices)
    serial = models.CharField(max_length=100, blank=True)
    expected_quantity = models.IntegerField(null=True, blank=True)
    actual_quantity = models.IntegerField(null=True, blank=True)
    detail = models.CharField(max_length=500)
    # "<kind>:<shipment id>:<serial or line>": what makes two discrepancies the same one (NULL-free, so the
    # partial unique constraint below holds on every database).
    subject_key = models.CharField(max_length=200)
    status = models.CharField(
        max_length=16, choices=DiscrepancyStatus.choices, default=DiscrepancyStatus.OPEN, db_index=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolution = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["request_id", "-created_at", "id"]
        verbose_name_plural = "discrepancies"
        constraints = [
            models.UniqueConstraint(
                fields=["request", "subject_key"], condition=Q(status="open"), name="discrepancy_one_open_per_subject"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.serial or self.detail}"
