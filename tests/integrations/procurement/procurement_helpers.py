"""Helpers of the procurement tests: secrets, signed posting, request building (imported by tests and conftest)."""

from __future__ import annotations

import json
import time
import uuid
from decimal import Decimal
from typing import Any

from cmdb import models as m
from integrations.procurement.services import requests as svc
from integrations.procurement.signatures import headers_sign
from tests.factories.cmdb import AcceleratorModelFactory, ServerModelFactory

SECRET = "whsec-current-3f9a"
OLD_SECRET = "whsec-previous-77c1"
EVENTS_URL = "/api/integrations/procurement/events/"


def event_body(event_type: str, data: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
    return {
        "id": event_id or f"evt-{uuid.uuid4().hex[:12]}",
        "type": event_type,
        "occurred_at": "2026-01-05T10:00:00+00:00",
        "data": data,
    }


def signed_post(
    client,
    event: dict[str, Any] | bytes,
    *,
    secret: str = SECRET,
    source: str = "procurement",
    timestamp: int | None = None,
    tamper: bool = False,
    url: str = EVENTS_URL,
    headers: dict | None = None,
):
    """POST an event the way the procurement system does (HMAC over timestamp + "." + body)."""
    body = event if isinstance(event, bytes) else json.dumps(event).encode()
    signed = headers_sign(secret=secret, source=source, body=body, timestamp=timestamp or int(time.time()))
    if tamper:
        body = body.replace(b'"PO-', b'"PX-', 1) if b'"PO-' in body else body + b" "
    sent = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in {**signed, **(headers or {})}.items()}
    return client.post(url, data=body, content_type="application/json", **sent)


def request_make(
    *,
    site: m.Site,
    requester,
    servers: int = 2,
    cards: int = 3,
    cables: int = 0,
    cable_model: m.PartModel | None = None,
    server_price: str = "10000",
    card_price: str = "25000",
    dedup_key: str = "",
) -> Any:
    lines = []
    if servers:
        lines.append(
            svc.LineInput(
                quantity=servers, site=site, server_model=ServerModelFactory(), unit_price=Decimal(server_price)
            )
        )
    if cards:
        lines.append(
            svc.LineInput(
                quantity=cards, site=site, accelerator_model=AcceleratorModelFactory(), unit_price=Decimal(card_price)
            )
        )
    if cables:
        lines.append(svc.LineInput(quantity=cables, site=site, part_model=cable_model, unit_price=Decimal("80")))
    return svc.request_create(
        title="H100 expansion",
        justification="new training cluster",
        budget_code="CAPEX-26",
        lines=lines,
        requested_by=requester,
        dedup_key=dedup_key,
    )
