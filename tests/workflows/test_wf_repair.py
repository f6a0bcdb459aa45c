"""Repair / RMA end to end with the fake scheduler and notifier, eager Celery, on-commit callbacks executed."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from cmdb import models as m
from cmdb.hooks import AcceleratorFailure, accelerator_failed
from tests.workflows.helpers import agent_reports_healthy, open_by_hook, take, ticket_fresh
from workflows.engine import GuardError
from workflows.models import ProcurementNeed, StepRun, StepStatus, Ticket, TimelineKind

pytestmark = pytest.mark.django_db


def test_repair_replace_happy_path(wf, fleet, tech, lead):
    spare = fleet.spare("SPARE-0001")
    ticket = open_by_hook(wf, fleet)

    # The hook drained the node at once: scheduler drain, CMDB status and cordon, then maintenance.
    assert ticket.state == "diagnosing"
    node = m.Node.objects.get(pk=fleet.node.pk)
    assert node.status == "maintenance"
    assert node.is_cordoned and node.cordon_reason.startswith(f"{ticket.reference}: ")
    assert wf.scheduler.calls["drain"] == 1
    assert wf.scheduler.log[0][1] == "sh9-h100-0001"

    ticket = take(wf, ticket, "diagnose_replace", tech, note="XID 79 twice; card is dead")
    assert ticket.state == "awaiting_swap"
    assert ticket.data["verdict"] == "replace"
    assert ticket.data["spare_serial"] == "SPARE-0001"
    assert m.StockReservation.objects.get(accelerator=spare).status == "active"

    with pytest.raises(GuardError) as err:
        take(wf, ticket, "confirm_swap", tech, old_serial=fleet.failed.serial, new_serial="SOMETHING-ELSE")
    assert "is not the reserved spare SPARE-0001" in str(err.value)
    with pytest.raises(GuardError) as err:
        take(wf, ticket, "confirm_swap", tech, old_serial="1654SH900004", new_serial="SPARE-0001")
    assert "is not the failed card 1654SH900003" in str(err.value)
    assert ticket_fresh(ticket).state == "awaiting_swap"

    ticket = take(wf, ticket, "confirm_swap", tech, old_serial="1654sh900003", new_serial="SPARE-0001")
    assert ticket.state == "verifying"
    failed = m.Accelerator.objects.get(pk=fleet.failed.pk)
    spare.refresh_from_db()
    assert failed.lifecycle == "rma" and failed.node_id is None
    assert spare.lifecycle == "installed" and spare.node_id == fleet.node.pk and spare.slot_index == 3
    verify_run = StepRun.objects.get(ticket=ticket, step="verify")
    assert verify_run.status == StepStatus.WAITING
    assert verify_run.wait_key == f"node:{fleet.node.pk}:reported"  # any report of the node may confirm it

    wf.wake()  # the agent has not reported yet: still waiting, quietly
    assert ticket_fresh(ticket).state == "verifying"

    agent_reports_healthy(spare)
    wf.wake()
    ticket = ticket_fresh(ticket)
    assert ticket.state == "awaiting_rma_shipment"
    node.refresh_from_db()
    assert node.status == "active" and not node.is_cordoned
    assert wf.scheduler.calls["resume"] == 1

    ticket = take(
        wf,
        ticket,
        "record_rma_shipment",
        tech,
        rma_vendor="NVIDIA",
        rma_number="RMA-778812",
        rma_tracking="1Z999AA10123456784",
    )
    assert ticket.state == "awaiting_replacement"
    with pytest.raises(GuardError, match="already in the CMDB"):
        take(wf, ticket, "receive_replacement", tech, replacement_serial="1654SH900000")
    ticket = take(wf, ticket, "receive_replacement", tech, replacement_serial="1654RMA00001")
    assert ticket.state == "closed" and not ticket.is_open and ticket.closed_at

    replacement = m.Accelerator.objects.get(serial="1654RMA00001")
    assert replacement.lifecycle == "in_stock" and replacement.stock_location_id == fleet.warehouse.pk
    assert replacement.model_id == fleet.model.pk
    kinds = list(
        m.StockMovement.objects.filter(ticket_ref=f"ticket:{ticket.pk}").order_by("id").values_list("kind", flat=True)
    )
    assert kinds == ["reserve", "rma_out", "issue", "rma_back"]

    # Every CMDB change the workflow made carries the ticket's correlation id and the source "workflow".
    records = m.ChangeRecord.objects.filter(correlation_id=ticket.correlation_id)
    assert records.exists()
    assert set(records.values_list("source", flat=True)) == {"workflow"}
    changed = {(r.object_repr, tuple(sorted(r.changes))) for r in records}
    assert ("sh9-h100-0001", ("status",)) in changed
    assert any(r.object_repr == "1654RMA00001" and r.action == "create" for r in records)
    assert set(
        m.StockMovement.objects.filter(ticket_ref=f"ticket:{ticket.pk}").values_list("correlation_id", flat=True)
    ) == {ticket.correlation_id}
    # The ticket's step runs all succeeded, each once.
    assert set(StepRun.objects.filter(ticket=ticket).values_list("status", flat=True)) == {"succeeded"}
    assert "opened" in wf.notifier.events()


def test_no_spare_waits_records_need_then_continues(wf, fleet, tech):
    ticket = open_by_hook(wf, fleet)
    ticket = take(wf, ticket, "diagnose_replace", tech)
    assert ticket.state == "waiting_for_spare"
    need = ProcurementNeed.objects.get(ticket=ticket)
    assert need.status == "open" and need.site_id == fleet.site.pk and need.accelerator_model_id == fleet.model.pk
    run = StepRun.objects.get(ticket=ticket, step="reserve_spare")
    assert run.status == StepStatus.WAITING and run.wake_at > timezone.now()
    assert ticket.timeline.filter(message__contains="procurement need").count() == 1

    wf.wake()  # still none: waits on, no second need, no new timeline noise
    assert ticket_fresh(ticket).state == "waiting_for_spare"
    assert ProcurementNeed.objects.filter(ticket=ticket).count() == 1
    assert ticket.timeline.filter(message__contains="procurement need").count() == 1

    fleet.spare("SPARE-LATE")
    wf.wake()
    ticket = ticket_fresh(ticket)
    assert ticket.state == "awaiting_swap" and ticket.data["spare_serial"] == "SPARE-LATE"
    need.refresh_from_db()
    assert need.status == "fulfilled"


def test_verify_times_out_then_reverify(wf, fleet, tech, lead, settings):
    fleet.spare()
    ticket = open_by_hook(wf, fleet)
    ticket = take(wf, ticket, "diagnose_replace", tech)
    settings.GPUOPS_WORKFLOWS = {"VERIFY_TIMEOUT_MINUTES": 0}
    ticket = take(wf, ticket, "confirm_swap", tech, old_serial=fleet.failed.serial, new_serial="SPARE-0001")
    assert ticket.state == "verify_timed_out"
    assert "no healthy report of SPARE-0001" in ticket.timeline.filter(kind="step").last().message
    assert m.Node.objects.get(pk=fleet.node.pk).is_cordoned  # not resumed

    settings.GPUOPS_WORKFLOWS = {}
    ticket = take(wf, ticket, "reverify", tech)
    assert ticket.state == "verifying"
    agent_reports_healthy(m.Accelerator.objects.get(serial="SPARE-0001"))
    wf.wake()
    assert ticket_fresh(ticket).state == "awaiting_rma_shipment"


def test_reseat_verdict_verifies_same_card_and_closes(wf, fleet, tech):
    ticket = open_by_hook(wf, fleet)
    ticket = take(wf, ticket, "diagnose_reseat", tech, note="reseated, thermal paste ok")
    assert ticket.state == "verifying"
    agent_reports_healthy(fleet.failed)
    wf.wake()
    ticket = ticket_fresh(ticket)
    assert ticket.state == "closed"
    assert m.Accelerator.objects.get(pk=fleet.failed.pk).lifecycle == "installed"
    assert m.Node.objects.get(pk=fleet.node.pk).status == "active"


def test_cancel_mid_way_releases_reservation(wf, fleet, tech):
    spare = fleet.spare()
    ticket = open_by_hook(wf, fleet)
    ticket = take(wf, ticket, "diagnose_replace", tech)
    assert m.StockReservation.objects.get(accelerator=spare).status == "active"
    ticket = take(wf, ticket, "cancel", tech, cancel_reason="node goes to decommission instead")
    assert ticket.state == "cancelled" and not ticket.is_open
    assert m.StockReservation.objects.get(accelerator=spare).status == "released"
    assert m.StockMovement.objects.filter(accelerator=spare, kind="release").count() == 1
    release = StepRun.objects.get(ticket=ticket, step="release")
    assert release.status == StepStatus.SUCCEEDED
    # The node stays drained: the failed card is still in it.
    assert m.Node.objects.get(pk=fleet.node.pk).is_cordoned


def test_cancel_while_waiting_for_spare_cancels_wait_and_need(wf, fleet, tech):
    ticket = open_by_hook(wf, fleet)
    ticket = take(wf, ticket, "diagnose_replace", tech)
    assert ticket.state == "waiting_for_spare"
    ticket = take(wf, ticket, "cancel", tech, cancel_reason="duplicate")
    assert StepRun.objects.get(ticket=ticket, step="reserve_spare").status == StepStatus.CANCELLED
    assert ProcurementNeed.objects.get(ticket=ticket).status == "cancelled"
    fleet.spare()
    wf.wake()  # the cancelled wait never reserves the new spare
    assert not m.StockReservation.objects.exists()


def test_hook_twice_opens_one_ticket_and_adds_to_timeline(wf, fleet, groups):
    first = open_by_hook(wf, fleet)
    second = open_by_hook(wf, fleet, code="79", is_repeat=True)
    assert first.pk == second.pk
    assert Ticket.objects.filter(type="repair").count() == 1
    signals = list(first.timeline.filter(kind=TimelineKind.SIGNAL).values_list("message", flat=True))
    assert len(signals) == 2 and signals[1].startswith("Repeated health signal: xid 79")
    assert wf.scheduler.calls["drain"] == 1


def test_hook_after_close_opens_a_new_ticket(wf, fleet, tech):
    ticket = open_by_hook(wf, fleet)
    take(wf, ticket, "cancel", tech, cancel_reason="test")
    again = open_by_hook(wf, fleet)
    assert again.pk != ticket.pk and again.is_open


def test_hand_opened_repair_is_refused_for_a_card_with_an_open_ticket(wf, fleet, tech):
    from workflows.engine import ticket_create

    open_by_hook(wf, fleet)
    with pytest.raises(GuardError, match="already open"):
        ticket_create(type_="repair", title="again", requester=tech, inputs={"accelerator": fleet.failed.serial})


def test_two_failed_cards_in_one_node_resume_only_after_both(wf, fleet, tech):
    second_card = fleet.cards[5]
    first = open_by_hook(wf, fleet)
    wf.run(
        accelerator_failed,
        AcceleratorFailure(
            accelerator_id=second_card.pk,
            node_id=fleet.node.pk,
            health_event_id=None,
            kind="xid",
            code="48",
            message="DBE",
        ),
    )
    second = Ticket.objects.get(dedup_key=f"repair:accelerator:{second_card.pk}")
    take(wf, first, "diagnose_false_alarm", tech, note="XID from a test job")
    assert ticket_fresh(first).state == "closed"
    assert m.Node.objects.get(pk=fleet.node.pk).is_cordoned  # second repair still needs it drained
    take(wf, second, "diagnose_false_alarm", tech, note="same")
    node = m.Node.objects.get(pk=fleet.node.pk)
    assert not node.is_cordoned and node.status == "active"


def test_expired_reservation_blocks_the_swap_until_reserved_again(wf, fleet, tech):
    from cmdb.services.stock import reservations_expire

    fleet.spare("SPARE-A")
    ticket = open_by_hook(wf, fleet)
    ticket = take(wf, ticket, "diagnose_replace", tech)
    reservations_expire(now=timezone.now() + dt.timedelta(days=4))  # the technician took too long
    with pytest.raises(GuardError, match="reservation of spare SPARE-A is expired"):
        take(wf, ticket, "confirm_swap", tech, old_serial=fleet.failed.serial, new_serial="SPARE-A")
    ticket = take(wf, ticket, "reserve_again", tech)
    assert ticket.state == "awaiting_swap" and ticket.data["spare_serial"] == "SPARE-A"
    assert StepRun.objects.filter(ticket=ticket, step="reserve_spare").count() == 2
    ticket = take(wf, ticket, "confirm_swap", tech, old_serial=fleet.failed.serial, new_serial="SPARE-A")
    assert ticket.state == "verifying"


def test_drain_waits_for_running_jobs_naming_them_until_the_ticket_types_timeout(wf, fleet, settings):
    from integrations.schedulers.fake import _FakeNode
    from workflows.definitions.common import drain_timeout

    wf.scheduler.nodes["sh9-h100-0001"] = _FakeNode(running=2)
    ticket = open_by_hook(wf, fleet)
    run = StepRun.objects.get(ticket=ticket, step="drain")
    assert run.status == StepStatus.WAITING and run.wait_key == f"node:{fleet.node.pk}:drained"
    assert m.Node.objects.get(pk=fleet.node.pk).status == "draining"  # not yet maintenance: hands off
    steps = ticket.timeline.filter(kind="step")
    assert "still runs 2 job(s) (1000, 1001)" in steps.last().message

    # Repair sets its own timeout (2 h), whatever the global default says.
    settings.GPUOPS_WORKFLOWS = {"DRAIN_TIMEOUT_MINUTES": 1}
    assert drain_timeout(ticket) == dt.timedelta(hours=2)
    deadline = dt.datetime.fromisoformat(run.state["deadline:drain"])
    assert dt.timedelta(hours=2) <= deadline - run.created_at < dt.timedelta(hours=2, minutes=1)

    wf.wake()  # nothing changed: waits on
    wf.scheduler.nodes["sh9-h100-0001"].running = 1  # one job ended: the ticket says which one is left
    wf.wake()
    assert ticket_fresh(ticket).state == ticket.state
    assert "still runs 1 job(s) (1000)" in steps.last().message
    assert steps.filter(message__contains="waiting").count() == 2  # a recheck with no change stays quiet

    run = StepRun.objects.get(ticket=ticket, step="drain")
    run.state["deadline:drain"] = (timezone.now() - dt.timedelta(seconds=1)).isoformat()
    run.save(update_fields=["state"])
    wf.wake()
    run.refresh_from_db()
    assert run.status == StepStatus.FAILED
    assert "still runs 1 job(s) (1000) after 2:00:00" in run.error
    assert m.Node.objects.get(pk=fleet.node.pk).status == "draining"


def test_drain_timeout_falls_back_to_the_setting_for_types_without_one(wf, fleet, settings):
    from workflows.definitions.common import drain_timeout

    settings.GPUOPS_WORKFLOWS = {"DRAIN_TIMEOUT_MINUTES": 45}
    assert drain_timeout(Ticket(type="rollout")) == dt.timedelta(minutes=45)
    assert drain_timeout(Ticket(type="decommission")) == dt.timedelta(hours=24)
