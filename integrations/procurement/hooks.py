"""What happens to servers once they are delivered: the seam towards the provisioning workflow.

`on_servers_delivered(node_ids, request_id=...)` runs on commit of a delivery. When a ticket type named
GPUOPS_PROCUREMENT["PROVISIONING_TICKET_TYPE"] ("provisioning") is registered with the workflow engine, it
opens one provisioning ticket per node (tickets.provisioning_ticket_open, in state `new` for a technician to
start); without that workflow it only logs, and the delivered nodes stay recorded on the procurement side
(ShipmentItem.node, status `received` in the CMDB).

The workflow is looked up when a delivery happens, not imported, so this package does not depend on it.
`register_provisioning_opener(fn)` replaces the default opener (tests, or a site-specific hand-off).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

logger = logging.getLogger(__name__)

ProvisioningOpener = Callable[[int, int], object]  # (node_id, request_id) -> the ticket
_openers: list[ProvisioningOpener] = []


def register_provisioning_opener(opener: ProvisioningOpener) -> None:
    """Use `opener(node_id, request_id)` instead of the default provisioning-ticket opener."""
    if opener not in _openers:
        _openers.append(opener)


def unregister_provisioning_opener(opener: ProvisioningOpener) -> None:
    if opener in _openers:
        _openers.remove(opener)


def _active_openers() -> list[ProvisioningOpener]:
    if _openers:
        return list(_openers)
    from .tickets import provisioning_available, provisioning_ticket_open

    return [provisioning_ticket_open] if provisioning_available() else []


def provisioning_available() -> bool:
    """Whether delivered servers get provisioning tickets now."""
    return bool(_active_openers())


def on_servers_delivered(node_ids: Sequence[int], *, request_id: int) -> int:
    """Open a provisioning ticket per delivered node when that workflow exists. Returns how many were opened.

    Runs after the delivery committed: a failure to open a ticket must not undo the receipt of the hardware,
    so errors are logged per node and the rest still get their tickets.
    """
    if not node_ids:
        return 0
    openers = _active_openers()
    if not openers:
        logger.info("request %s: %d server(s) delivered; no provisioning workflow registered, nodes stay "
                    "'received'", request_id, len(node_ids))
        return 0
    opened = 0
    for node_id in node_ids:
        for opener in openers:
            try:
                opener(node_id, request_id)
                opened += 1
            except Exception:
                logger.exception("opening a provisioning ticket for node %s failed", node_id)
    return opened


__all__ = [
    "on_servers_delivered",
    "provisioning_available",
    "register_provisioning_opener",
    "unregister_provisioning_opener",
]
