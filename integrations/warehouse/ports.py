"""The WMS (warehouse management system) as gpuops sees it: a Protocol and the dataclasses it returns.

Kept beside its adapters (integrations/ports.py belongs to another package's owner; it can move there).
Implementations: adapter.HttpWarehouseClient (REST) and fakes.FakeWarehouseClient (memory); settings pick one.
They raise only TransientError / PermanentError.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class WmsStockLevel:
    """What the WMS holds of one SKU at one location. `serials` is empty for consumables."""

    site_code: str
    location: str
    sku: str
    quantity: int
    serials: tuple[str, ...] = ()


@dataclass(frozen=True)
class WmsMovement:
    """One ledger movement as pushed to the WMS. `ref` (our movement id) is the WMS's idempotency key per row."""

    ref: str
    at: dt.datetime
    kind: str
    sku: str
    quantity: int
    site_code: str
    location: str
    serial: str = ""
    to_location: str = ""
    ticket_ref: str = ""
    reason: str = ""


@runtime_checkable
class WarehouseClient(Protocol):
    def stock_levels(self, site_code: str) -> list[WmsStockLevel]:
        """Every SKU the WMS holds at a site, per location."""
        ...

    def movements_push(self, movements: Sequence[WmsMovement], *, idempotency_key: str) -> int:
        """Record our movements in the WMS; a repeated batch (same key) is not recorded twice. Returns how many
        the WMS accepted."""
        ...


__all__ = ["WarehouseClient", "WmsMovement", "WmsStockLevel"]
