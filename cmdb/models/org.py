"""Who uses the fleet: clusters (Slurm / Kubernetes) and tenants."""

from __future__ import annotations

from django.db import models

from .base import TrackedModel
from .locations import Site


class ClusterKind(models.TextChoices):
    SLURM = "slurm", "Slurm"
    KUBERNETES = "kubernetes", "Kubernetes"


class Cluster(TrackedModel):
    """A scheduler domain. Grants on a cluster cover its nodes and their cards."""

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=ClusterKind.choices, default=ClusterKind.SLURM)
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="clusters")
    # Minimum share of the cluster's nodes that must stay schedulable during changes (0-100).
    capacity_floor_percent = models.PositiveSmallIntegerField(default=80)

    class Meta:
        ordering = ["name"]
        permissions = [
            ("view_scope", "Can view inventory in this cluster"),
            ("change_scope", "Can change inventory in this cluster"),
        ]

    def __str__(self) -> str:
        return self.name


class TenantKind(models.TextChoices):
    TEAM = "team", "Internal team"
    CUSTOMER = "customer", "Customer"


class Tenant(TrackedModel):
    """A team or customer that nodes are allocated to. Grants on a tenant cover its nodes."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=TenantKind.choices, default=TenantKind.TEAM)

    class Meta:
        ordering = ["slug"]
        permissions = [
            ("view_scope", "Can view inventory of this tenant"),
            ("change_scope", "Can change inventory of this tenant"),
        ]

    def __str__(self) -> str:
        return self.name
