"""Catalog data: vendors, server models, accelerator models, part models, tags.

Vendors are rows, not an enum: adding Cambricon or MetaX is one new row (plus, for the agent, one collector).
"""

from __future__ import annotations

from django.core.validators import MinValueValidator
from django.db import models

from .base import TrackedModel


class Vendor(TrackedModel):
    """A hardware or software vendor. `slug` is what agents and imports use (nvidia, ascend, hygon, ...)."""

    slug = models.SlugField(max_length=32, unique=True)
    name = models.CharField(max_length=100)
    makes_accelerators = models.BooleanField(default=False)
    # How each vendor's management tool names its health states, mapped onto ours (data, not code).
    health_aliases = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name


class Interconnect(models.TextChoices):
    NVLINK = "nvlink", "NVLink"
    NVSWITCH = "nvswitch", "NVLink + NVSwitch"
    HCCS = "hccs", "HCCS"
    XGMI = "xgmi", "xGMI"
    PCIE = "pcie", "PCIe only"


class FormFactor(models.TextChoices):
    SXM = "sxm", "SXM"
    OAM = "oam", "OAM"
    PCIE = "pcie", "PCIe card"
    MODULE = "module", "Mezzanine module"


class AcceleratorModel(TrackedModel):
    """A model of accelerator card (H100-SXM5-80GB, Ascend 910B3, Hygon K100)."""

    vendor = models.ForeignKey(Vendor, on_delete=models.PROTECT, related_name="accelerator_models")
    name = models.CharField(max_length=100, unique=True)
    memory_gib = models.PositiveIntegerField(default=0)
    interconnect = models.CharField(max_length=16, choices=Interconnect.choices, default=Interconnect.PCIE)
    tdp_w = models.PositiveIntegerField(default=0)
    # The cost model (cmdb.services.capacity): what one card costs to own, spread over its amortisation period.
    unit_price = models.DecimalField(
        max_digits=12, decimal_places=2, default=0, help_text="Purchase price of one card (the fleet's currency)."
    )
    amortisation_months = models.PositiveIntegerField(
        default=36, validators=[MinValueValidator(1)], help_text="Months over which the price is spread."
    )
    form_factor = models.CharField(max_length=16, choices=FormFactor.choices, default=FormFactor.PCIE)
    # Product names as the vendor tools print them ("NVIDIA H100 80GB HBM3", "910B3"); agents match on these.
    aliases = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["vendor__slug", "name"]

    def __str__(self) -> str:
        return self.name


class ServerModel(TrackedModel):
    """A model of server (chassis) with its rack height and power draw."""

    vendor = models.ForeignKey(Vendor, on_delete=models.PROTECT, related_name="server_models")
    name = models.CharField(max_length=100, unique=True)
    u_height = models.PositiveSmallIntegerField(default=1)
    power_draw_kw = models.DecimalField(max_digits=6, decimal_places=2, default=0)
    accelerator_model = models.ForeignKey(
        AcceleratorModel, null=True, blank=True, on_delete=models.SET_NULL, related_name="server_models"
    )
    accelerator_slots = models.PositiveSmallIntegerField(default=0)
    # The intra-node topology every node of this model should report ({"links": [...], "devices": [...]}, the
    # NodeTopology format): written as data or learned from a reference node (manage.py topology_learn).
    expected_topology = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class PartKind(models.TextChoices):
    NIC = "nic", "NIC / HCA"
    OPTIC = "optic", "Optic / transceiver"
    CABLE = "cable", "Cable"
    PSU = "psu", "Power supply"
    DISK = "disk", "Disk"
    MEMORY = "memory", "Memory module"
    FAN = "fan", "Fan"
    OTHER = "other", "Other"


class PartModel(TrackedModel):
    """A spare part model other than accelerators: NICs, optics, cables, PSUs. Serialised or by quantity."""

    vendor = models.ForeignKey(Vendor, null=True, blank=True, on_delete=models.PROTECT, related_name="part_models")
    sku = models.CharField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=PartKind.choices, default=PartKind.OTHER)
    is_serialised = models.BooleanField(default=True)

    class Meta:
        ordering = ["sku"]

    def __str__(self) -> str:
        return f"{self.sku} ({self.name})"


class Tag(models.Model):
    """A free label for nodes, switches and racks (e.g. 'canary', 'su-03')."""

    slug = models.SlugField(max_length=64, unique=True)
    color = models.CharField(max_length=7, default="#6b7280")

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug
