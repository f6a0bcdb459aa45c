"""Procurement models, split by concern: requests and approvals, shipments and discrepancies, inbound events."""

from .events import EventStatus, InboundEvent
from .requests import (
    EDITABLE_REQUEST_STATES,
    OPEN_REQUEST_STATES,
    PO_RANK,
    ApprovalRule,
    ApprovalVote,
    ItemKind,
    PoState,
    ProcurementRequest,
    RequestApproval,
    RequestLine,
    RequestState,
)
from .shipments import (
    Discrepancy,
    DiscrepancyKind,
    DiscrepancyStatus,
    Shipment,
    ShipmentItem,
    ShipmentItemStatus,
    ShipmentStatus,
)

__all__ = [
    "EDITABLE_REQUEST_STATES",
    "OPEN_REQUEST_STATES",
    "PO_RANK",
    "ApprovalRule",
    "ApprovalVote",
    "Discrepancy",
    "DiscrepancyKind",
    "DiscrepancyStatus",
    "EventStatus",
    "InboundEvent",
    "ItemKind",
    "PoState",
    "ProcurementRequest",
    "RequestApproval",
    "RequestLine",
    "RequestState",
    "Shipment",
    "ShipmentItem",
    "ShipmentItemStatus",
    "ShipmentStatus",
]
