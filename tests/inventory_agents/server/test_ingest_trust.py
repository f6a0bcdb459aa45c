"""Inputs ingestion must not trust: swaps without paperwork, hook failures, skewed clocks, impossible dates,
NULs, claims of other cards, chunked bodies. Each answers a clear 4xx or applies; none wedges a node."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from django.test import RequestFactory
from django.utils import timezone

from cmdb import hooks
from cmdb import models as m
from inventory_agents.api import ReportsView
from inventory_agents.models import AgentState, Report
from tests.inventory_agents.server.ingest_support import REPORTS_URL, card_entry, make_node, report_of

pytestmark = pytest.mark.django_db


def _full_pass_due() -> None:
    AgentState.objects.update(last_full_at=timezone.now() - dt.timedelta(days=1))


def test_unrecorded_swap_takes_the_old_card_out_and_later_reports_apply(node, token, post, monkeypatch):
    from workflows.services.health import on_accelerator_failed

    monkeypatch.setattr(hooks, "_accelerator_failed", [on_accelerator_failed])
    report = report_of(node)
    old_serial = report["accelerators"][0]["serial"]
    report["accelerators"][0].update(serial="1654SWAPPED01", serial_raw="1654SWAPPED01", uuid=None)
    assert post(report, token).json()["status"] == "applied"
    out = m.Accelerator.objects.get(serial=old_serial)
    assert out.node_id is None and out.slot_index is None and out.lifecycle == "in_transit"
    assert out.placements.get(ended_at__isnull=True).kind == "in_transit"
    for _ in range(2):  # every later full pass applies (was: missing -> GuardError -> 500, forever)
        _full_pass_due()
        assert post(report, token).json()["status"] == "applied"


def test_hook_failure_never_rolls_the_report_back(node, token, post, monkeypatch):
    def broken(failure):
        raise RuntimeError("guard says no")

    monkeypatch.setattr(hooks, "_accelerator_failed", [broken])
    report = report_of(node)
    report["system"]["kernel"] = "6.8.0-41-generic"
    card = report["accelerators"][3]
    card["health"]["xid_events"] = [{"xid": 79, "pci_bus_id": card["pci_bus_id"], "message": "off the bus"}]
    body = post(report, token).json()
    assert body["status"] == "applied" and body["summary"]["hooks_failed"] == 1
    stored = Report.objects.get(pk=body["report_id"])
    assert stored.status == "applied" and "guard says no" in stored.errors[0]["message"]
    node.refresh_from_db()
    assert node.kernel == "6.8.0-41-generic"
    assert m.Accelerator.objects.get(serial=card["serial"]).health == "failed"


def test_collected_at_far_in_the_future_is_refused(node, token, post, settings):
    settings.GPUOPS = {**settings.GPUOPS, "AGENT_MAX_CLOCK_SKEW_MINUTES": 10}
    future = (timezone.now() + dt.timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ")
    response = post(report_of(node, collected_at=future), token)
    assert response.status_code == 400
    assert response.json()["error"] == "clock_skew" and response.json()["errors"][0]["path"] == "$.collected_at"
    assert Report.objects.get(node=node).status == "rejected"
    # A genuine report is not superseded by it.
    assert post(report_of(node), token).json()["status"] == "applied"
    near = (timezone.now() + dt.timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert post(report_of(node, collected_at=near), token).status_code == 200


@pytest.mark.parametrize("where", ["collected_at", "hostname", "cpu_model", "key"])
def test_impossible_date_and_nul_are_400_and_stored(node, token, post, where):
    report = report_of(node)
    if where == "collected_at":
        report["collected_at"] = "2026-13-45T25:61:00Z"
        path = "$.collected_at"
    elif where == "hostname":
        report["hostname"] = "gpu-0001\u0000"
        path = "$.hostname"
    elif where == "cpu_model":
        report["system"]["cpu_model"] = "Xeon\u0000\ud800"
        path = "$.system.cpu_model"
    else:
        report["accelerators"][0]["x\u0000"] = 1
        path = "$.accelerators[0]"
    response = post(report, token)
    assert response.status_code == 400
    assert path in [e["path"] for e in response.json()["errors"]]
    stored = Report.objects.get(node=node)
    assert stored.status == "rejected" and stored.payload is not None
    assert "\x00" not in json.dumps(stored.payload, ensure_ascii=False)
    assert post(report_of(node), token).json()["status"] == "applied"


def test_claims_of_foreign_cards_and_missing_slots_are_conflicts(node, token, post):
    other_site = make_node("gpu-0009")  # another site (a new one per factory node)
    foreign = m.Accelerator.objects.filter(node=other_site).first()
    report = report_of(node)
    report["system"]["kernel"] = "6.8.0-41-generic"
    report["accelerators"].append(card_entry(40, "1654NOSUCHSLOT"))  # the model has 16 slots
    report["accelerators"].append({**card_entry(9, foreign.serial), "uuid": foreign.uuid})
    body = post(report, token).json()
    assert body["status"] == "applied" and body["summary"]["conflicts"] == 2
    foreign.refresh_from_db()
    assert foreign.node_id == other_site.pk and foreign.slot_index is not None
    assert not m.Accelerator.objects.filter(serial="1654NOSUCHSLOT").exists()
    codes = set(m.HealthEvent.objects.filter(node=node, kind="conflict").values_list("code", flat=True))
    assert codes == {"slot_out_of_range", "serial_at_other_site"}
    node.refresh_from_db()
    assert node.kernel == "6.8.0-41-generic"
    # The next honest report drains nothing.
    _full_pass_due()
    assert post(report_of(node), token).json()["status"] == "applied"
    assert not m.Accelerator.objects.filter(node=node, is_missing=True).exists()


def _chunked(body: bytes, size: int = 1000) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


@pytest.mark.parametrize("terminated", [False, True])
def test_chunked_report_is_read(node, token, terminated):
    body = json.dumps(report_of(node)).encode()
    request = RequestFactory().generic(
        "POST",
        REPORTS_URL,
        b"",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
        HTTP_TRANSFER_ENCODING="chunked",
    )
    request.META.pop("CONTENT_LENGTH", None)
    request.META["wsgi.input"] = io.BytesIO(body if terminated else _chunked(body))
    if terminated:
        request.META["wsgi.input_terminated"] = True
    response = ReportsView.as_view()(request)
    assert response.status_code == 200 and response.data["status"] == "applied"


def test_chunked_report_beyond_the_limit_is_413(node, token, settings):
    settings.GPUOPS = {**settings.GPUOPS, "AGENT_REPORT_MAX_BYTES": 2000}
    body = json.dumps(report_of(node)).encode()
    request = RequestFactory().generic(
        "POST",
        REPORTS_URL,
        b"",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
        HTTP_TRANSFER_ENCODING="chunked",
    )
    request.META.pop("CONTENT_LENGTH", None)
    request.META["wsgi.input"] = io.BytesIO(_chunked(body))
    assert ReportsView.as_view()(request).status_code == 413


def test_infinity_is_malformed_json_not_a_500(node, token, post):
    body = json.dumps(report_of(node)).replace('"memory_gib": 2048', '"memory_gib": Infinity').encode()
    response = post(body, token)
    assert response.status_code == 400 and response.json()["error"] == "malformed_json"


@pytest.mark.parametrize("schema", [[], {"a": 1}, 7, None])
def test_a_schema_that_is_not_a_string_is_refused(token, node, post, schema):
    response = post(report_of(node, schema=schema), token)
    assert response.status_code == 400 and response.json()["error"] == "unsupported_schema"
