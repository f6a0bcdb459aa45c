"""The procurement system's REST API, spoken with httpx (through httpclient.JsonHttp).

Contract (docs/procurement.md has the full description; fake_server.py implements it for tests and demos):

    POST /api/v1/purchase-orders                 Idempotency-Key: <key>   -> 201 (200 when replayed) PO
    GET  /api/v1/purchase-orders/<po_number>                              -> 200 PO | 404
    POST /api/v1/purchase-orders/<po_number>/cancel  Idempotency-Key      -> 200 PO

A PO body: {"po_number", "state", "request_ref", "supplier", "lines": [{"line_ref", "po_line_ref",
"quantity", "state"}]}.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from integrations.exceptions import PermanentError

from .conf import procurement_setting, secret_resolve
from .httpclient import JsonHttp
from .ports import OrderDraft, OrderLine, PurchaseOrder

PO_PATH = "/api/v1/purchase-orders"


def order_from_json(data: Any, *, peer: str = "") -> PurchaseOrder:
    """Our dataclass from the peer's JSON. PermanentError for a reply we cannot read."""
    if not isinstance(data, dict) or not isinstance(data.get("po_number"), str) or not data["po_number"]:
        raise PermanentError(f"unexpected purchase order reply: {str(data)[:200]}", peer=peer)
    lines = tuple(
        OrderLine(
            line_ref=str(line.get("line_ref", "")),
            po_line_ref=str(line.get("po_line_ref", "")),
            quantity=int(line.get("quantity", 0)),
            state=str(line.get("state", "created")),
        )
        for line in data.get("lines") or []
        if isinstance(line, dict)
    )
    return PurchaseOrder(
        po_number=data["po_number"],
        state=str(data.get("state", "created")),
        request_ref=str(data.get("request_ref", "")),
        supplier=str(data.get("supplier", "")),
        lines=lines,
    )


def draft_to_json(draft: OrderDraft) -> dict[str, Any]:
    return {
        "request_ref": draft.request_ref,
        "title": draft.title,
        "budget_code": draft.budget_code,
        "currency": draft.currency,
        "justification": draft.justification,
        "lines": [
            {
                "line_ref": line.line_ref,
                "sku": line.sku,
                "description": line.description,
                "quantity": line.quantity,
                "unit_price": str(line.unit_price),
                "site": line.site_code,
            }
            for line in draft.lines
        ],
    }


class HttpProcurementClient:
    """ProcurementClient over REST. Options default to settings.GPUOPS_PROCUREMENT (conf.py)."""

    def __init__(
        self,
        *,
        base_url: str | None = None,
        token: str | None = None,
        attempts: int | None = None,
        timeout_s: float | None = None,
        connect_timeout_s: float | None = None,
        backoff_s: float | None = None,
        backoff_max_s: float | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        options: dict[str, Any] = {
            "base_url": base_url or procurement_setting("BASE_URL"),
            "token": token if token is not None else secret_resolve(procurement_setting("API_TOKEN")),
            "attempts": attempts or procurement_setting("ATTEMPTS"),
            "timeout_s": timeout_s or procurement_setting("TIMEOUT_S"),
            "connect_timeout_s": connect_timeout_s or procurement_setting("CONNECT_TIMEOUT_S"),
            "backoff_s": procurement_setting("BACKOFF_S") if backoff_s is None else backoff_s,
            "backoff_max_s": backoff_max_s or procurement_setting("BACKOFF_MAX_S"),
            "user_agent": "gpuops-procurement",
        }
        if sleep is not None:
            options["sleep"] = sleep
        self.http = JsonHttp(**options)

    def order_create(self, draft: OrderDraft, *, idempotency_key: str) -> PurchaseOrder:
        """POST the order; every retry carries the same Idempotency-Key, so the peer creates one PO."""
        data = self.http.request("POST", PO_PATH, json=draft_to_json(draft), idempotency_key=idempotency_key)
        return order_from_json(data, peer=self.http.base_url)

    def order_get(self, po_number: str) -> PurchaseOrder:
        data = self.http.request("GET", f"{PO_PATH}/{quote(po_number, safe='')}")
        return order_from_json(data, peer=self.http.base_url)

    def order_cancel(self, po_number: str, *, reason: str, idempotency_key: str) -> PurchaseOrder:
        data = self.http.request(
            "POST",
            f"{PO_PATH}/{quote(po_number, safe='')}/cancel",
            json={"reason": reason},
            idempotency_key=idempotency_key,
        )
        return order_from_json(data, peer=self.http.base_url)


__all__ = ["PO_PATH", "HttpProcurementClient", "draft_to_json", "order_from_json"]
