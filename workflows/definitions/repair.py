"""Repair / RMA of a failed accelerator card.

Opened by the health hook when ingestion marks a card failed (one open ticket per card; a repeated signal
adds to its timeline) or by hand. Then:

    new --start--> draining [drain] --drained--> diagnosing
    diagnosing --verdict: replace--> reserving_spare [reserve_spare] --spare_reserved--> awaiting_swap
                                       |--no_spare--> waiting_for_spare [reserve_spare re-checks] --spare_reserved--^
    diagnosing --verdict: reseated--> verifying           diagnosing --verdict: false alarm--> resuming
    awaiting_swap --confirm_swap (old + new serials)--> updating_cmdb [update_cmdb] --cmdb_updated--> verifying
    awaiting_swap --reserve_again (the reservation expired)--> reserving_spare
    verifying [verify: the card reports healthy after the swap] --verified--> resuming
                                                              --verify_timed_out--> verify_timed_out
    verify_timed_out --reverify--> verifying;  --force_resume--> resuming
    resuming [resume] --node_resumed--> awaiting_rma_shipment (replaced) / --node_resumed_done--> closed
    awaiting_rma_shipment --record_rma_shipment--> awaiting_replacement
    awaiting_replacement --receive_replacement--> receiving_replacement [receive_replacement]
                                                   --replacement_stocked--> closed
    any open state --cancel--> cancelled [release: spare reservation released, procurement need cancelled]

Ticket data (ticket.data) written along the way: accelerator_id, failed_serial, node_id, node_hostname,
slot_index, model_id (on create); node_status_before, drain_reason, jobs_impact (drain: the jobs that ran on
the node before the failure); verdict, root_cause (diagnosis); reservation_id, spare_id, spare_serial,
spare_location_id (reserve_spare); old_serial, new_serial (confirm_swap); verify_since (verify); rma_vendor,
rma_number, rma_tracking; replacement_serial, replacement_id; cancel_reason.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from django.db import models

from cmdb.models import Accelerator, AcceleratorModel, MovementKind, Node, StockLocation, StockReservation
from cmdb.services.health import health_events_resolve
from cmdb.services.stock import (
    NoSpareError,
    accelerator_out_of_stock,
    accelerator_receive,
    reservation_issue,
    spare_reserve,
)
from inventory_agents.services.liveness import cards_last_seen

from ..conf import workflows_setting
from ..declarations import Field, Transition, Workflow, step
from ..engine import GuardError, link_add
from ..models import LinkRole, ProcurementNeed, Ticket
from ..services.cmdb_writes import procurement_need_open, procurement_needs_close, warehouse_for
from ..services.job_impact import jobs_impact_collect
from ..steps import Done, Failed, StepContext, StepOutcome, WaitForEvent, node_reported_key
from .common import holdings_release, node_drain, node_resume, reservation_ref


class RepairState(models.TextChoices):
    NEW = "new", "New"
    DRAINING = "draining", "Draining node"
    DIAGNOSING = "diagnosing", "Diagnosing"
    RESERVING_SPARE = "reserving_spare", "Reserving spare"
    WAITING_FOR_SPARE = "waiting_for_spare", "Waiting for spare"
    AWAITING_SWAP = "awaiting_swap", "Awaiting swap"
    UPDATING_CMDB = "updating_cmdb", "Updating CMDB"
    VERIFYING = "verifying", "Verifying"
    VERIFY_TIMED_OUT = "verify_timed_out", "Verification timed out"
    RESUMING = "resuming", "Resuming node"
    AWAITING_RMA_SHIPMENT = "awaiting_rma_shipment", "Awaiting RMA shipment"
    AWAITING_REPLACEMENT = "awaiting_replacement", "Awaiting replacement"
    RECEIVING_REPLACEMENT = "receiving_replacement", "Receiving replacement"
    CLOSED = "closed", "Closed"
    CANCELLED = "cancelled", "Cancelled"


class Verdict(models.TextChoices):
    REPLACE = "replace", "Replace the card"
    RESEAT = "reseat", "Reseated"
    FALSE_ALARM = "false_alarm", "False alarm"


S = RepairState
TERMINAL = frozenset({S.CLOSED, S.CANCELLED})
OPEN_STATES = frozenset(S.values) - TERMINAL
# A repair in these states holds its node drained: resuming the node under it would put a broken card to work.
HOLDS_NODE = frozenset(
    {
        S.DRAINING,
        S.DIAGNOSING,
        S.RESERVING_SPARE,
        S.WAITING_FOR_SPARE,
        S.AWAITING_SWAP,
        S.UPDATING_CMDB,
        S.VERIFYING,
        S.VERIFY_TIMED_OUT,
    }
)


def dedup_key_for(accelerator_id: int) -> str:
    """One open repair per card."""
    return f"repair:accelerator:{accelerator_id}"


# --- create -------------------------------------------------------------------------------------------------------


def _dedup(values: Mapping[str, Any]) -> str:
    card = values.get("accelerator")
    return dedup_key_for(card.pk) if isinstance(card, Accelerator) else ""


def _on_create(ticket: Ticket, values: Mapping[str, Any]) -> None:
    """Remember the failed card and where it sits; link its node."""
    card: Accelerator = values["accelerator"]
    if card.node_id is None or card.slot_index is None:
        raise GuardError(
            f"{card} is not installed in a node slot ({card.lifecycle}); nothing to repair in place.",
            field_errors={"accelerator": "Not installed in a node."},
        )
    node = card.node
    ticket.data.update(
        {
            "accelerator_id": card.pk,
            "failed_serial": card.serial or "",
            "node_id": node.pk,
            "node_hostname": node.hostname,
            "slot_index": card.slot_index,
            "model_id": card.model_id,
        }
    )
    link_add(ticket=ticket, obj=node, role=LinkRole.SUBJECT)


# --- guards -------------------------------------------------------------------------------------------------------


def _norm(serial: Any) -> str:
    return str(serial or "").strip().upper()


def swap_serials_match(ticket: Ticket, values: Mapping[str, Any]) -> list[str]:
    """The technician removed the failed card and installed the reserved spare - not any other card."""
    errors = []
    where = f"{ticket.data.get('node_hostname')} slot {ticket.data.get('slot_index')}"
    if _norm(values.get("old_serial")) != _norm(ticket.data.get("failed_serial")):
        errors.append(
            f"Removed card {values.get('old_serial')} is not the failed card "
            f"{ticket.data.get('failed_serial')} of {where}. Check the serial on the card you pulled."
        )
    if _norm(values.get("new_serial")) != _norm(ticket.data.get("spare_serial")):
        errors.append(
            f"Installed card {values.get('new_serial')} is not the reserved spare "
            f"{ticket.data.get('spare_serial')}. Install the reserved spare (or cancel and reopen)."
        )
    return errors


def replacement_serial_is_new(ticket: Ticket, values: Mapping[str, Any]) -> list[str]:
    serial = values.get("replacement_serial")
    if serial and Accelerator.objects.filter(serial=serial).exists():
        return [f"Serial {serial} is already in the CMDB; a replacement card is a card we never had."]
    return []


def spare_still_reserved(ticket: Ticket, values: Mapping[str, Any]) -> list[str]:
    """Reservations expire (cmdb reservations_expire, 72 h by default): a swap needs one that is still held."""
    res = StockReservation.objects.filter(pk=ticket.data.get("reservation_id")).first()
    if res is None:
        return ["No spare is reserved for this ticket."]
    if res.status != "active":
        return [
            f"The reservation of spare {ticket.data.get('spare_serial')} is {res.status}; "
            "take 'Reserve a spare again' first."
        ]
    return []


# --- steps --------------------------------------------------------------------------------------------------------


@step("drain", label="Drain the node", time_limit_s=300)
def drain(ctx: StepContext) -> StepOutcome:
    """Drain the node in its scheduler, mark it draining and cordoned with the ticket as reason; wait until
    its jobs are gone, then mark it in maintenance."""
    node = ctx.subject_node()
    assert node is not None, "a repair ticket always has a subject node"
    # Before the drain moves anything: the jobs the failure touched, for the training team and the postmortem.
    impact = {"jobs_impact": jobs_impact_collect(ctx, node, failed_at=ctx.ticket.created_at)}
    before, waiting = node_drain(ctx, node)
    if waiting is not None:
        return dataclasses.replace(waiting, data={**waiting.data, **impact})
    return Done(
        transition="drained",
        message=f"{node} drained",
        data={"node_status_before": before["status_before"], "drain_reason": before["drain_reason"], **impact},
    )


@step("reserve_spare", label="Reserve a spare", time_limit_s=120)
def reserve_spare(ctx: StepContext) -> StepOutcome:
    """Reserve a compatible spare at the node's site. With none in stock, record a procurement need and wait
    (state waiting_for_spare), re-checking every SPARE_RECHECK_MINUTES or when a spare is stocked."""
    ticket = ctx.ticket
    card = Accelerator.objects.select_related("model").get(pk=ticket.data["accelerator_id"])
    node = Node.objects.select_related("site").get(pk=ticket.data["node_id"])

    def reserve() -> dict[str, Any]:
        res = spare_reserve(
            site=node.site,
            model=card.model,
            reserved_for=reservation_ref(ticket),
            key=f"{ctx.run.effect_prefix}:reserve",
        )
        spare = res.accelerator
        link_add(ticket=ticket, obj=spare, role=LinkRole.SPARE)
        procurement_needs_close(ticket=ticket, status=ProcurementNeed.Status.FULFILLED)
        return {
            "reservation_id": res.pk,
            "spare_id": spare.pk,
            "spare_serial": spare.serial or "",
            "spare_location_id": spare.stock_location_id,
        }

    try:
        result = ctx.effect("reserve", reserve)
    except NoSpareError as exc:
        need = procurement_need_open(ticket=ticket, site=node.site, model=card.model, reason=str(exc))
        return WaitForEvent(
            key=spares_event_key(node.site_id, card.model_id),
            recheck_in=dt.timedelta(minutes=workflows_setting("SPARE_RECHECK_MINUTES")),
            message=f"no {card.model} spare in stock at {node.site}; procurement need #{need.pk} recorded",
            transition="no_spare" if ticket.state == S.RESERVING_SPARE else None,
        )
    return Done(
        transition="spare_reserved",
        data=result,
        message=f"spare {result['spare_serial']} reserved for {node} slot {ticket.data['slot_index']}",
    )


def spares_event_key(site_id: int, model_id: int) -> str:
    """The event a repair waiting for a spare waits on: stocking code calls
    workflows.runner.runs_wake_for_event(spares_event_key(site, model)) to wake it at once."""
    return f"spares:{site_id}:{model_id}"


@step("update_cmdb", label="Update the CMDB", time_limit_s=120)
def update_cmdb(ctx: StepContext) -> StepOutcome:
    """Record the swap: the failed card leaves the node for RMA (ledger rma_out), the reserved spare is issued
    into the same slot (ledger issue, placement history, lifecycle installed)."""
    data = ctx.ticket.data
    ref = reservation_ref(ctx.ticket)
    node = Node.objects.get(pk=data["node_id"])
    failed = Accelerator.objects.get(pk=data["accelerator_id"])
    reservation = StockReservation.objects.get(pk=data["reservation_id"])
    prefix = ctx.run.effect_prefix

    def failed_card_out() -> dict[str, Any]:
        card = accelerator_out_of_stock(
            accelerator=failed,
            kind=MovementKind.RMA_OUT,
            ticket_ref=ref,
            key=f"{prefix}:rma_out",
            reason=f"{ctx.ticket.reference}: pulled from {node} slot {data['slot_index']} for RMA",
        )
        return {"accelerator_id": card.pk, "lifecycle": card.lifecycle}

    def spare_in() -> dict[str, Any]:
        card = reservation_issue(
            reservation=reservation, node=node, slot_index=data["slot_index"], key=f"{prefix}:issue"
        )
        return {"accelerator_id": card.pk, "lifecycle": card.lifecycle}

    # Order matters: the slot must be free before the spare goes into it.
    ctx.effect("failed_card_out", failed_card_out)
    ctx.effect("spare_in", spare_in)
    ctx.effect("resolve_health_events", lambda: health_events_resolve(accelerator_id=failed.pk))
    return Done(
        transition="cmdb_updated",
        message=f"{failed} out for RMA, {data['spare_serial']} installed in {node} slot {data['slot_index']}",
    )


@step("verify", label="Verify the card", time_limit_s=60)
def verify(ctx: StepContext) -> StepOutcome:
    """Wait for the node's agent to report the card (the spare, or the reseated card) healthy after the
    repair; give up after VERIFY_TIMEOUT_MINUTES (state verify_timed_out, where people decide)."""
    data = ctx.ticket.data
    card_id = data["spare_id"] if data.get("verdict") == Verdict.REPLACE else data["accelerator_id"]
    card = Accelerator.objects.select_related("node").get(pk=card_id)
    since_raw = data.get("verify_since") or ctx.now.isoformat()
    since = dt.datetime.fromisoformat(since_raw)
    seen_at = cards_last_seen(card.node, [card])[card.pk] if card.node_id else card.last_seen_at
    if card.health == "ok" and seen_at is not None and seen_at > since:
        return Done(
            transition="verified",
            data={"verify_since": since_raw},
            message=f"{card} reported healthy at {seen_at:%Y-%m-%d %H:%M:%S} UTC",
        )
    timeout = dt.timedelta(minutes=workflows_setting("VERIFY_TIMEOUT_MINUTES"))
    deadline = ctx.deadline("verify", timeout)
    if ctx.now >= deadline:
        return Done(
            transition="verify_timed_out",
            data={"verify_since": since_raw},
            message=f"no healthy report of {card} within {timeout} (health {card.health})",
        )
    # Any report of its node may confirm the card (an unchanged re-report names no cards).
    key = node_reported_key(card.node_id) if card.node_id else f"accelerator:{card.pk}:reported"
    return WaitForEvent(
        key=key,
        data={"verify_since": since_raw},
        recheck_in=dt.timedelta(seconds=workflows_setting("VERIFY_POLL_SECONDS")),
        message=f"waiting for the agent to report {card} healthy (until {deadline:%H:%M} UTC)",
    )


@step("resume", label="Resume the node", time_limit_s=300)
def resume(ctx: StepContext) -> StepOutcome:
    """Resume the node in its scheduler, restore its status and lift the workflow's cordon - unless another
    open repair of the same node still needs it drained."""
    data = ctx.ticket.data
    node = Node.objects.select_related("cluster").get(pk=data["node_id"])
    next_transition = "node_resumed" if data.get("verdict") == Verdict.REPLACE else "node_resumed_done"
    if data.get("verdict") != Verdict.REPLACE:
        ctx.effect("resolve_health_events", lambda: health_events_resolve(accelerator_id=data["accelerator_id"]))
    others = [
        t.reference
        for t in Ticket.objects.filter(type="repair", is_open=True, links__node=node, state__in=HOLDS_NODE)
        .exclude(pk=ctx.ticket.pk)
        .distinct()
    ]
    if others:
        return Done(transition=next_transition, message=f"{node} stays drained for {', '.join(others)}")
    node_resume(ctx, node, status_before=data.get("node_status_before", "active"))
    return Done(transition=next_transition, message=f"{node} back in service")


@step("receive_replacement", label="Stock the replacement", time_limit_s=120)
def receive_replacement(ctx: StepContext) -> StepOutcome:
    """The vendor's replacement card arrives: create it and put it into the site's stock (ledger rma_back)."""
    data = ctx.ticket.data
    failed = Accelerator.objects.select_related("model").get(pk=data["accelerator_id"])
    node = Node.objects.select_related("site").get(pk=data["node_id"])
    location = StockLocation.objects.filter(pk=data.get("spare_location_id")).first() or warehouse_for(node.site)
    if location is None:
        return Failed(reason=f"no warehouse at {node.site}; create one in the admin, then retry the step")

    def stock() -> dict[str, Any]:
        card = accelerator_receive(
            model=AcceleratorModel.objects.get(pk=failed.model_id),
            serial=data["replacement_serial"],
            location=location,
            reason=f"{ctx.ticket.reference}: RMA replacement for {failed}",
            ticket_ref=reservation_ref(ctx.ticket),
            key=f"{ctx.run.effect_prefix}:rma_back",
            template=failed,
        )
        link_add(ticket=ctx.ticket, obj=card, role=LinkRole.REPLACEMENT)
        return {"replacement_id": card.pk}

    result = ctx.effect("replacement_in", stock)
    return Done(
        transition="replacement_stocked", data=result, message=f"{data['replacement_serial']} in stock at {location}"
    )


@step("release", label="Release what the ticket holds", time_limit_s=120)
def release(ctx: StepContext) -> StepOutcome:
    """On cancel: release the spare reservation and cancel the procurement need. The node is left as it is
    (still drained and cordoned if it was): the failed card is still in it."""
    return Done(message=holdings_release(ctx))


# --- the graph ----------------------------------------------------------------------------------------------------

NOTE = Field("note", "Note", kind="textarea", required=False, store=False)
# A card that is not replaced failed for another reason: the verdict names it (root-cause categories are data,
# workflows.RootCauseCategory; failure analytics count repairs by them).
ROOT_CAUSE = Field(
    "root_cause",
    "Root cause category",
    required=False,
    max_length=64,
    help_text="e.g. hardware-board (the slot, not the card), cabling, cooling, driver, firmware, unknown.",
)


def _root_cause_known(ticket: Ticket, values: Mapping[str, Any]) -> list[str]:
    from ..models import RootCauseCategory

    slug = values.get("root_cause")
    if slug and not RootCauseCategory.objects.filter(slug=slug, is_active=True).exists():
        offered = ", ".join(RootCauseCategory.objects.filter(is_active=True).values_list("slug", flat=True))
        return [f"Unknown root cause category {slug!r}; one of: {offered}."]
    return []


TRANSITIONS = (
    Transition(
        "start",
        "Start repair (drain node)",
        frozenset({S.NEW}),
        S.DRAINING,
        "repair_start",
        step="drain",
        fields=(NOTE,),
    ),
    Transition("drained", "Node drained", frozenset({S.DRAINING}), S.DIAGNOSING, None),
    Transition(
        "diagnose_replace",
        "Verdict: replace the card",
        frozenset({S.DIAGNOSING}),
        S.RESERVING_SPARE,
        "repair_diagnose",
        step="reserve_spare",
        sets={"verdict": Verdict.REPLACE},
        fields=(NOTE,),
    ),
    Transition(
        "diagnose_reseat",
        "Verdict: reseated",
        frozenset({S.DIAGNOSING}),
        S.VERIFYING,
        "repair_diagnose",
        step="verify",
        sets={"verdict": Verdict.RESEAT},
        fields=(ROOT_CAUSE, NOTE),
        guards=(_root_cause_known,),
        style="secondary",
        description="The card was reseated; the agent's next report must show it healthy.",
    ),
    Transition(
        "diagnose_false_alarm",
        "Verdict: false alarm",
        frozenset({S.DIAGNOSING}),
        S.RESUMING,
        "repair_diagnose",
        step="resume",
        sets={"verdict": Verdict.FALSE_ALARM},
        fields=(ROOT_CAUSE, Field("note", "Why it is a false alarm", kind="textarea", store=False)),
        guards=(_root_cause_known,),
        style="secondary",
    ),
    Transition("no_spare", "No spare in stock", frozenset({S.RESERVING_SPARE}), S.WAITING_FOR_SPARE, None),
    Transition(
        "spare_reserved", "Spare reserved", frozenset({S.RESERVING_SPARE, S.WAITING_FOR_SPARE}), S.AWAITING_SWAP, None
    ),
    Transition(
        "confirm_swap",
        "Confirm swap",
        frozenset({S.AWAITING_SWAP}),
        S.UPDATING_CMDB,
        "repair_swap",
        step="update_cmdb",
        guards=(spare_still_reserved, swap_serials_match),
        fields=(
            Field("old_serial", "Serial of the card removed"),
            Field("new_serial", "Serial of the card installed"),
            NOTE,
        ),
        description="Type the serials from the cards' labels; they must match the failed card and the reserved spare.",
    ),
    Transition(
        "reserve_again",
        "Reserve a spare again",
        frozenset({S.AWAITING_SWAP}),
        S.RESERVING_SPARE,
        "repair_swap",
        step="reserve_spare",
        style="secondary",
        fields=(NOTE,),
        description="When the reservation expired or the reserved spare turned out bad.",
    ),
    Transition("cmdb_updated", "CMDB updated", frozenset({S.UPDATING_CMDB}), S.VERIFYING, None, step="verify"),
    Transition("verified", "Card verified healthy", frozenset({S.VERIFYING}), S.RESUMING, None, step="resume"),
    Transition("verify_timed_out", "Verification timed out", frozenset({S.VERIFYING}), S.VERIFY_TIMED_OUT, None),
    Transition(
        "reverify",
        "Verify again",
        frozenset({S.VERIFY_TIMED_OUT}),
        S.VERIFYING,
        "repair_verify",
        step="verify",
        fields=(NOTE,),
    ),
    Transition(
        "force_resume",
        "Resume without verification",
        frozenset({S.VERIFY_TIMED_OUT}),
        S.RESUMING,
        "repair_force_resume",
        step="resume",
        style="danger",
        fields=(Field("note", "Why it is safe to resume", kind="textarea", store=False),),
    ),
    Transition("node_resumed", "Node resumed", frozenset({S.RESUMING}), S.AWAITING_RMA_SHIPMENT, None),
    Transition("node_resumed_done", "Node resumed, nothing to ship", frozenset({S.RESUMING}), S.CLOSED, None),
    Transition(
        "record_rma_shipment",
        "Record RMA shipment",
        frozenset({S.AWAITING_RMA_SHIPMENT}),
        S.AWAITING_REPLACEMENT,
        "repair_rma",
        fields=(
            Field("rma_vendor", "Vendor"),
            Field("rma_number", "RMA number"),
            Field("rma_tracking", "Tracking number"),
            NOTE,
        ),
    ),
    Transition(
        "receive_replacement",
        "Receive replacement",
        frozenset({S.AWAITING_REPLACEMENT}),
        S.RECEIVING_REPLACEMENT,
        "repair_rma",
        step="receive_replacement",
        guards=(replacement_serial_is_new,),
        fields=(Field("replacement_serial", "Serial of the replacement card"), NOTE),
    ),
    Transition("replacement_stocked", "Replacement in stock", frozenset({S.RECEIVING_REPLACEMENT}), S.CLOSED, None),
    Transition(
        "cancel",
        "Cancel",
        OPEN_STATES,
        S.CANCELLED,
        "repair_cancel",
        step="release",
        allow_requester=True,
        allowed_when_paused=True,
        style="danger",
        fields=(Field("cancel_reason", "Why cancel", kind="textarea"),),
    ),
)

WORKFLOW = Workflow(
    type="repair",
    label="Repair / RMA",
    prefix="REP",
    states=RepairState,
    initial=S.NEW,
    terminal=TERMINAL,
    transitions=TRANSITIONS,
    drain_timeout=dt.timedelta(hours=2),
    steps=(drain, reserve_spare, update_cmdb, verify, resume, receive_replacement, release),
    create_fields=(Field("accelerator", "Failed card (serial)", kind="accelerator"),),
    waiting_states=frozenset(
        {
            S.WAITING_FOR_SPARE,
            S.AWAITING_SWAP,
            S.VERIFY_TIMED_OUT,
            S.AWAITING_RMA_SHIPMENT,
            S.AWAITING_REPLACEMENT,
            S.DIAGNOSING,
        }
    ),
    default_group=lambda: workflows_setting("REPAIR_ASSIGNEE_GROUP"),
    start_transition="start",
    dedup=_dedup,
    on_create=_on_create,
    sla={
        "critical": dt.timedelta(hours=8),
        "high": dt.timedelta(days=2),
        "normal": dt.timedelta(days=5),
        "low": dt.timedelta(days=14),
    },
    description=__doc__ or "",
)
