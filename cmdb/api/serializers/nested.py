"""Brief forms of CMDB objects, used wherever one object refers to another.

Each holds what a person or script needs to recognise the object without a follow-up request (its id and its
natural key) and nothing that needs a join beyond the ones the list querysets already make.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from rest_framework import serializers

from gpuops.api.fields import BriefSerializer, register_brief

from ... import models as m

_ro = {"read_only": True}


@register_brief(m.Site)
class BriefSiteSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    code = serializers.CharField(**_ro)
    name = serializers.CharField(**_ro)


@register_brief(m.Room)
class BriefRoomSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    name = serializers.CharField(**_ro)


@register_brief(m.Rack)
class BriefRackSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    name = serializers.CharField(**_ro)


@register_brief(m.Vendor)
class BriefVendorSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    slug = serializers.CharField(**_ro)
    name = serializers.CharField(**_ro)


@register_brief(m.AcceleratorModel)
class BriefAcceleratorModelSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    name = serializers.CharField(**_ro)


@register_brief(m.ServerModel)
class BriefServerModelSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    name = serializers.CharField(**_ro)


@register_brief(m.PartModel)
class BriefPartModelSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    sku = serializers.CharField(**_ro)
    name = serializers.CharField(**_ro)


@register_brief(m.Tag)
class BriefTagSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    slug = serializers.CharField(**_ro)
    color = serializers.CharField(**_ro)


@register_brief(m.Cluster)
class BriefClusterSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    name = serializers.CharField(**_ro)


@register_brief(m.Tenant)
class BriefTenantSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    slug = serializers.CharField(**_ro)
    name = serializers.CharField(**_ro)


@register_brief(m.Node)
class BriefNodeSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    hostname = serializers.CharField(**_ro)


@register_brief(m.Nic)
class BriefNicSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    name = serializers.CharField(**_ro)


@register_brief(m.NicPort)
class BriefNicPortSerializer(BriefSerializer):
    """A NIC port with its NIC and node names: a link end is readable without two more requests."""

    id = serializers.IntegerField(**_ro)
    name = serializers.CharField(**_ro)
    nic = serializers.CharField(source="nic.name", **_ro)
    node_id = serializers.IntegerField(source="nic.node_id", **_ro)
    node = serializers.CharField(source="nic.node.hostname", **_ro)


@register_brief(m.Accelerator)
class BriefAcceleratorSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    serial = serializers.CharField(allow_null=True, **_ro)


@register_brief(m.StockLocation)
class BriefStockLocationSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    name = serializers.CharField(**_ro)


@register_brief(m.Fabric)
class BriefFabricSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    name = serializers.CharField(**_ro)


@register_brief(m.Switch)
class BriefSwitchSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    name = serializers.CharField(**_ro)


@register_brief(m.SwitchPort)
class BriefSwitchPortSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    name = serializers.CharField(**_ro)
    switch_id = serializers.IntegerField(**_ro)
    switch = serializers.CharField(source="switch.name", **_ro)


@register_brief(m.DriverPackage)
class BriefDriverPackageSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    component = serializers.CharField(**_ro)
    version = serializers.CharField(**_ro)


@register_brief(get_user_model())
class BriefUserSerializer(BriefSerializer):
    id = serializers.IntegerField(**_ro)
    username = serializers.CharField(**_ro)
