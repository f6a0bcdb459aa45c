"""Sites, rooms, racks, clusters and tenants."""

from __future__ import annotations

from gpuops.api.fields import BriefField

from ... import models as m
from ..base import CmdbSerializer
from .nested import BriefSiteSerializer


class SiteSerializer(CmdbSerializer):
    class Meta:
        model = m.Site
        fields = "__all__"


class RoomSerializer(CmdbSerializer):
    class Meta:
        model = m.Room
        fields = "__all__"


class RackSerializer(CmdbSerializer):
    site = BriefField(BriefSiteSerializer, source="room.site", help_text="The site of the rack's room.")

    class Meta:
        model = m.Rack
        fields = "__all__"


class ClusterSerializer(CmdbSerializer):
    class Meta:
        model = m.Cluster
        fields = "__all__"


class TenantSerializer(CmdbSerializer):
    class Meta:
        model = m.Tenant
        fields = "__all__"
