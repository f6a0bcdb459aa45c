"""Settings of the warehouse integration, with their defaults (override in `settings.GPUOPS_WAREHOUSE`).

Secrets are references ("env:NAME", "file:/path"), resolved at call time by the procurement package's
`secret_resolve`; the webhook signature scheme is the procurement one (integrations.procurement.signatures).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    # The WarehouseClient implementation (dotted path).
    # Production: "integrations.warehouse.adapter.HttpWarehouseClient".
    "CLIENT": "integrations.warehouse.fakes.FakeWarehouseClient",
    "BASE_URL": "http://127.0.0.1:8098",
    "API_TOKEN": "env:GPUOPS_WMS_API_TOKEN",
    "CONNECT_TIMEOUT_S": 3.0,
    "TIMEOUT_S": 15.0,
    "ATTEMPTS": 3,
    "BACKOFF_S": 0.5,
    "BACKOFF_MAX_S": 8.0,
    # Inbound WMS webhooks, signed like the procurement ones. Two secrets during a rotation (new first).
    "WEBHOOK_SOURCES": {
        "wms": {"secrets": ["env:GPUOPS_WMS_WEBHOOK_SECRET", "env:GPUOPS_WMS_WEBHOOK_SECRET_PREVIOUS"]},
    },
    # Sites whose stock the WMS manages (codes); empty = every site with a stock location.
    "WMS_SITES": [],
    # Ledger movements pushed to the WMS: the physical ones (reservations are ours alone).
    "PUSH_KINDS": ["receive", "issue", "return", "rma_out", "rma_back", "scrap", "transfer", "adjust"],
    "PUSH_BATCH": 500,
    # Refill requests opened by the minimum-stock check.
    "REFILL_BUDGET_CODE": "OPEX-SPARES",
}

# Periodic tasks of this app. Add them to settings.CELERY_BEAT_SCHEDULE (docs/warehouse.md).
BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "warehouse-minimum-stock-check": {"task": "integrations.warehouse.minimum_stock_check", "schedule": 900.0},
    "warehouse-wms-push": {"task": "integrations.warehouse.wms_push", "schedule": 300.0},
    "warehouse-wms-reconcile": {"task": "integrations.warehouse.wms_reconcile", "schedule": 3600.0},
}


def warehouse_setting(name: str) -> Any:
    """One setting: `settings.GPUOPS_WAREHOUSE[name]` if given, else the default above."""
    if name not in DEFAULTS:
        raise KeyError(f"Unknown warehouse setting {name!r}.")
    return getattr(settings, "GPUOPS_WAREHOUSE", {}).get(name, DEFAULTS[name])
