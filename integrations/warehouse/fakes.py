"""In-memory fake WMS (the default adapter in tests and in the embedded demo)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from .ports import WmsMovement, WmsStockLevel


class FakeWarehouseClient:
    """WarehouseClient in memory. State is per class, shared by instances; `reset()` between tests.

    `levels[site_code]` is what `stock_levels` answers; `pushed` collects pushed movements (deduplicated by
    batch key, like a real WMS honouring Idempotency-Key); `fail_next` scripts errors.
    """

    _lock = threading.Lock()
    levels: dict[str, list[WmsStockLevel]] = {}
    pushed: list[WmsMovement] = []
    batches: dict[str, int] = {}
    failures: list[Exception] = []

    def __init__(self, **_options: object) -> None:
        pass

    @classmethod
    def reset(cls) -> None:
        with cls._lock:
            cls.levels.clear()
            cls.pushed.clear()
            cls.batches.clear()
            cls.failures.clear()

    @classmethod
    def fail_next(cls, *errors: Exception) -> None:
        with cls._lock:
            cls.failures.extend(errors)

    def stock_levels(self, site_code: str) -> list[WmsStockLevel]:
        with self._lock:
            if self.failures:
                raise self.failures.pop(0)
            return list(self.levels.get(site_code, []))

    def movements_push(self, movements: Sequence[WmsMovement], *, idempotency_key: str) -> int:
        with self._lock:
            if self.failures:
                raise self.failures.pop(0)
            if idempotency_key not in self.batches:
                self.pushed.extend(movements)
                self.batches[idempotency_key] = len(movements)
            return self.batches[idempotency_key]


__all__ = ["FakeWarehouseClient"]
