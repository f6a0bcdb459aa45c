"""A node's intra-node topology as its agent last reported it (nvidia-smi topo -m and the like)."""

from __future__ import annotations

from django.db import models

from .base import TrackedModel
from .nodes import Node


class NodeTopology(TrackedModel):
    """The link matrix between a node's devices, with each accelerator's CPU / NUMA affinity.

    `links`: [{"a": "GPU0", "b": "NIC1", "kind": "NODE", "b_alias": "mlx5_1"}, ...], one per device pair, sorted.
    `devices`: [{"name": "GPU0", "type": "gpu", "alias": null, "cpu_affinity": "0-31", "numa_affinity": "0"}].
    `digest` is the hash of both: a report changes the row only when it differs (one comparison, no JSON diff).
    """

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="topology")
    sources = models.JSONField(default=list, blank=True)
    devices = models.JSONField(default=list, blank=True)
    links = models.JSONField(default=list, blank=True)
    digest = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        verbose_name_plural = "node topologies"

    def __str__(self) -> str:
        return f"topology of {self.node_id}"
