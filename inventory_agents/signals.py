"""What ingestion tells the rest of gpuops, so other apps react to reports without inventory_agents knowing them.

- `report_applied`: a report was reconciled (digest changed, or the periodic full pass). Sent inside the
  reconciliation transaction: receivers must not touch the database there (a failed statement would poison the
  report's transaction on PostgreSQL); they defer their work with `transaction.on_commit` (the switches app
  queues a task), and a test asserts the reconciliation's query count.
  Arguments: node (the locked Node), report_id, observed (services.normalize.Observed), host_view_still_empty
  (neither this report nor the last applied one had an LLDP neighbour or an InfiniBand port).
- `report_received`: any accepted report of a node, applied or unchanged, sent after it committed. Arguments:
  node, status ("applied" | "unchanged"). It runs on the unchanged fast path, so receivers must stay cheap for
  nodes nobody waits on (check `node.status` first).
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger(__name__)

report_applied = Signal()
report_received = Signal()


def signal_send(signal: Signal, **kwargs: Any) -> None:
    """Send to every receiver; one that raises is logged and does not fail the report (or the others). Inside the
    reconciliation transaction that holds for receivers that keep to the contract above (no queries)."""
    from cmdb.models import Node

    for receiver, result in signal.send_robust(sender=Node, **kwargs):
        if isinstance(result, Exception):
            logger.error("receiver %r of an ingestion signal failed", receiver, exc_info=result)
