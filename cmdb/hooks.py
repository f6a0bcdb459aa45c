"""Hooks: how the CMDB (and agent ingestion) tells other apps that something happened, without importing them.

The workflows app registers its receivers in its AppConfig.ready(); cmdb and inventory_agents only call
`accelerator_failed(...)`. Receivers run inside the caller's transaction and must only register on-commit
work (e.g. open a ticket and enqueue its first step on commit), never block.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AcceleratorFailure:
    """A card was marked failed by a severe health signal."""

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
