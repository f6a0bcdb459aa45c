"""Where spares live: stock locations per site (warehouse, shelf, bin) and serialised spare parts."""

from __future__ import annotations

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
