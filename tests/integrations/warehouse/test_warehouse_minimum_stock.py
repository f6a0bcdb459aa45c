"""Minimum stock: falling below opens one refill request per site and model; further drops update it."""

from __future__ import annotations

from decimal import Decimal

import pytest

from integrations.procurement.models import ProcurementRequest, RequestLine
from integrations.procurement.services import requests as svc
from integrations.warehouse.models import MinimumStock
from integrations.warehouse.services import ledger
from integrations.warehouse.services.minimum import minimum_stock_check
from tests.factories.cmdb import UserFactory

pytestmark = pytest.mark.django_db


def spares(stock, n: int):
    return ledger.accelerators_receive(
        cards=[ledger.CardReceipt(serial=f"GPU-{i}", model=stock.h100) for i in range(n)],
        location=stock.wh1,
        reason="r",
        key_prefix="t",
    )


def issue(stock, card, slot: int) -> None:
    ledger.accelerator_issue(accelerator=card, node=stock.node1, slot_index=slot, reason="repair")


def test_below_minimum_opens_one_request_and_a_second_drop_updates_it(stock, refill_rule):
    MinimumStock.objects.create(site=stock.sh1, accelerator_model=stock.h100, minimum=2, target=4)
    cards = spares(stock, 2)
    assert minimum_stock_check() == []  # 2 free, minimum 2: fine
    issue(stock, cards[0], 0)
    (first,) = minimum_stock_check()
    assert first.created and first.free == 1
    req = first.request
    assert (req.state, req.dedup_key, req.trigger_count, req.budget_code) == (
        "submitted",
        f"minstock:{stock.sh1.pk}:accelerator_model:{stock.h100.pk}",
        1,
        "OPEX-SPARES",
    )
    assert req.lines.get().quantity == 3  # up to the target of 4
    issue(stock, cards[1], 1)
    (second,) = minimum_stock_check()
    assert not second.created and second.request.pk == req.pk
    req.refresh_from_db()
    assert req.trigger_count == 2 and req.lines.get().quantity == 4 and "3 -> 4" in req.notes
    minimum_stock_check()  # the beat again, nothing changed: same request, no new one
    assert ProcurementRequest.objects.count() == 1 and RequestLine.objects.count() == 1


def test_reserved_spares_do_not_count_as_free(stock, refill_rule):
    from cmdb.services.stock import spare_reserve

    MinimumStock.objects.create(site=stock.sh1, accelerator_model=stock.h100, minimum=1)
    spares(stock, 1)
    spare_reserve(site=stock.sh1, model=stock.h100, reserved_for="ticket:9", key="k")
    (outcome,) = minimum_stock_check()
    assert outcome.free == 0 and outcome.request.lines.get().quantity == 1


def test_an_update_after_votes_starts_a_new_round(stock, refill_rule):
    approver = UserFactory(username="approver")
    approver.groups.add(refill_rule.group)
    refill_rule.approvers_required = 2
    refill_rule.save()
    MinimumStock.objects.create(site=stock.sh1, part_model=stock.cable, minimum=10)
    (outcome,) = minimum_stock_check()
    req = svc.request_approve(request=outcome.request, approver=approver)
    assert req.approval_round == 1
    ledger.consumable_move(part_model=stock.cable, kind="receive", quantity=4, location=stock.wh1, reason="r")
    ledger.consumable_move(part_model=stock.cable, kind="issue", quantity=1, location=stock.wh1, reason="i")
    (again,) = minimum_stock_check()  # 3 on hand now: order 7 instead of 10
    req.refresh_from_db()
    assert again.request.pk == req.pk and req.lines.get().quantity == 7
    assert req.approval_round == 2  # the amount changed under the approver: their vote lapsed


def test_an_ordered_refill_is_not_changed_and_a_closed_one_lets_a_new_one_open(stock, refill_rule):
    MinimumStock.objects.create(site=stock.sh1, accelerator_model=stock.h100, minimum=1)
    (outcome,) = minimum_stock_check()
    ProcurementRequest.objects.filter(pk=outcome.request.pk).update(state="ordered", po_number="PO-1")
    (again,) = minimum_stock_check()
    assert again.request.pk == outcome.request.pk and "stock low again while ordered" in again.request.notes
    ProcurementRequest.objects.filter(pk=outcome.request.pk).update(state="received", is_open=False)
    (third,) = minimum_stock_check()
    assert third.created and third.request.pk != outcome.request.pk


def test_refill_price_is_estimated_from_the_last_order(stock, refill_rule):
    svc.request_create(
        title="t",
        justification="j",
        budget_code="b",
        lines=[svc.LineInput(quantity=1, site=stock.sh1, accelerator_model=stock.h100, unit_price=Decimal("27500"))],
    )
    MinimumStock.objects.create(site=stock.sh1, accelerator_model=stock.h100, minimum=2)
    (outcome,) = minimum_stock_check()
    assert outcome.request.total_amount == Decimal("55000")


def test_the_task_checks_one_site(stock, refill_rule):
    from integrations.warehouse.tasks import minimum_stock_check as task

    MinimumStock.objects.create(site=stock.sh1, accelerator_model=stock.h100, minimum=1)
    MinimumStock.objects.create(site=stock.bj2, accelerator_model=stock.h100, minimum=1)
    assert task.apply(args=[stock.bj2.pk]).get() == 1
    assert ProcurementRequest.objects.get().lines.get().site == stock.bj2
