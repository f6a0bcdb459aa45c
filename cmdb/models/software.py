"""Driver and firmware packages, the compatibility matrix, and what each node has installed."""

from __future__ import annotations

from django.db import models

from .base import TrackedModel
from .catalog import AcceleratorModel, Vendor
from .firmware import FirmwareKind
from .nodes import Node


class DriverComponent(models.TextChoices):
    NVIDIA_DRIVER = "nvidia-driver", "NVIDIA driver"
    CUDA = "cuda", "CUDA toolkit"
    FABRIC_MANAGER = "fabric-manager", "NVIDIA Fabric Manager"
    OFED = "ofed", "MLNX/DOCA OFED"
    ASCEND_DRIVER = "ascend-driver", "Ascend driver"
    ASCEND_FIRMWARE = "ascend-firmware", "Ascend firmware"
    CANN = "cann", "CANN"
    HYGON_DRIVER = "hygon-driver", "Hygon DCU driver"
    DTK = "dtk", "DTK"


# What a package can install: a driver or toolkit (its version is what the agent reports as installed software)
# or a firmware component (its version is what the node's devices report: BIOS, BMC, NIC, GPU VBIOS, ...).
PACKAGE_COMPONENT_CHOICES = [*DriverComponent.choices, *FirmwareKind.choices]


class DriverPackage(TrackedModel):
    """A version of a driver/firmware/toolkit component, with install and rollback command templates. A firmware
    package's commands run the vendor's tool (e.g. `mlxfwmanager -u`, the BMC's update utility)."""

    vendor = models.ForeignKey(Vendor, on_delete=models.PROTECT, related_name="driver_packages")
    component = models.CharField(max_length=32, choices=PACKAGE_COMPONENT_CHOICES)
    version = models.CharField(max_length=64)
    supported_models = models.ManyToManyField(
        AcceleratorModel, blank=True, related_name="driver_packages", help_text="Compatibility matrix."
    )
    requires_reboot = models.BooleanField(default=False)
    install_command = models.CharField(max_length=500, blank=True, help_text="Template; {version} is replaced.")
    rollback_command = models.CharField(max_length=500, blank=True, help_text="Template; {previous_version}.")
    released_at = models.DateField(null=True, blank=True)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["component", "version"]
        constraints = [models.UniqueConstraint(fields=["component", "version"], name="driverpackage_unique_version")]

    def __str__(self) -> str:
        return f"{self.component} {self.version}"


class InstalledSoftware(TrackedModel):
    """The version of one component installed on a node (reported by the agent or set by a workflow)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="installed_software")
    component = models.CharField(max_length=32, choices=DriverComponent.choices)
    version = models.CharField(max_length=64)
    package = models.ForeignKey(
        DriverPackage, null=True, blank=True, on_delete=models.SET_NULL, related_name="installations"
    )

    class Meta:
        ordering = ["node_id", "component"]
        verbose_name_plural = "installed software"
        constraints = [models.UniqueConstraint(fields=["node", "component"], name="installed_one_per_component")]
        indexes = [models.Index(fields=["component", "version"])]

    def __str__(self) -> str:
        return f"{self.node} {self.component}={self.version}"
