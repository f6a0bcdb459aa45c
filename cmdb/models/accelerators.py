"""Accelerator cards and the append-only history of where each card has been."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .base import TrackedModel
from .catalog import AcceleratorModel
from .locations import Site
from .nodes import Health, Node
from .stock import StockLocation


class AcceleratorLifecycle(models.TextChoices):
    IN_STOCK = "in_stock", "In stock"
    INSTALLED = "installed", "Installed"
    IN_TRANSIT = "in_transit", "In transit"
    FAILED = "failed", "Failed (removed)"
    RMA = "rma", "RMA (at vendor)"
    SCRAPPED = "scrapped", "Scrapped"


class Accelerator(TrackedModel):
    """One physical accelerator card (an NVIDIA GPU, an Ascend NPU, a Hygon DCU), identified by its serial.

    Invariants (held in the database): a card is in a node or in a stock location, never both; an installed
    card has a node; a node slot holds one card. `site` is kept by the services that move cards, so grants and
    fleet summaries need no joins. Lifecycle and health are separate: a failed card may still be installed.
    """

    model = models.ForeignKey(AcceleratorModel, on_delete=models.PROTECT, related_name="accelerators")
    serial = models.CharField(max_length=100, null=True, blank=True, unique=True)
    uuid = models.CharField(max_length=64, null=True, blank=True, unique=True, help_text="GPU UUID / board id.")
    lifecycle = models.CharField(
        max_length=16, choices=AcceleratorLifecycle.choices, default=AcceleratorLifecycle.IN_STOCK, db_index=True
    )
    health = models.CharField(max_length=16, choices=Health.choices, default=Health.UNKNOWN, db_index=True)
    health_detail = models.CharField(max_length=500, blank=True)
    health_changed_at = models.DateTimeField(null=True, blank=True)

    site = models.ForeignKey(Site, null=True, blank=True, on_delete=models.PROTECT, related_name="accelerators")
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.PROTECT, related_name="accelerators")
    slot_index = models.PositiveSmallIntegerField(null=True, blank=True)
    pci_bus_id = models.CharField(max_length=32, blank=True)
    stock_location = models.ForeignKey(
        StockLocation, null=True, blank=True, on_delete=models.PROTECT, related_name="accelerators"
    )
    firmware_version = models.CharField(max_length=100, blank=True, help_text="VBIOS / firmware.")
    driver_version = models.CharField(max_length=100, blank=True)
    # Seen missing from its node's latest report ("expected 8, saw 7"): drift to act on, not a deletion.
    is_missing = models.BooleanField(default=False)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    po_number = models.CharField(max_length=64, blank=True, db_index=True)
    supplier = models.CharField(max_length=200, blank=True)
    purchase_date = models.DateField(null=True, blank=True)
    warranty_end = models.DateField(null=True, blank=True, db_index=True)  # the warranty reports and filters

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(node__isnull=False, stock_location__isnull=False),
                name="accelerator_node_or_stock",
            ),
            models.CheckConstraint(
                condition=~models.Q(lifecycle="installed", node__isnull=True),
                name="accelerator_installed_has_node",
            ),
            models.CheckConstraint(
                condition=~models.Q(lifecycle="in_stock", stock_location__isnull=True),
                name="accelerator_in_stock_has_location",
            ),
            models.UniqueConstraint(
                fields=["node", "slot_index"],
                condition=models.Q(node__isnull=False, slot_index__isnull=False),
                name="accelerator_one_per_slot",
            ),
        ]
        indexes = [
            models.Index(fields=["site", "health"]),
            models.Index(fields=["model", "health"]),
            models.Index(fields=["node", "slot_index"]),
        ]

    def __str__(self) -> str:
        return self.serial or self.uuid or f"accelerator #{self.pk}"


class PlacementKind(models.TextChoices):
    NODE = "node", "In a node"
    STOCK = "stock", "In stock"
    IN_TRANSIT = "in_transit", "In transit"
    AT_VENDOR = "at_vendor", "At vendor (RMA)"
    SCRAPPED = "scrapped", "Scrapped"


class AcceleratorPlacement(models.Model):
    """Append-only: where a card was from `started_at` until `ended_at` (open while current).

    A card moved between servers keeps its whole story. Rows are only ever added, and closed by setting
    ended_at once; cmdb.services.accelerators is the only writer.
    """

    accelerator = models.ForeignKey(Accelerator, on_delete=models.CASCADE, related_name="placements")
    serial = models.CharField(max_length=100, blank=True, help_text="The card's serial when it was placed.")
    kind = models.CharField(max_length=16, choices=PlacementKind.choices)
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    node_hostname = models.CharField(max_length=253, blank=True)
    slot_index = models.PositiveSmallIntegerField(null=True, blank=True)
    stock_location = models.ForeignKey(
        StockLocation, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.CharField(max_length=300, blank=True)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    source = models.CharField(max_length=16, blank=True)
    correlation_id = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["accelerator_id", "started_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["accelerator"], condition=models.Q(ended_at__isnull=True), name="placement_one_open"
            )
        ]

    def __str__(self) -> str:
        where = self.node_hostname or (str(self.stock_location) if self.stock_location_id else self.kind)
        return f"{self.serial} @ {where}"
