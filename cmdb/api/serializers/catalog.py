"""Catalog data: vendors, hardware models, tags, driver packages (the compatibility matrix), health policies."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ... import models as m
from ...services.topology import topology_shape_problem
from ..base import CmdbSerializer


class VendorSerializer(CmdbSerializer):
    class Meta:
        model = m.Vendor
        fields = "__all__"


class AcceleratorModelSerializer(CmdbSerializer):
    class Meta:
        model = m.AcceleratorModel
        fields = "__all__"


class ServerModelSerializer(CmdbSerializer):
    class Meta:
        model = m.ServerModel
        fields = "__all__"

    def validate_expected_topology(self, value: Any) -> Any:
        """{} (none) or {"links": [{"a", "b", "kind"}, ...], "devices": [...]} as NodeTopology stores it."""
        problem = topology_shape_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


class PartModelSerializer(CmdbSerializer):
    class Meta:
        model = m.PartModel
        fields = "__all__"


class TagSerializer(CmdbSerializer):
    class Meta:
        model = m.Tag
        fields = "__all__"


class DriverPackageSerializer(CmdbSerializer):
    """A driver/firmware/toolkit version; `supported_models` is its row of the compatibility matrix."""

    class Meta:
        model = m.DriverPackage
        fields = "__all__"


class FirmwareBaselineSerializer(CmdbSerializer):
    """Approved versions of one component for one model (empty model: every model without its own baseline)."""

    versions = serializers.ListField(
        child=serializers.CharField(max_length=100),
        allow_empty=False,
        help_text="Approved versions; for rule `minimum` the lowest is the floor.",
    )

    class Meta:
        model = m.FirmwareBaseline
        fields = "__all__"


class HealthPolicySerializer(CmdbSerializer):
    class Meta:
        model = m.HealthPolicy
        fields = "__all__"
