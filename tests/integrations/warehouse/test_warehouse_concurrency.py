"""Services tier (PostgreSQL): the last spare, reserved by two workers at the same moment, goes to exactly one;
the other gets a clear NoSpareError. Real threads, each on its own database connection."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from cmdb import models as m
from cmdb.services.stock import NoSpareError, spare_reserve
from gpuops.context import ChangeSource, change_context
from integrations.warehouse.services import ledger

pytestmark = pytest.mark.services


def race(stock, reserved_for: list[str]) -> dict[str, tuple[str, str]]:
    barrier = threading.Barrier(len(reserved_for))
    results: dict[str, tuple[str, str]] = {}

    def worker(holder: str) -> None:
        try:
            barrier.wait(timeout=10)
            with change_context(source=ChangeSource.WORKFLOW):
                res = spare_reserve(site=stock.sh1, model=stock.h100, reserved_for=holder, key=f"reserve:{holder}")
            results[holder] = ("ok", res.accelerator.serial)
        except NoSpareError as exc:
            results[holder] = ("no_spare", str(exc))
        finally:
            connection.close()  # each thread opened its own connection

    threads = [threading.Thread(target=worker, args=(h,)) for h in reserved_for]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return results


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(5))
def test_the_last_spare_reserved_concurrently_goes_to_one_worker(stock, round_):
    assert connection.vendor == "postgresql"
    ledger.accelerators_receive(
        cards=[ledger.CardReceipt(serial=f"LAST-{round_}", model=stock.h100)],
        location=stock.wh1,
        reason="r",
        key_prefix="t",
    )
    results = race(stock, ["ticket:a", "ticket:b"])
    outcomes = sorted(kind for kind, _ in results.values())
    assert outcomes == ["no_spare", "ok"], results
    loser = next(detail for kind, detail in results.values() if kind == "no_spare")
    assert f"No free {stock.h100} spare in stock at {stock.sh1}" in loser
    assert m.StockReservation.objects.filter(status="active").count() == 1
    assert m.StockMovement.objects.filter(kind="reserve").count() == 1


def _three_spares_eight_workers(stock) -> tuple[list[str], int]:
    ledger.accelerators_receive(
        cards=[ledger.CardReceipt(serial=f"S{i}", model=stock.h100) for i in range(3)],
        location=stock.wh1,
        reason="r",
        key_prefix="t",
    )
    results = race(stock, [f"ticket:{i}" for i in range(8)])
    winners = [serial for kind, serial in results.values() if kind == "ok"]
    return winners, sum(1 for kind, _ in results.values() if kind == "no_spare")


@pytest.mark.django_db(transaction=True)
def test_many_workers_never_get_the_same_card(stock):
    winners, losers = _three_spares_eight_workers(stock)
    assert 1 <= len(winners) <= 3 and len(set(winners)) == len(winners)
    assert losers == 8 - len(winners)
    assert m.StockReservation.objects.filter(status="active").count() == len(winners)


@pytest.mark.django_db(transaction=True)
def test_every_free_spare_is_handed_out_under_contention(stock):
    winners, _ = _three_spares_eight_workers(stock)
    assert sorted(winners) == ["S0", "S1", "S2"]
