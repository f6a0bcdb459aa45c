"""Where spares live: stock locations per site (warehouse, shelf, bin) and serialised spare parts."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .base import TrackedModel
from .catalog import PartModel
from .locations import Site
from .nodes import Node


class StockLocationKind(models.TextChoices):
    WAREHOUSE = "warehouse", "Warehouse"
    SHELF = "shelf", "Shelf"
    BIN = "bin", "Bin"


class StockLocation(TrackedModel):
    """A place that holds spares at a site: a warehouse, a shelf in it, or a bin on a shelf."""

    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="stock_locations")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=StockLocationKind.choices, default=StockLocationKind.WAREHOUSE)

    class Meta:
        ordering = ["site__code", "name"]
        constraints = [models.UniqueConstraint(fields=["site", "name"], name="stocklocation_unique_name_per_site")]

    def __str__(self) -> str:
        return f"{self.site.code}:{self.name}"


class PartItemStatus(models.TextChoices):
    IN_STOCK = "in_stock", "In stock"
    INSTALLED = "installed", "Installed"
    RMA = "rma", "RMA"
    SCRAPPED = "scrapped", "Scrapped"


class PartItem(TrackedModel):
    """A serialised spare part (NIC, optic, PSU): in a stock location or installed in a node, never both."""

    part_model = models.ForeignKey(PartModel, on_delete=models.PROTECT, related_name="items")
    serial = models.CharField(max_length=100, unique=True)
    status = models.CharField(max_length=16, choices=PartItemStatus.choices, default=PartItemStatus.IN_STOCK)
    stock_location = models.ForeignKey(
        StockLocation, null=True, blank=True, on_delete=models.PROTECT, related_name="part_items"
    )
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="part_items")

    class Meta:
        ordering = ["serial"]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(stock_location__isnull=False, node__isnull=False),
                name="partitem_stock_or_node",
            )
        ]

    def __str__(self) -> str:
        return self.serial


class MovementKind(models.TextChoices):
    RECEIVE = "receive", "Receive"
    RESERVE = "reserve", "Reserve"
    RELEASE = "release", "Release reservation"
    ISSUE = "issue", "Issue to a node"
    RETURN = "return", "Return to stock"
    RMA_OUT = "rma_out", "RMA out to vendor"
    RMA_BACK = "rma_back", "RMA back from vendor"
    SCRAP = "scrap", "Scrap"
    TRANSFER = "transfer", "Transfer between sites"
    ADJUST = "adjust", "Stock-take adjustment"


class StockMovement(models.Model):
    """The stock ledger: one append-only row per movement. Quantities are derived from it, never edited.

    Serialised items (cards, NICs, optics) move by serial (`accelerator` or `part_item`, quantity 1);
    consumables move by `part_model` and `quantity` (negative for outflows from `location`).
    """

    at = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=16, choices=MovementKind.choices)
    accelerator = models.ForeignKey(
        "cmdb.Accelerator", null=True, blank=True, on_delete=models.PROTECT, related_name="movements"
    )
    part_item = models.ForeignKey(PartItem, null=True, blank=True, on_delete=models.PROTECT, related_name="movements")
    part_model = models.ForeignKey(PartModel, null=True, blank=True, on_delete=models.PROTECT, related_name="movements")
    accelerator_model = models.ForeignKey(
        "cmdb.AcceleratorModel", null=True, blank=True, on_delete=models.PROTECT, related_name="movements"
    )
    quantity = models.IntegerField(default=1, help_text="Signed change of on-hand stock at `location`.")
    location = models.ForeignKey(
        StockLocation, null=True, blank=True, on_delete=models.PROTECT, related_name="movements"
    )
    to_location = models.ForeignKey(StockLocation, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.CharField(max_length=300, blank=True)
    ticket_ref = models.CharField(max_length=64, blank=True, db_index=True)
    correlation_id = models.CharField(max_length=64, blank=True)
    # Makes a retried movement a no-op (e.g. "ticket 42 step reserve").
    idempotency_key = models.CharField(max_length=128, null=True, blank=True, unique=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["location", "accelerator_model"]),
            models.Index(fields=["part_model", "location"]),
        ]

    def __str__(self) -> str:
        what = self.accelerator or self.part_item or self.part_model or self.accelerator_model
        return f"{self.at:%Y-%m-%d} {self.kind} {what} x{self.quantity}"


class ReservationStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    ISSUED = "issued", "Issued"
    RELEASED = "released", "Released"
    EXPIRED = "expired", "Expired"


class StockReservation(models.Model):
    """A spare held for a purpose (a repair ticket). One active reservation per card, held by the database."""

    accelerator = models.ForeignKey("cmdb.Accelerator", on_delete=models.PROTECT, related_name="reservations")
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=16, choices=ReservationStatus.choices, default=ReservationStatus.ACTIVE)
    reserved_for = models.CharField(max_length=64, help_text="What holds it, e.g. 'ticket:42'.", db_index=True)
    reserved_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-reserved_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["accelerator"], condition=models.Q(status="active"), name="reservation_one_active_per_card"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.accelerator} for {self.reserved_for} ({self.status})"
