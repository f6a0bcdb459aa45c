"""Node locks: at most one open change holds a node at a time."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class NodeLock(models.Model):
    """A node held by an open change (a driver rollout, a provisioning run, or any ticket that asks).

    Invariant (held by the database): at most one *active* lock (released_at empty) per node, through a partial
    unique constraint, so two changes planned at the same moment cannot both take a node: the second INSERT
    fails. Acquire and release only through `workflows.rollouts.locks`; rows are kept after release as history.
    """

    node = models.ForeignKey("cmdb.Node", on_delete=models.CASCADE, related_name="change_locks")
    # Who holds it: a stable key ("rollout:12", "provisioning:3", "ticket:45") and what people see ("ROL-12").
    owner_key = models.CharField(max_length=64, db_index=True)
    owner_label = models.CharField(max_length=100)
    # SET_NULL: the lock row is history and outlives its ticket.
    ticket = models.ForeignKey("workflows.Ticket", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    reason = models.CharField(max_length=300, blank=True)
    acquired_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-acquired_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["node"], condition=Q(released_at__isnull=True), name="nodelock_one_active_per_node"
            ),
        ]
        indexes = [models.Index(fields=["owner_key", "released_at"])]

    def __str__(self) -> str:
        state = "released" if self.released_at else "held"
        return f"{self.node_id} {state} by {self.owner_label}"

    @property
    def is_active(self) -> bool:
        return self.released_at is None
