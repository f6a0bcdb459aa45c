"""The hook points of procurement: how a request's changes and deliveries reach tickets without this package
importing the workflow engine (integrations depend only on cmdb and gpuops; docs/architecture.md).

The workflows app registers the receivers at start-up (workflows/glue/procurement.py, from
WorkflowsConfig.ready); without it every hook is a no-op and requests work without tickets.

- Request changes: `request_changed_on_commit(request, open_ticket=..., note=...)` is called by every procurement
  service that changes a request; once the change committed, each `register_request_observer` receiver gets a
  `RequestChanged` (the glue opens, notes and moves the request's ticket). `requests_resync()` is the sweep's
  call to receivers registered with `register_requests_resync` (tickets whose sync failed on commit).
- Deliveries: `on_servers_delivered(node_ids, request_id=...)` runs on commit of a delivery and opens one
  provisioning ticket per node through the default opener (`provisioning_default_set`, registered by the glue,
  which opens a ticket in state `new` when the GPUOPS_PROCUREMENT["PROVISIONING_TICKET_TYPE"] type exists).
  Without one it only logs, and the delivered nodes stay recorded on the procurement side (ShipmentItem.node,
  status `received` in the CMDB). `register_provisioning_opener(fn)` replaces the default (tests, or a
  site-specific hand-off).

Receivers run after the procurement change committed: a failure there is logged and never undoes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import transaction

if TYPE_CHECKING:
    from .models import ProcurementRequest

logger = logging.getLogger(__name__)


# --- request changes ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestChanged:
    """A procurement request changed (and committed). `open_ticket`: the change asks for the request's ticket to
    be opened if it has none (submit); `note`: a line for the ticket's timeline (a vote, a PO, a delivery)."""

    request_id: int
    open_ticket: bool = False
    note: str = ""


RequestObserver = Callable[[RequestChanged], None]
_observers: list[RequestObserver] = []
_resyncs: list[Callable[[], int]] = []


def register_request_observer(observer: RequestObserver) -> None:
    if observer not in _observers:
        _observers.append(observer)


def unregister_request_observer(observer: RequestObserver) -> None:
    if observer in _observers:
        _observers.remove(observer)


def register_requests_resync(resync: Callable[[], int]) -> None:
    """`resync()` brings every lagging ticket back in line with its request and returns how many moved."""
    if resync not in _resyncs:
        _resyncs.append(resync)


def unregister_requests_resync(resync: Callable[[], int]) -> None:
    if resync in _resyncs:
        _resyncs.remove(resync)


def _safely(what: str, fn: Callable[[], object]) -> object:
    try:
        return fn()
    except Exception:
        # Never undo the procurement change that already committed; the sweep re-syncs.
        logger.exception("procurement hook %s failed", what)
        return None


def request_changed_on_commit(request: ProcurementRequest, *, open_ticket: bool = False, note: str = "") -> None:
    """After the surrounding transaction commits, tell every observer that `request` changed."""
    if not _observers:
        return
    change = RequestChanged(request_id=request.pk, open_ticket=open_ticket, note=note)

    def run() -> None:
        for observer in list(_observers):
            _safely(f"{observer!r}", lambda observer=observer: observer(change))

    transaction.on_commit(run)


def requests_resync() -> int:
    """The sweep's call: every registered resync, summed (0 without tickets)."""
    return sum(int(_safely("resync", resync) or 0) for resync in list(_resyncs))


# --- deliveries ---------------------------------------------------------------------------------------------------

ProvisioningOpener = Callable[[int, int], object]  # (node_id, request_id) -> the ticket
_openers: list[ProvisioningOpener] = []
_default: tuple[ProvisioningOpener, Callable[[], bool]] | None = None


def register_provisioning_opener(opener: ProvisioningOpener) -> None:
    """Use `opener(node_id, request_id)` instead of the default provisioning-ticket opener."""
    if opener not in _openers:
        _openers.append(opener)


def unregister_provisioning_opener(opener: ProvisioningOpener) -> None:
    if opener in _openers:
        _openers.remove(opener)


def provisioning_default_set(
    opener: ProvisioningOpener | None, *, available: Callable[[], bool] = lambda: True
) -> None:
    """The opener used when none is registered, and whether it can open tickets now (its ticket type exists)."""
    global _default
    _default = None if opener is None else (opener, available)


def _active_openers() -> list[ProvisioningOpener]:
    if _openers:
        return list(_openers)
    if _default is not None and _default[1]():
        return [_default[0]]
    return []


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
        logger.info(
            "request %s: %d server(s) delivered; no provisioning workflow registered, nodes stay 'received'",
            request_id,
            len(node_ids),
        )
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
    "RequestChanged",
    "on_servers_delivered",
    "provisioning_available",
    "provisioning_default_set",
    "register_provisioning_opener",
    "register_request_observer",
    "register_requests_resync",
    "request_changed_on_commit",
    "requests_resync",
    "unregister_provisioning_opener",
    "unregister_request_observer",
    "unregister_requests_resync",
]
