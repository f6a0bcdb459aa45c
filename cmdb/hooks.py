"""Hooks: how the CMDB (and agent ingestion) tells other apps that something happened, without importing them.

The workflows app registers its receivers in its AppConfig.ready(); cmdb and inventory_agents only call
`accelerator_failed(...)`. Receivers run inside the caller's transaction and must only register on-commit
work (e.g. open a ticket and enqueue its first step on commit), never block.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AcceleratorFailure:
    """A card was marked failed by a severe health signal, or a signal graded 'drain and repair' left it degraded
    (a topology departure): either way it needs a repair case."""

    accelerator_id: int
    node_id: int | None
    health_event_id: int | None
    kind: str  # e.g. "xid", "ecc_uncorrectable", "vendor_health", "missing"
    code: str
    message: str
    # True when the event was already open (a repeat): receivers add to the existing case, open none.
    is_repeat: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


AcceleratorFailedHook = Callable[[AcceleratorFailure], None]
_accelerator_failed: list[AcceleratorFailedHook] = []


def register_accelerator_failed(receiver: AcceleratorFailedHook) -> None:
    if receiver not in _accelerator_failed:
        _accelerator_failed.append(receiver)


def unregister_accelerator_failed(receiver: AcceleratorFailedHook) -> None:
    if receiver in _accelerator_failed:
        _accelerator_failed.remove(receiver)


def accelerator_failed(failure: AcceleratorFailure) -> None:
    """Call every registered receiver. A receiver's error propagates: the caller's transaction rolls back, so
    a failed card is never recorded without its repair case."""
    for receiver in list(_accelerator_failed):
        receiver(failure)


# --- schedulability --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SchedulabilityChange:
    """A node was cordoned (`cordoned=True`, with the reason) or uncordoned; sent after the change commits."""

    node_id: int
    cordoned: bool
    reason: str = ""


SchedulabilityHook = Callable[[SchedulabilityChange], None]
_schedulability_changed: list[SchedulabilityHook] = []


def register_schedulability_changed(receiver: SchedulabilityHook) -> None:
    """The scheduler glue (registered by workflows) drains / resumes the node in its scheduler."""
    if receiver not in _schedulability_changed:
        _schedulability_changed.append(receiver)


def unregister_schedulability_changed(receiver: SchedulabilityHook) -> None:
    if receiver in _schedulability_changed:
        _schedulability_changed.remove(receiver)


def schedulability_changed(change: SchedulabilityChange) -> None:
    """Call every receiver (after commit). A receiver's error is logged, not raised: the CMDB change stands and
    the scheduler catches up on the next cordon/uncordon or reconciliation."""
    for receiver in list(_schedulability_changed):
        try:
            receiver(change)
        except Exception:
            logger.exception("scheduler update for node %s failed", change.node_id)


# --- change records ------------------------------------------------------------------------------------------

ChangesCommittedHook = Callable[[], None]
_changes_committed: list[ChangesCommittedHook] = []


def register_changes_committed(receiver: ChangesCommittedHook) -> None:
    """Outbound webhooks (registered by integrations) fan the new change records out after they commit."""
    if receiver not in _changes_committed:
        _changes_committed.append(receiver)


def unregister_changes_committed(receiver: ChangesCommittedHook) -> None:
    if receiver in _changes_committed:
        _changes_committed.remove(receiver)


def _changes_committed_fire() -> None:
    for receiver in list(_changes_committed):
        try:
            receiver()
        except Exception:
            logger.exception("change records: receiver %r failed", receiver)


_pending = threading.local()  # this thread's fire callback still waiting for its transaction to commit


def changes_recorded() -> None:
    """Called by the change log whenever it writes records: receivers are told once per transaction, after it
    commits (never for a rollback). They read the records from the change feed, so nothing is passed. A
    receiver's error is logged: the change stands and the receiver's own sweep catches up."""
    if not _changes_committed:
        return
    connection = transaction.get_connection()
    waiting = getattr(_pending, "fire", None)
    # Already queued for this transaction (and not discarded by a rolled-back savepoint): once is enough.
    if connection.in_atomic_block and waiting is not None and any(f is waiting for _, f, _ in connection.run_on_commit):
        return

    def fire() -> None:
        if getattr(_pending, "fire", None) is fire:
            _pending.fire = None
        _changes_committed_fire()

    if connection.in_atomic_block:
        _pending.fire = fire
    transaction.on_commit(fire)
