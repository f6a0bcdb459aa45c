"""The stock ledger: every move is a movement row, on-hand is derived, never negative, and always equals the
cards in stock - checked move by move and over random sequences of moves (hypothesis)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Sum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmdb import models as m
from cmdb.services import stock as cmdb_stock
from integrations.warehouse.services import ledger
from integrations.warehouse.services.opening import opening_balance_write
from integrations.warehouse.services.stock import ledger_drift, stock_line_for
from tests.factories.cmdb import AcceleratorFactory, NodeFactory

pytestmark = pytest.mark.django_db


def receive(stock, *serials: str, location=None) -> list[m.Accelerator]:
    return ledger.accelerators_receive(
        cards=[ledger.CardReceipt(serial=s, model=stock.h100) for s in serials],
        location=location or stock.wh1,
        reason="test receipt",
        key_prefix="t",
    )


def on_hand(location, model) -> int:
    return ledger.on_hand(location=location, accelerator_model=model)


def test_every_kind_of_move_is_one_ledger_row_with_who_why_and_ticket(stock):
    a, b = receive(stock, "GPU-A", "GPU-B")
    assert on_hand(stock.wh1, stock.h100) == 2
    ledger.accelerator_issue(accelerator=a, node=stock.node1, slot_index=0, reason="repair", ticket_ref="ticket:7")
    ledger.accelerator_return(accelerator=a, location=stock.shelf1, reason="pulled back", ticket_ref="ticket:7")
    ledger.accelerator_transfer(accelerator=b, to_location=stock.wh2, reason="bj2 short")
    ledger.accelerator_send_out(accelerator=a, kind="rma_out", reason="XID 79", ticket_ref="ticket:8")
    ledger.accelerator_return(accelerator=a, location=stock.wh1, kind="rma_back", reason="repaired by vendor")
    ledger.accelerator_send_out(accelerator=b, kind="scrap", reason="burnt")
    kinds = list(
        m.StockMovement.objects.order_by("id").values_list("kind", "quantity", "location__name", "location__site__code")
    )
    assert kinds == [
        ("receive", 1, "warehouse", "sh1"),
        ("receive", 1, "warehouse", "sh1"),
        ("issue", -1, "warehouse", "sh1"),
        ("return", 1, "shelf-a", "sh1"),
        ("transfer", -1, "warehouse", "sh1"),
        ("transfer", 1, "warehouse", "bj2"),
        ("rma_out", -1, "shelf-a", "sh1"),
        ("rma_back", 1, "warehouse", "sh1"),
        ("scrap", -1, "warehouse", "bj2"),
    ]
    issue = m.StockMovement.objects.get(kind="issue")
    assert (issue.node, issue.reason, issue.ticket_ref) == (stock.node1, "repair", "ticket:7")
    assert (on_hand(stock.wh1, stock.h100), on_hand(stock.shelf1, stock.h100), on_hand(stock.wh2, stock.h100)) == (
        1,
        0,
        0,
    )
    assert ledger_drift() == []


def test_a_retried_move_with_the_same_key_is_a_no_op(stock):
    (card,) = receive(stock, "GPU-A")
    for _ in range(2):
        ledger.accelerator_transfer(accelerator=card, to_location=stock.shelf1, reason="tidy", key="move-1")
    assert m.StockMovement.objects.filter(kind="transfer").count() == 2  # out + in, once
    receive(stock, "GPU-A")  # the same receipt again (same key prefix): nothing new
    assert m.Accelerator.objects.filter(serial="GPU-A").count() == 1


@pytest.mark.parametrize(
    ("move", "message"),
    [
        (lambda s, c: ledger.accelerator_return(accelerator=c, location=s.shelf1, reason="x"), "already in stock"),
        (lambda s, c: ledger.accelerator_transfer(accelerator=c, to_location=s.wh1, reason="x"), "already"),
        (lambda s, c: ledger.accelerator_issue(accelerator=c, node=s.node1, slot_index=0, reason=""), "Say why"),
    ],
)
def test_moves_that_would_break_the_ledger_are_refused(stock, move, message):
    (card,) = receive(stock, "GPU-A")
    with pytest.raises(ValidationError, match=message):
        move(stock, card)


def test_a_reserved_spare_cannot_be_moved_out_from_under_its_holder(stock):
    (card,) = receive(stock, "GPU-A")
    cmdb_stock.spare_reserve(site=stock.sh1, model=stock.h100, reserved_for="ticket:1", key="r1")
    with pytest.raises(ValidationError, match="reserved for ticket:1"):
        ledger.accelerator_transfer(accelerator=card, to_location=stock.wh2, reason="x")
    with pytest.raises(cmdb_stock.NoSpareError):
        cmdb_stock.spare_reserve(site=stock.sh1, model=stock.h100, reserved_for="ticket:2", key="r2")
    line = stock_line_for(site=stock.sh1, accelerator_model=stock.h100)
    assert (line.on_hand, line.reserved, line.free) == (1, 1, 0)


def test_consumables_move_by_quantity_and_never_go_negative(stock):
    ledger.consumable_move(part_model=stock.cable, kind="receive", quantity=40, location=stock.wh1, reason="PO-1")
    ledger.consumable_move(
        part_model=stock.cable,
        kind="issue",
        quantity=16,
        location=stock.wh1,
        node=stock.node1,
        reason="cabling sh1-gpu-0001",
        ticket_ref="ticket:3",
    )
    ledger.consumable_move(
        part_model=stock.cable,
        kind="transfer",
        quantity=4,
        location=stock.wh1,
        to_location=stock.wh2,
        reason="bj2 build",
    )
    with pytest.raises(ValidationError, match="Only 20 x CBL-DAC-400G-2M on hand"):
        ledger.consumable_move(part_model=stock.cable, kind="issue", quantity=21, location=stock.wh1, reason="x")
    assert ledger.on_hand(location=stock.wh1, part_model=stock.cable) == 20
    adjust = ledger.consumable_adjust(part_model=stock.cable, location=stock.wh1, counted=18, reason="stock take")
    assert (adjust.kind, adjust.quantity) == ("adjust", -2)
    assert ledger.consumable_adjust(part_model=stock.cable, location=stock.wh1, counted=18, reason="again") is None
    assert ledger.on_hand(location=stock.wh2, part_model=stock.cable) == 4
    with pytest.raises(ValidationError, match="serialised"):
        ledger.consumable_move(part_model=stock.optic, kind="receive", quantity=1, location=stock.wh1, reason="x")


def test_serialised_parts_move_by_serial(stock):
    (optic,) = ledger.part_items_receive(
        part_model=stock.optic, serials=["OPT-1"], location=stock.wh1, reason="r", key_prefix="t"
    )
    ledger.part_item_move(item=optic, kind="issue", node=stock.node1, reason="swap optic")
    optic.refresh_from_db()
    assert (optic.status, optic.node, optic.stock_location) == ("installed", stock.node1, None)
    ledger.part_item_move(item=optic, kind="return", location=stock.shelf1, reason="spare again")
    ledger.part_item_move(item=optic, kind="transfer", location=stock.wh2, reason="to bj2")
    assert ledger.on_hand(location=stock.wh2, part_model=stock.optic) == 1
    assert ledger_drift() == []


def test_opening_balance_brings_pre_ledger_stock_into_the_ledger(stock):
    AcceleratorFactory(node=None, lifecycle="in_stock", stock_location=stock.wh1, model=stock.h100)
    assert len(ledger_drift()) == 1
    assert opening_balance_write() == {"accelerators": 1, "part_items": 0}
    assert opening_balance_write() == {"accelerators": 0, "part_items": 0}  # idempotent
    assert ledger_drift() == [] and on_hand(stock.wh1, stock.h100) == 1


# --- property: random sequences of movements -------------------------------------------------------------

MOVES = st.sampled_from(
    [
        "receive",
        "issue",
        "return",
        "transfer",
        "rma_out",
        "rma_back",
        "scrap",
        "write_off",
        "reserve",
        "release",
        "issue_reserved",
        "cable_in",
        "cable_out",
        "cable_count",
    ]
)


def _apply(stock, move: str, pick: int, place: int, nodes: list[m.Node], counter: list[int]) -> None:
    """Apply one random move through the services; refusals (ValidationError, NoSpareError) are fine."""
    cards = list(m.Accelerator.objects.order_by("id"))
    card = cards[pick % len(cards)] if cards else None
    locations = [stock.wh1, stock.shelf1, stock.wh2]
    where = locations[place % 3]
    counter[0] += 1
    try:
        with transaction.atomic():
            if move == "receive" or card is None:
                receive(stock, f"P{counter[0]:05d}", location=where)
            elif move == "issue":
                node = nodes[pick % len(nodes)]
                free_slot = next(
                    i for i in range(64) if not m.Accelerator.objects.filter(node=node, slot_index=i).exists()
                )
                ledger.accelerator_issue(accelerator=card, node=node, slot_index=free_slot, reason="prop")
            elif move in ("return", "rma_back"):
                ledger.accelerator_return(accelerator=card, location=where, kind=move, reason="prop")
            elif move == "transfer":
                ledger.accelerator_transfer(accelerator=card, to_location=where, reason="prop")
            elif move in ("rma_out", "scrap"):
                ledger.accelerator_send_out(accelerator=card, kind=move, reason="prop")
            elif move == "write_off":
                ledger.accelerator_send_out(accelerator=card, kind="adjust", reason="lost at stock take")
            elif move == "reserve":
                cmdb_stock.spare_reserve(
                    site=where.site, model=stock.h100, reserved_for=f"t:{counter[0]}", key=f"k{counter[0]}"
                )
            elif move in ("release", "issue_reserved"):
                res = m.StockReservation.objects.filter(status="active").order_by("id").first()
                if res is None:
                    return
                if move == "release":
                    cmdb_stock.reservation_release(reservation=res, reason="prop")
                else:
                    node = next(n for n in nodes if n.site_id == res.site_id)
                    free_slot = next(
                        i for i in range(64) if not m.Accelerator.objects.filter(node=node, slot_index=i).exists()
                    )
                    cmdb_stock.reservation_issue(reservation=res, node=node, slot_index=free_slot, key=f"i{counter[0]}")
            elif move == "cable_in":
                ledger.consumable_move(
                    part_model=stock.cable, kind="receive", quantity=pick % 7 + 1, location=where, reason="prop"
                )
            elif move == "cable_out":
                ledger.consumable_move(
                    part_model=stock.cable, kind="issue", quantity=pick % 5 + 1, location=where, reason="prop"
                )
            else:
                ledger.consumable_adjust(part_model=stock.cable, location=where, counted=pick % 4, reason="prop")
    except (ValidationError, cmdb_stock.NoSpareError):
        pass


def _assert_ledger_consistent() -> None:
    derived = {
        (r["location_id"], r["accelerator_model_id"]): r["q"]
        for r in m.StockMovement.objects.filter(location__isnull=False, accelerator__isnull=False)
        .values("location_id", "accelerator_model_id")
        .annotate(q=Sum("quantity"))
    }
    cards = {}
    for card in m.Accelerator.objects.filter(lifecycle="in_stock"):
        key = (card.stock_location_id, card.model_id)
        cards[key] = cards.get(key, 0) + 1
    assert {k: v for k, v in derived.items() if v} == cards
    assert all(v >= 0 for v in derived.values())
    cables = (
        m.StockMovement.objects.filter(part_model__sku="CBL-DAC-400G-2M")
        .values("location_id")
        .annotate(q=Sum("quantity"))
    )
    assert all(r["q"] >= 0 for r in cables)
    assert ledger_drift() == []


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    moves=st.lists(
        st.tuples(MOVES, st.integers(min_value=0, max_value=50), st.integers(min_value=0, max_value=2)),
        min_size=1,
        max_size=30,
    )
)
def test_ledger_always_sums_to_the_stock_shown(stock, moves):
    nodes = [stock.node1, NodeFactory(site=stock.bj2)]
    counter = [0]
    sid = transaction.savepoint()  # each example starts from the same empty ledger
    try:
        for move, pick, place in moves:
            _apply(stock, move, pick, place, nodes, counter)
            _assert_ledger_consistent()
    finally:
        transaction.savepoint_rollback(sid)
