"""In-memory fake of the procurement system (the default adapter in tests and in the embedded demo).

It behaves like the real peer where it matters to gpuops: creating a PO is idempotent by key, unknown POs are
a PermanentError, and failures can be scripted (`fail_next`) so retry paths are testable without a network.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace

from integrations.exceptions import PermanentError

from .ports import OrderDraft, OrderLine, PurchaseOrder


class FakeProcurementClient:
    """ProcurementClient in memory. State is per class (shared by instances) so a test and the code under
    test see the same POs; call `reset()` between tests."""

    _lock = threading.Lock()
    _orders: dict[str, PurchaseOrder] = {}
    _by_key: dict[str, str] = {}
    _numbers = itertools.count(1001)
    _failures: list[Exception] = []
    calls: list[tuple[str, str]] = []

    def __init__(self, **_options: object) -> None:
        pass

    @classmethod
    def reset(cls) -> None:
        with cls._lock:
            cls._orders.clear()
            cls._by_key.clear()
            cls._failures.clear()
            cls.calls.clear()
            cls._numbers = itertools.count(1001)

    @classmethod
    def fail_next(cls, *errors: Exception) -> None:
        """Raise these errors, one per call, before doing anything (e.g. TransientError("timeout"))."""
        with cls._lock:
            cls._failures.extend(errors)

    @classmethod
    def orders(cls) -> list[PurchaseOrder]:
        with cls._lock:
            return list(cls._orders.values())

    def _maybe_fail(self) -> None:
        if self._failures:
            raise self._failures.pop(0)

    def order_create(self, draft: OrderDraft, *, idempotency_key: str) -> PurchaseOrder:
        with self._lock:
            self.calls.append(("order_create", idempotency_key))
            self._maybe_fail()
            if idempotency_key in self._by_key:
                return self._orders[self._by_key[idempotency_key]]
            number = f"PO-{next(self._numbers)}"
            po = PurchaseOrder(
                po_number=number,
                state="created",
                request_ref=draft.request_ref,
                supplier="Fake Supplier Ltd",
                lines=tuple(
                    OrderLine(line_ref=line.line_ref, po_line_ref=f"{number}-{i}", quantity=line.quantity)
                    for i, line in enumerate(draft.lines, start=1)
                ),
            )
            self._orders[number] = po
            self._by_key[idempotency_key] = number
            return po

    def order_get(self, po_number: str) -> PurchaseOrder:
        with self._lock:
            self.calls.append(("order_get", po_number))
            self._maybe_fail()
            if po_number not in self._orders:
                raise PermanentError(f"no purchase order {po_number}", peer="fake-procurement")
            return self._orders[po_number]

    def order_cancel(self, po_number: str, *, reason: str, idempotency_key: str) -> PurchaseOrder:
        with self._lock:
            self.calls.append(("order_cancel", idempotency_key))
            self._maybe_fail()
            if po_number not in self._orders:
                raise PermanentError(f"no purchase order {po_number}", peer="fake-procurement")
            po = replace(self._orders[po_number], state="cancelled")
            self._orders[po_number] = po
            return po


__all__ = ["FakeProcurementClient"]
