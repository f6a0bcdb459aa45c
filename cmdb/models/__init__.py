"""The CMDB model, split by concern."""

from .accelerators import Accelerator, AcceleratorLifecycle, AcceleratorPlacement, PlacementKind
from .base import TrackedModel
from .catalog import AcceleratorModel, FormFactor, Interconnect, PartKind, PartModel, ServerModel, Tag, Vendor
from .health import HealthAction, HealthEvent, HealthPolicy, Severity
from .history import ChangeAction, ChangeRecord
from .locations import Rack, RackCooling, RackFace, RackStatus, RackUnit, Room, Site
from .network import (
    CableType,
    Fabric,
    FabricKind,
    FabricPurpose,
    Link,
    LinkStatus,
    Switch,
    SwitchPort,
    SwitchRole,
    SwitchStatus,
)
from .nodes import HEALTH_RANK, Component, ComponentKind, Health, LinkState, Nic, NicKind, NicPort, Node, NodeRole, NodeStatus
from .org import Cluster, ClusterKind, Tenant, TenantKind
from .software import DriverComponent, DriverPackage, InstalledSoftware
from .stock import PartItem, PartItemStatus, StockLocation, StockLocationKind

__all__ = [
    "HEALTH_RANK",
    "Accelerator",
    "AcceleratorLifecycle",
    "AcceleratorModel",
    "AcceleratorPlacement",
    "CableType",
    "ChangeAction",
    "ChangeRecord",
    "Cluster",
    "ClusterKind",
    "Component",
    "ComponentKind",
    "DriverComponent",
    "DriverPackage",
    "Fabric",
    "FabricKind",
    "FabricPurpose",
    "FormFactor",
    "Health",
    "HealthAction",
    "HealthEvent",
    "HealthPolicy",
    "InstalledSoftware",
    "Interconnect",
    "Link",
    "LinkState",
    "LinkStatus",
    "Nic",
    "NicKind",
    "NicPort",
    "Node",
    "NodeRole",
    "NodeStatus",
    "PartItem",
    "PartItemStatus",
    "PartKind",
    "PartModel",
    "PlacementKind",
    "Rack",
    "RackCooling",
    "RackFace",
    "RackStatus",
    "RackUnit",
    "Room",
    "ServerModel",
    "Severity",
    "Site",
    "StockLocation",
    "StockLocationKind",
    "Switch",
    "SwitchPort",
    "SwitchRole",
    "SwitchStatus",
    "Tag",
    "Tenant",
    "TenantKind",
    "TrackedModel",
    "Vendor",
]
