"""A real HTTP round trip: `procurement_simulate` signs events and posts them to a live gpuops server, which
verifies, stores and processes them (tasks run in-process on commit)."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from cmdb import models as m
from integrations.procurement.models import Discrepancy, EventStatus, InboundEvent, RequestState
from integrations.procurement.services import requests as svc
from tests.integrations.procurement.procurement_helpers import SECRET, request_make

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ordered(site, approvers, part_models):
    """An approved request whose PO the (fake) procurement client placed on commit."""
    req = request_make(site=site, requester=approvers["requester"], cables=10, cable_model=part_models["cable"])
    svc.request_approve(request=svc.request_submit(request=req), approver=approvers["lead"])
    req.refresh_from_db()
    assert req.po_number == "PO-1001", req.po_error
    return req


def simulate(*args: str) -> str:
    out = StringIO()
    call_command("procurement_simulate", *args, stdout=out)
    return out.getvalue()


def test_full_scenario_with_missing_and_unexpected_serials(live_server, ordered):
    output = simulate(
        "--url",
        live_server.url,
        "--secret",
        SECRET,
        "--scenario",
        "full",
        "--request",
        ordered.reference,
        "--missing",
        "1",
        "--unexpected",
        "1",
    )
    for step in (
        "[1] approval",
        "[2] po.created: PO-1001 (placed by gpuops",
        "[3] po.approved",
        "[4] shipment.dispatched",
        "[5] shipment.delivered",
        "[6] invoice.posted",
        "HTTP 202",
    ):
        assert step in output, output
    assert set(InboundEvent.objects.values_list("status", flat=True)) == {EventStatus.PROCESSED}
    assert InboundEvent.objects.count() == 5  # one shipment: all lines go to sh1
    nodes = m.Node.objects.filter(po_number="PO-1001")
    assert nodes.count() == 2 and set(nodes.values_list("status", flat=True)) == {"received"}  # 1 missing, 1 extra
    assert m.Accelerator.objects.filter(po_number="PO-1001", lifecycle="in_stock").count() == 3
    assert m.StockMovement.objects.get(kind="receive", part_model__sku="CBL-DAC-400G-2M").quantity == 10
    kinds = sorted(Discrepancy.objects.filter(status="open").values_list("kind", flat=True))
    assert kinds == ["missing", "unexpected"]
    ordered.refresh_from_db()
    assert ordered.invoice_number == "INV-PO-1001" and ordered.po_state == "invoiced"
    # Two servers arrived (one not the expected serial): received and invoiced, but not closed while a
    # discrepancy is open.
    assert ordered.state == RequestState.RECEIVED


def test_out_of_order_scenario_ends_in_the_same_place(live_server, ordered):
    simulate(
        "--url",
        live_server.url,
        "--secret",
        SECRET,
        "--scenario",
        "full",
        "--request",
        str(ordered.pk),
        "--out-of-order",
    )
    ordered.refresh_from_db()
    assert (ordered.state, ordered.po_state) == (RequestState.CLOSED, "invoiced")
    assert not Discrepancy.objects.exists()
    order = list(InboundEvent.objects.order_by("received_at", "id").values_list("type", flat=True))
    assert order.index("shipment.delivered") < order.index("shipment.dispatched")


def test_send_one_event(live_server, ordered):
    output = simulate(
        "--url",
        live_server.url,
        "--secret",
        SECRET,
        "send",
        "po.approved",
        "--data",
        json.dumps({"po_number": ordered.po_number}),
        "--event-id",
        "manual-1",
    )
    assert "manual-1: HTTP 202 accepted" in output
    ordered.refresh_from_db()
    assert ordered.po_state == "approved"


def test_an_error_answer_is_a_non_zero_exit_with_the_reason(live_server, ordered):
    with pytest.raises(CommandError, match="HTTP 401"):
        simulate(
            "--url",
            live_server.url,
            "--secret",
            "wrong",
            "send",
            "po.approved",
            "--data",
            json.dumps({"po_number": ordered.po_number}),
        )
    assert not InboundEvent.objects.exists()


def test_an_unreachable_server_is_a_clear_error(ordered):
    with pytest.raises(CommandError, match=re.escape("cannot reach gpuops at http://127.0.0.1:9/")):
        simulate(
            "--url",
            "http://127.0.0.1:9",
            "--secret",
            SECRET,
            "--timeout",
            "2",
            "--scenario",
            "full",
            "--request",
            str(ordered.pk),
        )


def test_a_request_that_is_not_approved_is_refused(site, approvers):
    req = svc.request_submit(request=request_make(site=site, requester=approvers["requester"]))
    with pytest.raises(CommandError, match="not approved"):
        simulate("--url", "http://127.0.0.1:9", "--secret", SECRET, "--scenario", "full", "--request", str(req.pk))
