"""API serializers of the CMDB, split by concern; this module re-exports them."""

from .catalog import (
    AcceleratorModelSerializer,
    DriverPackageSerializer,
    FirmwareBaselineSerializer,
    HealthPolicySerializer,
    PartModelSerializer,
    ServerModelSerializer,
    TagSerializer,
    VendorSerializer,
)
from .history import ChangeRecordSerializer
from .inventory import (
    AcceleratorPlacementSerializer,
    AcceleratorSerializer,
    ComponentSerializer,
    HealthEventSerializer,
    InstalledSoftwareSerializer,
    NicPortSerializer,
    NicSerializer,
    NodeSerializer,
    PartItemSerializer,
    StockLocationSerializer,
)
from .locations import ClusterSerializer, RackSerializer, RoomSerializer, SiteSerializer, TenantSerializer
from .network import FabricSerializer, LinkSerializer, SwitchPortSerializer, SwitchSerializer

__all__ = [
    "AcceleratorModelSerializer",
    "AcceleratorPlacementSerializer",
    "AcceleratorSerializer",
    "ChangeRecordSerializer",
    "ClusterSerializer",
    "ComponentSerializer",
    "DriverPackageSerializer",
    "FabricSerializer",
    "FirmwareBaselineSerializer",
    "HealthEventSerializer",
    "HealthPolicySerializer",
    "InstalledSoftwareSerializer",
    "LinkSerializer",
    "NicPortSerializer",
    "NicSerializer",
    "NodeSerializer",
    "PartItemSerializer",
    "PartModelSerializer",
    "RackSerializer",
    "RoomSerializer",
    "ServerModelSerializer",
    "SiteSerializer",
    "StockLocationSerializer",
    "SwitchPortSerializer",
    "SwitchSerializer",
    "TagSerializer",
    "TenantSerializer",
    "VendorSerializer",
]
