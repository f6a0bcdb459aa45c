"""The WMS: levels pulled and compared with the ledger (reported, never overwritten), movements pushed once,
and signed WMS webhooks verified with the same scheme as procurement's."""

from __future__ import annotations

import datetime as dt
import json
import logging
import time

import httpx
import pytest

from cmdb import models as m
from integrations.exceptions import TransientError
from integrations.procurement.models import InboundEvent
from integrations.procurement.signatures import headers_sign
from integrations.warehouse.adapter import HttpWarehouseClient
from integrations.warehouse.fakes import FakeWarehouseClient
from integrations.warehouse.models import StockDiscrepancy, WmsSyncRun
from integrations.warehouse.ports import WmsMovement, WmsStockLevel
from integrations.warehouse.services import ledger
from integrations.warehouse.services.wms import wms_push, wms_reconcile
from tests.integrations.warehouse.conftest import WMS_SECRET

pytestmark = pytest.mark.django_db
LATER = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)


@pytest.fixture
def shelf(stock):
    ledger.accelerators_receive(
        cards=[ledger.CardReceipt(serial=s, model=stock.h100) for s in ("G1", "G2", "G3")],
        location=stock.wh1,
        reason="PO-1",
        key_prefix="t",
    )
    ledger.consumable_move(part_model=stock.cable, kind="receive", quantity=40, location=stock.wh1, reason="PO-1")
    return stock


def open_kinds() -> set[tuple[str, str, str]]:
    return set(StockDiscrepancy.objects.filter(status="open").values_list("kind", "sku", "serial"))


def test_reconcile_reports_differences_and_never_touches_the_ledger(shelf):
    FakeWarehouseClient.levels["sh1"] = [
        WmsStockLevel("sh1", "warehouse", shelf.h100.name, 3, ("G1", "G2", "G9")),
        WmsStockLevel("sh1", "warehouse", shelf.cable.sku, 38),
        WmsStockLevel("sh1", "cage-7", shelf.optic.sku, 2, ("O1", "O2")),
    ]
    before = m.StockMovement.objects.count()
    run = wms_reconcile(site=shelf.sh1)
    assert (run.status, run.items, run.discrepancies) == ("ok", 3, 4)
    assert open_kinds() == {
        ("wms_serial_missing", shelf.h100.name, "G3"),
        ("wms_serial_unknown", shelf.h100.name, "G9"),
        ("wms_quantity", shelf.cable.sku, ""),
        ("wms_quantity", shelf.optic.sku, ""),
    }
    cable = StockDiscrepancy.objects.get(sku=shelf.cable.sku)
    assert (cable.ledger_quantity, cable.other_quantity) == (40, 38)
    assert "cage-7" in StockDiscrepancy.objects.get(sku=shelf.optic.sku).detail
    assert m.StockMovement.objects.count() == before  # reported, not overwritten
    # The WMS catches up: a re-run resolves what no longer differs and keeps the rest.
    FakeWarehouseClient.levels["sh1"] = [
        WmsStockLevel("sh1", "warehouse", shelf.h100.name, 3, ("G1", "G2", "G3")),
        WmsStockLevel("sh1", "warehouse", shelf.cable.sku, 38),
    ]
    wms_reconcile(site=shelf.sh1)
    assert open_kinds() == {("wms_quantity", shelf.cable.sku, "")}
    assert StockDiscrepancy.objects.filter(status="resolved").count() == 3


def test_stock_the_wms_does_not_list_is_reported(shelf):
    FakeWarehouseClient.levels["sh1"] = []
    wms_reconcile(site=shelf.sh1)
    assert ("wms_quantity", shelf.cable.sku, "") in open_kinds()
    assert ("wms_serial_missing", shelf.h100.name, "G1") in open_kinds()


def test_a_failed_pull_is_recorded(shelf):
    FakeWarehouseClient.fail_next(TransientError("WMS down"))
    with pytest.raises(TransientError):
        wms_reconcile(site=shelf.sh1)
    assert WmsSyncRun.objects.get().status == "failed"


def test_push_sends_physical_movements_once_from_a_watermark(shelf):
    run = wms_push(now=LATER)
    assert run is not None and run.items == 4  # 3 card receipts + 1 cable receipt
    assert [(p.kind, p.sku, p.serial, p.quantity) for p in FakeWarehouseClient.pushed][-1] == (
        "receive",
        shelf.cable.sku,
        "",
        40,
    )
    assert wms_push(now=LATER) is None  # nothing new
    from cmdb.services.stock import spare_reserve

    spare_reserve(site=shelf.sh1, model=shelf.h100, reserved_for="ticket:1", key="k")  # ours alone: not pushed
    ledger.consumable_move(part_model=shelf.cable, kind="issue", quantity=2, location=shelf.wh1, reason="i")
    assert wms_push(now=LATER).items == 1
    assert len(FakeWarehouseClient.pushed) == 5


def test_push_failure_keeps_the_watermark_and_the_retry_sends_the_same_batch(shelf):
    FakeWarehouseClient.fail_next(TransientError("WMS 503"))
    with pytest.raises(TransientError):
        wms_push(now=LATER)
    run = wms_push(now=LATER)
    assert run.items == 4 and list(FakeWarehouseClient.batches) == [
        f"gpuops-movements-{run.last_movement_id - 3}-{run.last_movement_id}"
    ]


def test_young_movements_wait_so_the_watermark_never_skips_a_late_commit(shelf):
    assert wms_push() is None  # everything is seconds old


def test_rest_adapter_speaks_the_contract():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "GET":
            return httpx.Response(
                200, json={"levels": [{"location": "warehouse", "sku": "H100", "quantity": 2, "serials": ["A", "B"]}]}
            )
        return httpx.Response(200, json={"accepted": len(json.loads(request.content)["movements"])})

    client = HttpWarehouseClient(
        base_url="http://wms.test", token="tok", transport=httpx.MockTransport(handler), backoff_s=0
    )
    assert client.stock_levels("sh1") == [WmsStockLevel("sh1", "warehouse", "H100", 2, ("A", "B"))]
    move = WmsMovement(
        ref="gpuops-mv-1",
        at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        kind="receive",
        sku="H100",
        quantity=1,
        site_code="sh1",
        location="warehouse",
        serial="A",
    )
    assert client.movements_push([move], idempotency_key="batch-1") == 1
    assert seen[0].url.params["site"] == "sh1" and seen[0].headers["Authorization"] == "Bearer tok"
    assert seen[1].headers["Idempotency-Key"] == "batch-1"


def _post(client, event: dict, *, secret: str = WMS_SECRET):
    body = json.dumps(event).encode()
    headers = headers_sign(secret=secret, source="wms", body=body, timestamp=int(time.time()))
    return client.post(
        "/api/integrations/warehouse/events/",
        data=body,
        content_type="application/json",
        **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()},
    )


def test_wms_webhooks_are_signed_the_same_way(client, shelf, caplog, django_capture_on_commit_callbacks):
    caplog.set_level(logging.INFO, logger="gpuops.security")
    count = {
        "id": "wms-1",
        "type": "stock.counted",
        "data": {
            "site": "sh1",
            "location": "warehouse",
            "sku": shelf.h100.name,
            "quantity": 2,
            "serials": ["G1", "G2"],
        },
    }
    assert _post(client, count, secret="wrong").status_code == 401
    assert not InboundEvent.objects.exists() and any("wms webhook refused" in r.getMessage() for r in caplog.records)
    with django_capture_on_commit_callbacks(execute=True):
        assert _post(client, count).status_code == 202
    event = InboundEvent.objects.get()
    assert (event.channel, event.status) == ("wms", "processed")
    assert open_kinds() == {("wms_quantity", shelf.h100.name, ""), ("wms_serial_missing", shelf.h100.name, "G3")}
    bad = {"id": "wms-2", "type": "stock.counted", "data": {"site": "sh1", "sku": "x", "quantity": -1}}
    response = _post(client, bad)
    assert response.status_code == 400 and {"data.location", "data.quantity"} <= set(response.json()["error"]["fields"])


def test_wms_movements_we_did_not_make_are_flagged(client, shelf, django_capture_on_commit_callbacks):
    ours = m.StockMovement.objects.filter(kind="receive").first()
    with django_capture_on_commit_callbacks(execute=True):
        _post(
            client,
            {
                "id": "wms-3",
                "type": "movement.recorded",
                "data": {
                    "site": "sh1",
                    "location": "warehouse",
                    "sku": shelf.h100.name,
                    "kind": "receive",
                    "quantity": 1,
                    "serial": "G1",
                    "ref": f"gpuops-mv-{ours.pk}",
                },
            },
        )
        _post(
            client,
            {
                "id": "wms-4",
                "type": "movement.recorded",
                "data": {"site": "sh1", "location": "warehouse", "sku": shelf.cable.sku, "kind": "pick", "quantity": 5},
            },
        )
    (row,) = StockDiscrepancy.objects.all()
    assert row.kind == "wms_movement_unmatched" and "pick of 5" in row.detail
