"""Playing the procurement system: signed events sent over HTTP to a running gpuops (demo and tests).

The simulator is a stand-in for the peer, not an adapter of ours, so it talks HTTP itself (httpx) and signs
exactly as a real procurement system must (signatures.headers_sign). It reads the request it plays along with
from the database gpuops uses (it runs as a management command of the same deployment), and sends every event
through the public webhook, so the demo exercises the whole path: signature, schema, storage, task, services.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from django.utils import timezone

from .models import ProcurementRequest, RequestLine, RequestState
from .signatures import headers_sign

EVENTS_PATH = "/api/integrations/procurement/events/"
APPROVED_STATES = (
    RequestState.APPROVED,
    RequestState.ORDERED,
    RequestState.PARTIALLY_RECEIVED,
    RequestState.RECEIVED,
    RequestState.CLOSED,
)


class SimulationError(Exception):
    """The server could not be reached or refused an event; the message says which and why."""


@dataclass
class EventSender:
    """Signs and POSTs events to one gpuops."""

    url: str
    secret: str
    source: str = "procurement"
    timeout_s: float = 10.0
    say: Callable[[str], None] = print
    sent: list[tuple[str, int]] = field(default_factory=list)

    def send(self, event_type: str, data: dict[str, Any], *, event_id: str | None = None) -> dict[str, Any]:
        """Send one event; return the server's JSON answer. Raises SimulationError unless 200/202."""
        event = {
            "id": event_id or f"sim-{uuid.uuid4().hex}",
            "type": event_type,
            "occurred_at": timezone.now().isoformat(),
            "data": data,
        }
        body = json.dumps(event).encode()
        headers = {
            "Content-Type": "application/json",
            **headers_sign(secret=self.secret, source=self.source, body=body),
        }
        target = self.url.rstrip("/") + EVENTS_PATH
        try:
            response = httpx.post(target, content=body, headers=headers, timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            raise SimulationError(f"cannot reach gpuops at {target}: {type(exc).__name__}: {exc}") from exc
        self.sent.append((event_type, response.status_code))
        if response.status_code not in (200, 202):
            raise SimulationError(
                f"{event_type} refused by {target}: HTTP {response.status_code}: {response.text[:500]}"
            )
        answer = response.json() if response.content else {}
        self.say(f"  -> {event_type} {event['id']}: HTTP {response.status_code} {answer.get('status', '')}")
        return answer


@dataclass
class ScenarioResult:
    po_number: str
    shipments: dict[str, list[str]]
    expected: list[str]
    delivered: list[str]
    missing: list[str]
    unexpected: list[str]


def _wait_for(predicate: Callable[[], bool], wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


def scenario_full(
    sender: EventSender,
    request: ProcurementRequest,
    *,
    missing: int = 0,
    unexpected: int = 0,
    out_of_order: bool = False,
    wait_s: float = 0.0,
    delay_s: float = 0.0,
) -> ScenarioResult:
    """Take an approved request through PO created -> approved -> dispatched -> delivered -> invoiced.

    One shipment per delivery site. `missing` serials are dispatched but left out of the delivery; `unexpected`
    serials are delivered but were on no dispatch notice. `out_of_order` sends the delivery before its dispatch
    notice and the PO approval last, which gpuops must handle the same way.
    Raises:
        SimulationError: the request is not approved (within `wait_s`), or the server refused an event.
    """
    say = sender.say

    def fresh() -> ProcurementRequest:
        return ProcurementRequest.objects.get(pk=request.pk)

    say(f"[1] approval: {request.reference} '{request.title}' is {request.get_state_display()}")
    if not _wait_for(lambda: fresh().state in APPROVED_STATES, wait_s):
        raise SimulationError(
            f"{request.reference} is {fresh().get_state_display()}, not approved; approve it in "
            "gpuops (admin, API or ticket) first, or pass --wait to wait for it."
        )
    _wait_for(lambda: bool(fresh().po_number), wait_s)  # gpuops places the PO through its adapter
    req = fresh()
    po_number = req.po_number or f"SIM-PO-{req.pk}-{secrets.token_hex(2).upper()}"
    origin = "placed by gpuops through its adapter" if req.po_number else "created by a buyer in procurement"
    lines = list(RequestLine.objects.filter(request=req).select_related("site", "part_model").order_by("line_no"))
    say(f"[2] po.created: {po_number} ({origin}), {len(lines)} line(s)")
    sender.send(
        "po.created",
        {
            "po_number": po_number,
            "request_ref": req.reference,
            "supplier": "Simulated Supplier",
            "lines": [
                {"line_ref": line.line_ref, "po_line_ref": f"{po_number}-{line.line_no}", "quantity": line.quantity}
                for line in lines
            ],
        },
    )
    approved = {"po_number": po_number, "approved_by": "procurement-simulator"}
    if not out_of_order:
        time.sleep(delay_s)
        say(f"[3] po.approved: {po_number}")
        sender.send("po.approved", approved)

    token = secrets.token_hex(3).upper()
    by_site: dict[str, list[RequestLine]] = defaultdict(list)
    for line in lines:
        by_site[line.site.code].append(line)
    result = ScenarioResult(po_number=po_number, shipments={}, expected=[], delivered=[], missing=[], unexpected=[])
    to_drop, to_add = missing, unexpected
    for n, (site, site_lines) in enumerate(sorted(by_site.items()), start=1):
        shipment_id = f"SHP-{po_number}-{n}"
        dispatched, delivered = [], []
        for line in site_lines:
            if not line.is_serialised:
                dispatched.append({"line_ref": line.line_ref, "quantity": line.quantity})
                delivered.append({"line_ref": line.line_ref, "quantity": line.quantity})
                continue
            prefix = {"server": "SRV", "accelerator": "GPU"}.get(line.item_kind, "PRT")
            serials = [f"SIM{token}-{prefix}{line.line_no}-{i:04d}" for i in range(1, line.quantity + 1)]
            got = list(serials)
            while to_drop and got:
                result.missing.append(got.pop())
                to_drop -= 1
            while to_add:
                extra = f"SIM{token}-{prefix}{line.line_no}-X{to_add:03d}"
                got.append(extra)
                result.unexpected.append(extra)
                to_add -= 1
            result.expected += serials
            result.delivered += got
            dispatched.append({"line_ref": line.line_ref, "serials": serials})
            delivered.append({"line_ref": line.line_ref, "serials": got})
        result.shipments[shipment_id] = [s for d in delivered for s in d.get("serials", [])]
        dispatch = {
            "po_number": po_number,
            "shipment_id": shipment_id,
            "carrier": "SimFreight",
            "tracking": f"SF{token}{n:03d}",
            "lines": dispatched,
        }
        delivery = {
            "po_number": po_number,
            "shipment_id": shipment_id,
            "site": site,
            "delivered_at": timezone.now().isoformat(),
            "lines": delivered,
        }
        steps = [("shipment.dispatched", dispatch), ("shipment.delivered", delivery)]
        for event_type, data in reversed(steps) if out_of_order else steps:
            time.sleep(delay_s)
            count = sum(len(d.get("serials", [])) or d.get("quantity", 0) for d in data["lines"])
            say(
                f"[{4 if event_type == 'shipment.dispatched' else 5}] {event_type}: {shipment_id} to {site}, "
                f"{count} item(s)"
            )
            sender.send(event_type, data)
    if out_of_order:
        say(f"[3] po.approved (late): {po_number}")
        sender.send("po.approved", approved)
    time.sleep(delay_s)
    amount = req.total_amount
    say(f"[6] invoice.posted: INV-{po_number} {amount:,.2f} {req.currency}")
    sender.send(
        "invoice.posted",
        {
            "po_number": po_number,
            "invoice_number": f"INV-{po_number}",
            "amount": f"{amount:.2f}",
            "currency": req.currency,
        },
    )
    if result.missing or result.unexpected:
        say(f"    expect discrepancies: missing {result.missing}, unexpected {result.unexpected}")
    return result


__all__ = ["EVENTS_PATH", "EventSender", "ScenarioResult", "SimulationError", "scenario_full"]
