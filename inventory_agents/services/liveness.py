"""When did an agent last confirm a card?

`Accelerator.last_seen_at` moves only when a report is reconciled. An unchanged re-report (same digest) takes the
cheap path and refreshes `Node.last_seen_at` alone, yet it confirms every card the last reconciliation saw on that
node. Workflows that wait for "a report since T" (burn-in, rollout and repair verification) ask here, so they are
satisfied by the next report whichever path it took, not by the next periodic full pass an hour later.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from cmdb.models import Accelerator, AcceleratorLifecycle, Node

from ..models import AgentState


def cards_last_seen(node: Node, cards: Iterable[Accelerator]) -> dict[int, dt.datetime | None]:
    """card pk -> when the node's agent last confirmed it (one query for the node's ingest state)."""
    state = AgentState.objects.filter(node_id=node.pk).only("last_full_at").first()
    last_full = state.last_full_at if state else None
    seen: dict[int, dt.datetime | None] = {}
    for card in cards:
        confirmed = (
            last_full is not None
            and card.node_id == node.pk
            and not card.is_missing
            and card.lifecycle == AcceleratorLifecycle.INSTALLED
            and card.last_seen_at is not None
            and card.last_seen_at >= last_full
        )
        # Seen in the last reconciliation: every report since (node.last_seen_at) saw the same inventory.
        seen[card.pk] = (
            max(card.last_seen_at, node.last_seen_at or card.last_seen_at) if confirmed else card.last_seen_at
        )
    return seen
