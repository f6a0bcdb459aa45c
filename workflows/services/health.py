"""The receiver of cmdb.hooks.accelerator_failed: one open repair ticket per failed card.

It runs inside the caller's transaction (agent ingestion), so the ticket, its timeline entry and the failed
card's state commit together, and the drain step is queued only after that commit. A repeated signal for a
card with an open ticket adds a timeline entry instead of a second ticket; the partial unique constraint on
Ticket.dedup_key settles two ingestions racing for the same card.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction

from cmdb.hooks import AcceleratorFailure
from cmdb.models import Accelerator

from ..conf import workflows_setting
from ..definitions.repair import dedup_key_for
from ..engine import timeline_add, transition_apply
from ..models import Ticket, TicketPriority, TimelineKind
from ..runner import runs_wake_for_event
from ..steps import node_reported_key

logger = logging.getLogger(__name__)


def _signal_text(failure: AcceleratorFailure) -> str:
    code = f" {failure.code}" if failure.code else ""
    return f"{failure.kind}{code}: {failure.message}".strip()


def _signal_data(failure: AcceleratorFailure) -> dict:
    return {
        "kind": failure.kind,
        "code": failure.code,
        "message": failure.message[:300],
        "health_event_id": failure.health_event_id,
        "is_repeat": failure.is_repeat,
    }


@transaction.atomic
def on_accelerator_failed(failure: AcceleratorFailure) -> Ticket:
    """Open a repair ticket for the failed card, or add the signal to the card's open ticket. Returns it."""
    from ..engine import ticket_create

    key = dedup_key_for(failure.accelerator_id)
    open_ticket = Ticket.objects.select_for_update().filter(dedup_key=key, is_open=True).first()
    if open_ticket is None:
        card = Accelerator.objects.select_related("model", "node").get(pk=failure.accelerator_id)
        state = "failed" if card.health == "failed" else "needs repair"  # a drain_repair signal on a degraded card
        title = f"{card.model} {card} {state} in {card.node} slot {card.slot_index}: {failure.kind} {failure.code}"
        try:
            with transaction.atomic():  # a savepoint: losing the race must not spoil the caller's transaction
                ticket = ticket_create(
                    type_="repair",
                    title=title.strip(),
                    requester=None,
                    priority=TicketPriority.HIGH,
                    inputs={"accelerator": card},
                    description=failure.message,
                    dedup_key=key,
                )
                ticket.data["signal"] = _signal_data(failure)
                ticket.save(update_fields=["data", "updated_at"])
                timeline_add(
                    ticket=ticket,
                    kind=TimelineKind.SIGNAL,
                    message=f"Health signal: {_signal_text(failure)}",
                    data=_signal_data(failure),
                )
                if workflows_setting("REPAIR_AUTO_START"):
                    # The card is failed and its node still takes jobs: drain at once, nobody needs to click.
                    transition_apply(ticket=ticket, name="start", system=True)
                    ticket.refresh_from_db()
                return ticket
        except IntegrityError:
            logger.info("repair for card %s opened concurrently; adding the signal to it", failure.accelerator_id)
            open_ticket = Ticket.objects.get(dedup_key=key, is_open=True)
    timeline_add(
        ticket=open_ticket,
        kind=TimelineKind.SIGNAL,
        data=_signal_data(failure),
        message=f"Repeated health signal: {_signal_text(failure)}",
    )
    return open_ticket


# Nodes a workflow may be waiting on (burn-in, rollout verify, repair verify). An active node's report wakes
# nothing, so the unchanged-report fast path stays at its two queries for the fleet at large.
WATCHED_NODE_STATUSES = frozenset({"provisioning", "burn_in", "draining", "maintenance", "failed", "rma"})


def on_node_reported(sender: object, *, node: Any, status: str, **kwargs: Any) -> int:
    """`inventory_agents.signals.report_received` receiver: wake the runs waiting for this node's report
    (provisioning burn-in, repair verification of a card in it). Returns how many runs were woken."""
    if node.status not in WATCHED_NODE_STATUSES:
        return 0
    return runs_wake_for_event(node_reported_key(node.pk))
