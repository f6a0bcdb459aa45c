"""Firmware: what each node's agent last reported (per component), and the approved versions (baselines)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from .base import TrackedModel
from .nodes import Node


class FirmwareKind(models.TextChoices):
    """Firmware components the agent reports (docs/agent.md, `firmware`)."""

    BIOS = "bios", "BIOS"
    BMC = "bmc", "BMC"
    NIC = "nic", "NIC / HCA firmware"
    GPU_VBIOS = "gpu_vbios", "GPU VBIOS"
    GPU_INFOROM = "gpu_inforom", "GPU InfoROM"
    NPU_FIRMWARE = "npu_firmware", "NPU firmware"
    DCU_VBIOS = "dcu_vbios", "DCU VBIOS"


class BaselineRule(models.TextChoices):
    MINIMUM = "minimum", "minimum (this version or newer)"
    EXACT = "exact", "exact (one of the listed versions)"


class ComplianceStatus(models.TextChoices):
    COMPLIANT = "compliant", "compliant"
    OUTDATED = "outdated", "outdated"
    UNKNOWN = "unknown", "unknown"
    NOT_IN_BASELINE = "not_in_baseline", "not in baseline"


class NodeFirmware(TrackedModel):
    """A node's firmware as its agent last reported it: `components` is the canonical list
    [{component, device, model, version, psid}] sorted by (component, device). `digest` hashes it: a report
    changes the row only when it differs. The change records of this row are the node's firmware history."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="firmware")
    components = models.JSONField(default=list, blank=True)
    digest = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        verbose_name_plural = "node firmware"

    def __str__(self) -> str:
        return f"firmware of {self.node_id}"


class FirmwareComponent(models.Model):
    """One row per (node, component, device): a derived index of NodeFirmware.components, rewritten with it,
    so the compliance report can count versions with GROUP BY instead of reading JSON. Not tracked (its source
    row is)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="firmware_components")
    component = models.CharField(max_length=32, choices=FirmwareKind.choices)
    device = models.CharField(max_length=100)
    model = models.CharField(max_length=200, blank=True)
    version = models.CharField(max_length=100)
    psid = models.CharField(max_length=32, blank=True)

    class Meta:
        ordering = ["node_id", "component", "device"]
        constraints = [
            models.UniqueConstraint(fields=["node", "component", "device"], name="firmwarecomponent_one_per_device")
        ]
        indexes = [models.Index(fields=["component", "model", "version"], name="firmwarecomp_version_idx")]

    def __str__(self) -> str:
        return f"{self.node_id} {self.component} {self.device}={self.version}"


class FirmwareBaseline(TrackedModel):
    """The approved versions of one component for one model.

    `component` is a firmware kind or a driver package component (`nvidia-driver`, `cann`, ...). `model` is the
    server model name (bios, bmc), the accelerator model as reported (gpu_vbios, npu_firmware, ...) or the NIC
    model (mlxfwmanager device type, ibstat CA type or lspci name); empty means every model without a baseline of
    its own (driver packages have no model). Rule `minimum`: the lowest listed version or anything newer is
    compliant; `exact`: only the listed versions."""

    component = models.CharField(max_length=32)
    model = models.CharField(max_length=200, blank=True)
    rule = models.CharField(max_length=16, choices=BaselineRule.choices, default=BaselineRule.MINIMUM)
    versions = models.JSONField(default=list, help_text="Approved versions; for `minimum` the lowest is the floor.")
    note = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["component", "model"]
        constraints = [models.UniqueConstraint(fields=["component", "model"], name="firmwarebaseline_unique_model")]

    def __str__(self) -> str:
        return f"{self.component} {self.model or '*'} {self.rule} {', '.join(self.versions or [])}"

    def clean(self) -> None:
        from .software import DriverComponent

        known = set(FirmwareKind.values) | set(DriverComponent.values)
        if self.component not in known:
            raise ValidationError(
                {"component": f"unknown component {self.component!r}; one of {', '.join(sorted(known))}"}
            )
        if isinstance(self.versions, list):
            self.versions = [v.strip() if isinstance(v, str) else v for v in self.versions]
        versions = self.versions
        if not isinstance(versions, list) or not versions:
            raise ValidationError({"versions": "a non-empty list of version strings"})
        if any(not isinstance(v, str) or not v.strip() or len(v) > 100 for v in versions):
            raise ValidationError({"versions": "every version must be a non-empty string of at most 100 characters"})
        if self.rule == BaselineRule.MINIMUM:
            from ..versions import version_key  # cmdb.versions imports no model

            unparsable = [v for v in versions if version_key(v) is None]
            if unparsable:
                raise ValidationError(
                    {"versions": f"a minimum rule needs comparable versions; cannot compare {unparsable[0]!r}"}
                )
