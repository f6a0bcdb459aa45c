"""POST /api/integrations/warehouse/events/ - signed WMS events, verified and stored exactly like procurement
events (integrations.procurement.webhooks.SignedEventWebhook), processed by `integrations.warehouse.process_event`.
"""

from __future__ import annotations

from typing import Any

from integrations.procurement.webhooks import SignedEventWebhook

from .conf import warehouse_setting

_STR = {"type": "string", "minLength": 1, "maxLength": 100}
_SERIAL = {"type": "string", "minLength": 1, "maxLength": 100, "pattern": r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"}

WMS_DATA_SCHEMAS: dict[str, dict[str, Any]] = {
    "stock.counted": {
        "type": "object",
        "required": ["site", "location", "sku", "quantity"],
        "properties": {
            "site": {"type": "string", "minLength": 1, "maxLength": 32},
            "location": _STR,
            "sku": _STR,
            "quantity": {"type": "integer", "minimum": 0},
            "serials": {"type": "array", "items": _SERIAL, "uniqueItems": True, "maxItems": 100000},
        },
    },
    "movement.recorded": {
        "type": "object",
        "required": ["site", "kind", "sku", "quantity"],
        "properties": {
            "site": {"type": "string", "minLength": 1, "maxLength": 32},
            "location": _STR,
            "sku": _STR,
            "kind": _STR,
            "quantity": {"type": "integer"},
            "serial": _SERIAL,
            "ref": {"type": "string", "maxLength": 100},
        },
    },
}


class WmsEventWebhook(SignedEventWebhook):
    channel = "wms"
    data_schemas = WMS_DATA_SCHEMAS

    def sources(self) -> dict[str, Any]:
        return warehouse_setting("WEBHOOK_SOURCES")
