"""Physical servers and their non-accelerator components (CPUs, memory, disks, PSUs, NICs/HCAs and ports)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from .base import TrackedModel
from .catalog import ServerModel, Tag
from .locations import Rack, RackFace, Site
from .org import Cluster, Tenant


class NodeStatus(models.TextChoices):
    """Lifecycle of a server. Health and schedulability are separate fields."""

    PLANNED = "planned", "Planned"
    RECEIVED = "received", "Received"
    RACKED = "racked", "Racked"
    PROVISIONING = "provisioning", "Provisioning"
    BURN_IN = "burn_in", "Burn-in"
    ACTIVE = "active", "Active"
    DRAINING = "draining", "Draining"
    MAINTENANCE = "maintenance", "Maintenance"
    FAILED = "failed", "Failed"
    RMA = "rma", "RMA"
    DECOMMISSIONED = "decommissioned", "Decommissioned"


class Health(models.TextChoices):
    """Health of a card or node (the worst card sets the node's)."""

    OK = "ok", "OK"
    DEGRADED = "degraded", "Degraded"
    FAILED = "failed", "Failed"
    UNKNOWN = "unknown", "Unknown"


HEALTH_RANK = {Health.OK: 0, Health.UNKNOWN: 1, Health.DEGRADED: 2, Health.FAILED: 3}


class NodeRole(models.TextChoices):
    COMPUTE = "compute", "Compute (training)"
    INFERENCE = "inference", "Inference"
    STORAGE = "storage", "Storage"
    LOGIN = "login", "Login / head"
    SERVICE = "service", "Service"


class Node(TrackedModel):
    """A physical server.

    Invariants: serial unique; a racked node's rack is in its site; its U range lies in the rack and
    overlaps no other device (RackUnit rows hold that in the database); a cordon carries a reason.
    """

    hostname = models.CharField(max_length=253, unique=True)
    serial = models.CharField(max_length=100, unique=True)
    asset_tag = models.CharField(max_length=100, blank=True, db_index=True)
    server_model = models.ForeignKey(ServerModel, on_delete=models.PROTECT, related_name="nodes")
    bmc_address = models.GenericIPAddressField(null=True, blank=True, unique=True)
    os_name = models.CharField(max_length=100, blank=True)
    kernel = models.CharField(max_length=100, blank=True)
    bios_version = models.CharField(max_length=100, blank=True)

    status = models.CharField(max_length=16, choices=NodeStatus.choices, default=NodeStatus.PLANNED, db_index=True)
    health = models.CharField(max_length=16, choices=Health.choices, default=Health.UNKNOWN, db_index=True)
    role = models.CharField(max_length=16, choices=NodeRole.choices, default=NodeRole.COMPUTE)

    is_cordoned = models.BooleanField(default=False, help_text="Unschedulable (manual or by a workflow).")
    cordon_reason = models.CharField(max_length=300, blank=True)

    # PROTECT on site/rack: a node's location is never erased by deleting a location.
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="nodes")
    rack = models.ForeignKey(Rack, null=True, blank=True, on_delete=models.PROTECT, related_name="nodes")
    position = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Lowest U occupied.")
    face = models.CharField(max_length=8, choices=RackFace.choices, default=RackFace.FRONT)

    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.SET_NULL, related_name="nodes")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.SET_NULL, related_name="nodes")
    tags = models.ManyToManyField(Tag, blank=True, related_name="nodes")
    labels = models.JSONField(default=dict, blank=True)

    # Facts reported by the agent.
    cpu_model = models.CharField(max_length=200, blank=True)
    cpu_count = models.PositiveSmallIntegerField(default=0)
    memory_gib = models.PositiveIntegerField(default=0)
    last_seen_at = models.DateTimeField(null=True, blank=True, db_index=True)
    is_stale = models.BooleanField(default=False, help_text="The agent stopped reporting.")
    # Fields an operator locked against agent overwrites.
    locked_fields = models.JSONField(default=list, blank=True)

    po_number = models.CharField(max_length=64, blank=True, db_index=True)
    supplier = models.CharField(max_length=200, blank=True)
    purchase_date = models.DateField(null=True, blank=True)
    warranty_end = models.DateField(null=True, blank=True, db_index=True)  # the warranty reports and filters

    class Meta:
        ordering = ["hostname"]
        # Force a change on a node held by an open ticket or lock (cmdb.holds); the ticket is told and paused.
        permissions = [("override_hold", "Can override a ticket's hold on a node")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(is_cordoned=False) | ~models.Q(cordon_reason=""),
                name="node_cordon_needs_reason",
            ),
            models.CheckConstraint(
                condition=models.Q(rack__isnull=True, position__isnull=True) | models.Q(rack__isnull=False),
                name="node_position_needs_rack",
            ),
        ]
        indexes = [models.Index(fields=["site", "status"]), models.Index(fields=["cluster", "status"])]

    def __str__(self) -> str:
        return self.hostname

    @property
    def u_height(self) -> int:
        return self.server_model.u_height

    def clean(self) -> None:
        from ..services.racks import rack_overlap_errors  # avoid a models <-> services import cycle

        errors: dict[str, str] = {}
        if self.is_cordoned and not self.cordon_reason.strip():
            errors["cordon_reason"] = "A cordoned node needs a reason."
        if self.rack_id and self.site_id and self.rack.room.site_id != self.site_id:
            errors["rack"] = f"Rack {self.rack} is not in site {self.site}."
        if self.rack_id and self.position and self.server_model_id:
            msg = rack_overlap_errors(
                rack=self.rack,
                position=self.position,
                u_height=self.server_model.u_height,
                face=self.face,
                node_id=self.pk,
            )
            if msg:
                errors["position"] = msg
        if errors:
            raise ValidationError(errors)


class ComponentKind(models.TextChoices):
    CPU = "cpu", "CPU"
    MEMORY = "memory", "Memory module"
    DISK = "disk", "Disk"
    PSU = "psu", "Power supply"


class Component(TrackedModel):
    """A CPU, memory module, disk or PSU inside a node."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="components")
    kind = models.CharField(max_length=16, choices=ComponentKind.choices)
    slot = models.CharField(max_length=64, help_text="Socket, DIMM slot, bay or PSU number.")
    vendor_name = models.CharField(max_length=100, blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    serial = models.CharField(max_length=100, null=True, blank=True)
    capacity = models.CharField(max_length=64, blank=True, help_text="e.g. '64 GiB', '3.84 TB', '3000 W'.")
    firmware = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["node_id", "kind", "slot"]
        constraints = [models.UniqueConstraint(fields=["node", "kind", "slot"], name="component_unique_slot")]

    def __str__(self) -> str:
        return f"{self.node} {self.kind} {self.slot}"


class NicKind(models.TextChoices):
    ETHERNET = "ethernet", "Ethernet"
    INFINIBAND = "infiniband", "InfiniBand HCA"
    ROCE = "roce", "RoCE NIC"
    BMC = "bmc", "BMC"


class Nic(TrackedModel):
    """A NIC or HCA in a node. Its ports carry the identities (MAC, port GUID)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="nics")
    name = models.CharField(max_length=64, help_text="Device name: mlx5_0, eth0, ...")
    kind = models.CharField(max_length=16, choices=NicKind.choices, default=NicKind.ETHERNET)
    model_name = models.CharField(max_length=200, blank=True)
    serial = models.CharField(max_length=100, null=True, blank=True)
    pci_bus_id = models.CharField(max_length=32, blank=True)
    firmware = models.CharField(max_length=100, blank=True)
    node_guid = models.CharField(max_length=32, blank=True)
    rail = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Rail index on the compute fabric.")
    is_missing = models.BooleanField(default=False)

    class Meta:
        ordering = ["node_id", "name"]
        constraints = [models.UniqueConstraint(fields=["node", "name"], name="nic_unique_name_per_node")]

    def __str__(self) -> str:
        return f"{self.node}:{self.name}"


class LinkState(models.TextChoices):
    UP = "up", "Up"
    DOWN = "down", "Down"
    UNKNOWN = "unknown", "Unknown"


class NicPort(TrackedModel):
    """A port of a NIC/HCA: MAC for Ethernet/RoCE, port GUID for InfiniBand."""

    nic = models.ForeignKey(Nic, on_delete=models.CASCADE, related_name="ports")
    name = models.CharField(max_length=64, help_text="Port number or interface name.")
    mac = models.CharField(max_length=17, blank=True, db_index=True)
    guid = models.CharField(max_length=32, blank=True, db_index=True)
    speed_mbps = models.PositiveIntegerField(null=True, blank=True)
    link_state = models.CharField(max_length=16, choices=LinkState.choices, default=LinkState.UNKNOWN)

    class Meta:
        ordering = ["nic_id", "name"]
        constraints = [models.UniqueConstraint(fields=["nic", "name"], name="nicport_unique_name_per_nic")]

    def __str__(self) -> str:
        return f"{self.nic}/{self.name}"


__all__ = [
    "HEALTH_RANK",
    "Component",
    "ComponentKind",
    "Health",
    "LinkState",
    "Nic",
    "NicKind",
    "NicPort",
    "Node",
    "NodeRole",
    "NodeStatus",
]
