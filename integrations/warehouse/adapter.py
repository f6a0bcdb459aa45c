"""The WMS's REST API over httpx (through integrations.procurement.httpclient.JsonHttp: timeouts, bounded
retries with backoff on timeouts / 5xx / 429, Idempotency-Key on writes).

Contract (docs/warehouse.md):
    GET  /api/v1/stock?site=<code>          -> {"levels": [{"location", "sku", "quantity", "serials": [...]}]}
    POST /api/v1/movements  Idempotency-Key -> {"accepted": <n>}   body {"movements": [...]}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from integrations.exceptions import PermanentError
from integrations.procurement.conf import secret_resolve
from integrations.procurement.httpclient import JsonHttp

from .conf import warehouse_setting
from .ports import WmsMovement, WmsStockLevel


class HttpWarehouseClient:
    """WarehouseClient over REST. Options default to settings.GPUOPS_WAREHOUSE (conf.py)."""

    def __init__(self, *, base_url: str | None = None, token: str | None = None, **options: Any) -> None:
        self.http = JsonHttp(
            base_url=base_url or warehouse_setting("BASE_URL"),
            token=token if token is not None else secret_resolve(warehouse_setting("API_TOKEN")),
            attempts=options.get("attempts", warehouse_setting("ATTEMPTS")),
            timeout_s=options.get("timeout_s", warehouse_setting("TIMEOUT_S")),
            connect_timeout_s=options.get("connect_timeout_s", warehouse_setting("CONNECT_TIMEOUT_S")),
            backoff_s=options.get("backoff_s", warehouse_setting("BACKOFF_S")),
            backoff_max_s=options.get("backoff_max_s", warehouse_setting("BACKOFF_MAX_S")),
            user_agent="gpuops-warehouse",
            transport=options.get("transport"),  # tests: httpx.MockTransport
        )

    def stock_levels(self, site_code: str) -> list[WmsStockLevel]:
        data = self.http.request("GET", f"/api/v1/stock?site={site_code}")
        if not isinstance(data, dict) or not isinstance(data.get("levels"), list):
            raise PermanentError(f"unexpected stock reply: {str(data)[:200]}", peer=self.http.base_url)
        try:
            return [
                WmsStockLevel(
                    site_code=site_code,
                    location=str(row["location"]),
                    sku=str(row["sku"]),
                    quantity=int(row["quantity"]),
                    serials=tuple(map(str, row.get("serials") or ())),
                )
                for row in data["levels"]
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise PermanentError(f"unreadable stock level: {exc}", peer=self.http.base_url) from exc

    def movements_push(self, movements: Sequence[WmsMovement], *, idempotency_key: str) -> int:
        body = {
            "movements": [
                {
                    "ref": mv.ref,
                    "at": mv.at.isoformat(),
                    "kind": mv.kind,
                    "sku": mv.sku,
                    "quantity": mv.quantity,
                    "site": mv.site_code,
                    "location": mv.location,
                    "serial": mv.serial,
                    "to_location": mv.to_location,
                    "ticket_ref": mv.ticket_ref,
                    "reason": mv.reason,
                }
                for mv in movements
            ]
        }
        data = self.http.request("POST", "/api/v1/movements", json=body, idempotency_key=idempotency_key)
        return int((data or {}).get("accepted", len(movements)))


__all__ = ["HttpWarehouseClient"]
