"""The procurement system as gpuops sees it: a Protocol and the dataclasses it returns.

Kept beside its adapters rather than in integrations/ports.py because that module belongs to another
package's owner; it can move there unchanged. Callers depend on this Protocol only: the REST adapter
(adapter.HttpProcurementClient) and the in-memory fake (fakes.FakeProcurementClient) implement it, and
settings pick one (registry.procurement_client). Implementations raise only TransientError / PermanentError.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class OrderLineDraft:
    """One line of the order gpuops asks for. `line_ref` is ours and is echoed back in every event."""

    line_ref: str
    sku: str
    description: str
    quantity: int
    unit_price: Decimal
    site_code: str


@dataclass(frozen=True)
class OrderDraft:
    """A purchase order to create, from an approved procurement request."""

    request_ref: str
    title: str
    budget_code: str
    currency: str
    justification: str
    lines: tuple[OrderLineDraft, ...]


@dataclass(frozen=True)
class OrderLine:
    line_ref: str
    po_line_ref: str
    quantity: int
    state: str = "created"


@dataclass(frozen=True)
class PurchaseOrder:
    """A purchase order as the procurement system holds it."""

    po_number: str
    state: str
    request_ref: str = ""
    supplier: str = ""
    lines: tuple[OrderLine, ...] = field(default_factory=tuple)


@runtime_checkable
class ProcurementClient(Protocol):
    def order_create(self, draft: OrderDraft, *, idempotency_key: str) -> PurchaseOrder:
        """Create a purchase order. A repeated call with the same key returns the first call's PO, never a
        second one. Raises TransientError (timeout, 5xx, 429 after retries) or PermanentError (4xx)."""
        ...

    def order_get(self, po_number: str) -> PurchaseOrder:
        """Read a purchase order. PermanentError when it does not exist."""
        ...

    def order_cancel(self, po_number: str, *, reason: str, idempotency_key: str) -> PurchaseOrder:
        """Ask the procurement system to cancel a PO (idempotent by key)."""
        ...


__all__ = ["OrderDraft", "OrderLine", "OrderLineDraft", "ProcurementClient", "PurchaseOrder"]
