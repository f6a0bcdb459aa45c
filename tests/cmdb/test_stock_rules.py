"""The one set of stock movement rules (cmdb.services.stock), used by workflows and the warehouse ledger alike:
a reason is required and a card reserved for someone else does not move."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from cmdb import models as m
from cmdb.services.stock import accelerator_out_of_stock, accelerator_to_stock
from tests.factories.cmdb import AcceleratorFactory, SiteFactory, StockLocationFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def reserved():
    site = SiteFactory(code="st1")
    shelf = StockLocationFactory(site=site, name="shelf")
    card = AcceleratorFactory(
        serial="ST-1", lifecycle="in_stock", node=None, slot_index=None, stock_location=shelf, site=site
    )
    now = timezone.now()
    m.StockReservation.objects.create(
        accelerator=card, site=site, reserved_for="ticket:7", reserved_at=now, expires_at=now + dt.timedelta(hours=1)
    )
    return card


def test_a_movement_without_a_reason_is_refused_and_nothing_moves(reserved):
    with pytest.raises(ValidationError) as err:
        accelerator_out_of_stock(accelerator=reserved, kind=m.MovementKind.SCRAP, reason=" ", ticket_ref="ticket:7")
    assert "reason" in err.value.message_dict
    assert m.Accelerator.objects.get(pk=reserved.pk).lifecycle == "in_stock"
    assert not m.StockMovement.objects.filter(accelerator=reserved).exists()


def test_a_card_reserved_for_another_ticket_does_not_move(reserved):
    with pytest.raises(ValidationError, match="reserved for ticket:7"):
        accelerator_out_of_stock(accelerator=reserved, kind=m.MovementKind.SCRAP, reason="dropped", ticket_ref="x")
    assert m.Accelerator.objects.get(pk=reserved.pk).lifecycle == "in_stock"


def test_the_reservation_holder_may_move_it(reserved):
    other = StockLocationFactory(site=reserved.site, name="cage")
    card = accelerator_to_stock(accelerator=reserved, location=other, reason="re-shelved", ticket_ref="ticket:7")
    assert card.stock_location_id == other.pk
