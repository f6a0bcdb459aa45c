"""Fabrics, switches, switch ports and the (planned or observed) links between ports."""

from __future__ import annotations

from django.db import models

from .base import TrackedModel
from .catalog import Tag, Vendor
from .locations import Rack, RackFace, Site
from .nodes import LinkState, NicPort


class FabricKind(models.TextChoices):
    INFINIBAND = "infiniband", "InfiniBand"
    ROCE = "roce", "RoCE v2"
    ETHERNET = "ethernet", "Ethernet"
    NVLINK = "nvlink", "NVLink"


class FabricPurpose(models.TextChoices):
    COMPUTE = "compute", "Compute"
    STORAGE = "storage", "Storage"
    MANAGEMENT = "management", "Management"
    OOB = "oob", "Out-of-band"


class Fabric(TrackedModel):
    """A network fabric. A rail-optimised compute fabric sends HCA i of every node in a scalable unit to rail
    leaf i."""

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=FabricKind.choices)
    purpose = models.CharField(max_length=16, choices=FabricPurpose.choices)
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="fabrics")
    is_rail_optimized = models.BooleanField(default=False)
    rail_count = models.PositiveSmallIntegerField(default=0)
    scalable_unit_size = models.PositiveSmallIntegerField(default=32, help_text="Nodes per scalable unit.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SwitchRole(models.TextChoices):
    LEAF = "leaf", "Leaf"
    SPINE = "spine", "Spine"
    CORE = "core", "Core"
    MANAGEMENT = "management", "Management"
    OOB = "oob", "Out-of-band"


class SwitchStatus(models.TextChoices):
    PLANNED = "planned", "Planned"
    ACTIVE = "active", "Active"
    MAINTENANCE = "maintenance", "Maintenance"
    FAILED = "failed", "Failed"
    DECOMMISSIONED = "decommissioned", "Decommissioned"


class Switch(TrackedModel):
    """A network switch. SNMP/SSH credentials are referenced by name, never stored here."""

    name = models.CharField(max_length=253, unique=True)
    vendor = models.ForeignKey(Vendor, on_delete=models.PROTECT, related_name="switches")
    model_name = models.CharField(max_length=100, blank=True)
    os_name = models.CharField(max_length=100, blank=True)
    os_version = models.CharField(max_length=100, blank=True)
    platform = models.CharField(max_length=32, blank=True, help_text="netmiko device type, e.g. cisco_nxos.")
    mgmt_ip = models.GenericIPAddressField(null=True, blank=True, unique=True)
    serial = models.CharField(max_length=100, null=True, blank=True, unique=True)
    role = models.CharField(max_length=16, choices=SwitchRole.choices, default=SwitchRole.LEAF)
    status = models.CharField(max_length=16, choices=SwitchStatus.choices, default=SwitchStatus.ACTIVE)
    fabric = models.ForeignKey(Fabric, null=True, blank=True, on_delete=models.SET_NULL, related_name="switches")
    rail = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Rail this leaf serves.")
    scalable_unit = models.PositiveSmallIntegerField(null=True, blank=True)
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="switches")
    rack = models.ForeignKey(Rack, null=True, blank=True, on_delete=models.PROTECT, related_name="switches")
    position = models.PositiveSmallIntegerField(null=True, blank=True)
    face = models.CharField(max_length=8, choices=RackFace.choices, default=RackFace.FRONT)
    u_height = models.PositiveSmallIntegerField(default=1)
    snmp_credential_ref = models.CharField(max_length=100, blank=True, help_text="Name of a credential, not a secret.")
    cli_credential_ref = models.CharField(max_length=100, blank=True)
    tags = models.ManyToManyField(Tag, blank=True, related_name="switches")

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "switches"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from ..services.racks import rack_overlap_errors

        if self.rack_id and self.site_id and self.rack.room.site_id != self.site_id:
            raise ValidationError({"rack": f"Rack {self.rack} is not in site {self.site}."})
        if self.rack_id and self.position:
            msg = rack_overlap_errors(
                rack=self.rack, position=self.position, u_height=self.u_height, face=self.face, switch_id=self.pk
            )
            if msg:
                raise ValidationError({"position": msg})


class SwitchPort(TrackedModel):
    """A switch port, as planned or as discovered (IF-MIB / CLI)."""

    switch = models.ForeignKey(Switch, on_delete=models.CASCADE, related_name="ports")
    name = models.CharField(max_length=64)
    description = models.CharField(max_length=200, blank=True)
    speed_mbps = models.PositiveIntegerField(null=True, blank=True)
    admin_state = models.CharField(max_length=16, choices=LinkState.choices, default=LinkState.UNKNOWN)
    oper_state = models.CharField(max_length=16, choices=LinkState.choices, default=LinkState.UNKNOWN)
    mac = models.CharField(max_length=17, blank=True)
    guid = models.CharField(max_length=32, blank=True, db_index=True)
    mtu = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["switch_id", "name"]
        constraints = [models.UniqueConstraint(fields=["switch", "name"], name="switchport_unique_name")]

    def __str__(self) -> str:
        return f"{self.switch}:{self.name}"


class CableType(models.TextChoices):
    DAC = "dac", "DAC (copper)"
    AOC = "aoc", "AOC"
    FIBER = "fiber", "Fiber + optics"
    CAT6 = "cat6", "Cat6"


class LinkStatus(models.TextChoices):
    PLANNED = "planned", "Planned"
    CONNECTED = "connected", "Connected (verified)"
    MISMATCH = "mismatch", "Mismatch"


class Link(TrackedModel):
    """A cable: from a node NIC port or a switch port (side A) to a switch port (side B).

    A port carries at most one link on each side; the database holds that per column.
    """

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="links")
    a_nic_port = models.OneToOneField(NicPort, null=True, blank=True, on_delete=models.CASCADE, related_name="link")
    a_switch_port = models.OneToOneField(
        SwitchPort, null=True, blank=True, on_delete=models.CASCADE, related_name="link_as_a"
    )
    b_switch_port = models.OneToOneField(SwitchPort, on_delete=models.CASCADE, related_name="link_as_b")
    cable_type = models.CharField(max_length=16, choices=CableType.choices, default=CableType.DAC)
    length_m = models.DecimalField(max_digits=6, decimal_places=2, null=True, blank=True)
    cable_serial = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=16, choices=LinkStatus.choices, default=LinkStatus.PLANNED, db_index=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(a_nic_port__isnull=False, a_switch_port__isnull=True)
                    | models.Q(a_nic_port__isnull=True, a_switch_port__isnull=False)
                ),
                name="link_one_a_side",
            ),
            models.CheckConstraint(condition=~models.Q(a_switch_port=models.F("b_switch_port")), name="link_not_loop"),
        ]

    def __str__(self) -> str:
        a = self.a_nic_port if self.a_nic_port_id else self.a_switch_port
        return f"{a} <-> {self.b_switch_port}"
