"""Warehouse data of our own: minimum stock levels, discrepancies against the WMS and stock takes, and the
state of the WMS sync. The ledger itself (StockMovement) and reservations are CMDB models (cmdb.models.stock);
the proxies at the end give them an admin here without touching the CMDB's admin registrations.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from cmdb.models import Site, StockMovement, StockReservation


class MinimumStock(models.Model):
    """The fewest free spares of one model a site should hold, and the level a refill orders up to.

    Falling below `minimum` (free = on hand - reserved) opens or updates the single open refill request for
    this site and model (integrations.procurement). Exactly one of accelerator_model / part_model.
    """

    # PROTECT: thresholds are policy; deleting a site or model should not silently drop them.
    site = models.ForeignKey("cmdb.Site", on_delete=models.PROTECT, related_name="+")
    accelerator_model = models.ForeignKey(
        "cmdb.AcceleratorModel", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    part_model = models.ForeignKey("cmdb.PartModel", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    minimum = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    target = models.PositiveIntegerField(
        null=True, blank=True, help_text="Order up to this many free spares; empty = the minimum."
    )
    is_active = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["site__code", "id"]
        verbose_name = "minimum stock level"
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(accelerator_model__isnull=False, part_model__isnull=True)
                    | Q(accelerator_model__isnull=True, part_model__isnull=False)
                ),
                name="minimumstock_exactly_one_model",
            ),
            models.UniqueConstraint(
                fields=["site", "accelerator_model"],
                condition=Q(accelerator_model__isnull=False),
                name="minimumstock_unique_accelerator_model",
            ),
            models.UniqueConstraint(
                fields=["site", "part_model"],
                condition=Q(part_model__isnull=False),
                name="minimumstock_unique_part_model",
            ),
            models.CheckConstraint(
                condition=Q(target__isnull=True) | Q(target__gte=models.F("minimum")),
                name="minimumstock_target_at_least_minimum",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.site_id}: {self.item} >= {self.minimum}"

    def clean(self) -> None:
        if bool(self.accelerator_model_id) == bool(self.part_model_id):
            raise ValidationError("Set exactly one of an accelerator model and a part model.")
        if self.target is not None and self.target < self.minimum:
            raise ValidationError({"target": "The target must be at least the minimum."})

    @property
    def item(self):
        return self.accelerator_model or self.part_model

    @property
    def order_up_to(self) -> int:
        return self.target if self.target is not None else self.minimum


class StockDiscrepancyKind(models.TextChoices):
    WMS_QUANTITY = "wms_quantity", "WMS count differs from the ledger"
    WMS_SERIAL_MISSING = "wms_serial_missing", "In stock per the ledger, not in the WMS"
    WMS_SERIAL_UNKNOWN = "wms_serial_unknown", "In the WMS, not in stock per the ledger"
    WMS_MOVEMENT_UNMATCHED = "wms_movement_unmatched", "WMS movement with no ledger movement"
    STOCKTAKE_MISSING = "stocktake_missing", "Not found at the stock take"
    STOCKTAKE_UNEXPECTED = "stocktake_unexpected", "Found at the stock take, not expected there"
    LEDGER_DRIFT = "ledger_drift", "Ledger on-hand differs from the cards in stock"


class StockDiscrepancy(models.Model):
    """A difference between our ledger and another view of the stock (the WMS, a stock take).

    Reported, never auto-corrected: the ledger changes only through movements a person or a workflow makes.
    At most one open row per `subject_key`; a re-run updates the figures, and a difference that went away is
    resolved by gpuops with a note.
    """

    site = models.ForeignKey("cmdb.Site", on_delete=models.CASCADE, related_name="+")
    location = models.ForeignKey(
        "cmdb.StockLocation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    kind = models.CharField(max_length=32, choices=StockDiscrepancyKind.choices)
    accelerator_model = models.ForeignKey(
        "cmdb.AcceleratorModel", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    part_model = models.ForeignKey("cmdb.PartModel", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    sku = models.CharField(max_length=100, blank=True)
    serial = models.CharField(max_length=100, blank=True)
    ledger_quantity = models.IntegerField(null=True, blank=True)
    other_quantity = models.IntegerField(null=True, blank=True, help_text="The WMS's or the stock take's figure.")
    detail = models.CharField(max_length=500)
    subject_key = models.CharField(max_length=200)
    status = models.CharField(
        max_length=16, choices=[("open", "Open"), ("resolved", "Resolved")], default="open", db_index=True
    )
    detected_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolution = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-detected_at", "-id"]
        verbose_name_plural = "stock discrepancies"
        constraints = [
            models.UniqueConstraint(
                fields=["subject_key"], condition=Q(status="open"), name="stockdiscrepancy_one_open_per_subject"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.serial or self.sku or self.detail}"


class WmsSyncRun(models.Model):
    """One pull of stock levels from the WMS (and its reconciliation) or one push of ledger movements."""

    class Direction(models.TextChoices):
        PULL = "pull", "Pull levels"
        PUSH = "push", "Push movements"

    direction = models.CharField(max_length=8, choices=Direction.choices)
    site = models.ForeignKey(Site, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=16, default="running", db_index=True)  # running, ok, failed
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    items = models.PositiveIntegerField(default=0, help_text="Levels compared or movements pushed.")
    discrepancies = models.PositiveIntegerField(default=0)
    last_movement_id = models.BigIntegerField(null=True, blank=True, help_text="Push: the watermark reached.")
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"WMS {self.direction} {self.started_at:%Y-%m-%d %H:%M} {self.status}"


class LedgerMovement(StockMovement):
    """The CMDB's StockMovement, for the warehouse admin (a proxy: same table, no new data)."""

    class Meta:
        proxy = True
        verbose_name = "stock movement"


class SpareReservation(StockReservation):
    """The CMDB's StockReservation, for the warehouse admin (a proxy)."""

    class Meta:
        proxy = True
        verbose_name = "spare reservation"


class SiteStockOverview(Site):
    """A site, seen as its spares against its installed base (the admin's stock overview page)."""

    class Meta:
        proxy = True
        verbose_name = "stock overview"
        verbose_name_plural = "stock overview"
