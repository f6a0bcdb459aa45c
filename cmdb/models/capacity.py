"""Card-hours by state and the cost model that prices them.

`NodeStateSpan` and `CardHours` are rollups rebuilt by cmdb.services.capacity from the change history and the
card placement history (never written anywhere else); the prices are data, edited in the admin or the API.
"""

from __future__ import annotations

from django.db import models

from .catalog import AcceleratorModel
from .locations import Site
from .nodes import Node
from .org import Cluster, Tenant


class CardState(models.TextChoices):
    """Where a card's hours go. A card in a node takes the node's state; elsewhere its placement decides."""

    IN_SERVICE = "in_service", "In service"  # node active and schedulable
    IDLE = "idle", "Idle"  # node active but cordoned, or draining
    REPAIR = "repair", "Under repair"  # node in maintenance or failed
    RMA = "rma", "RMA"  # node or card at the vendor
    BURN_IN = "burn_in", "Burn-in / provisioning"  # node planned, received, racked, provisioning or in burn-in
    IN_STOCK = "in_stock", "In stock"
    IN_TRANSIT = "in_transit", "In transit"
    RETIRED = "retired", "Retired"  # in a decommissioned node


class NodeStateSpan(models.Model):
    """A node's state (CardState) from `started_at` until `ended_at` (open: still), derived from its status and
    cordon history. The first span of a node starts at the beginning of time: before its first recorded change
    the node was in that change's old state."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=16, choices=CardState.choices)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["node", "started_at"])]

    def __str__(self) -> str:
        return f"{self.node_id} {self.state} from {self.started_at:%Y-%m-%d %H:%M}"


class CardHours(models.Model):
    """Card-hours of one month (UTC) by where the cards were, what held them and their state. Site, cluster and
    tenant are the node's at the time of the rollup (a card in stock: its stock site, no cluster or tenant)."""

    month = models.DateField(help_text="The first day of the month (UTC).")
    site = models.ForeignKey(Site, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    model = models.ForeignKey(AcceleratorModel, on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=16, choices=CardState.choices)
    hours = models.FloatField()
    computed_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["month", "state"])]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.state}: {self.hours:.1f} h"
