"""What the scheduler last said about the accelerators of a node it hands work to: an observation, refreshed by the
scheduler sync, not a fact anyone edits (so it keeps no change history; its times say how fresh it is)."""

from __future__ import annotations

from django.db import models

from .nodes import Node


class NodeAllocation(models.Model):
    """Accelerators configured and allocated on a node by its scheduler (Slurm AllocTRES gres/gpu, the pods'
    requests in Kubernetes). `allocated` is null where the scheduler does not account for accelerators.
    `last_allocated_at` is the last read that found any allocated: a node in service with none for days is idle."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, primary_key=True, related_name="allocation")
    scheduler = models.CharField(max_length=32, help_text="The cluster kind whose scheduler was read.")
    total = models.PositiveIntegerField(default=0)
    allocated = models.PositiveIntegerField(null=True, blank=True)
    observed_at = models.DateTimeField()
    last_allocated_at = models.DateTimeField(null=True, blank=True, db_index=True)

    def __str__(self) -> str:
        shown = "?" if self.allocated is None else self.allocated
        return f"{self.node_id}: {shown}/{self.total} allocated"
