"""Fabrics, switches, switch ports and links."""

from __future__ import annotations

from ... import models as m
from ..base import CmdbSerializer


class FabricSerializer(CmdbSerializer):
    class Meta:
        model = m.Fabric
        fields = "__all__"


class SwitchSerializer(CmdbSerializer):
    class Meta:
        model = m.Switch
        fields = "__all__"


class SwitchPortSerializer(CmdbSerializer):
    class Meta:
        model = m.SwitchPort
        fields = "__all__"


class LinkSerializer(CmdbSerializer):
    """A cable. Each end renders with its device's name (node hostname / switch name) for cabling checks."""

    class Meta:
        model = m.Link
        fields = "__all__"
