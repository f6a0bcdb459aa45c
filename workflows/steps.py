"""What an automated step sees (StepContext) and what it returns (an outcome).

Outcomes (style-anchors 9.5):
- `Done(transition=...)`: the step finished; the engine takes the named system transition, if any.
- `WaitForEvent(key, recheck_in)`: not yet (no spare in stock, the agent has not reported the new card); the
  run parks in status `waiting` until `recheck_in` has passed (the beat task `workflows.wake_due_runs` requeues
  it) or someone signals `key` (`workflows.runner.runs_wake_for_event`). An optional `transition` moves the
  ticket into a visible waiting state the first time.
- `RetryLater(countdown)`: a WaitForEvent on no particular event.
- `Failed(reason)`: give up; the operator sees the reason and may retry the step or cancel the ticket.
Raising `TransientError` retries the attempt with backoff; any other exception fails the run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import IntegrityError, transaction
from django.utils import timezone

from .models import StepEffect, StepLogLine, StepRun

if TYPE_CHECKING:
    from cmdb.models import Accelerator, Node

    from .models import Ticket

T = TypeVar("T")


@dataclass(frozen=True)
class Done:
    transition: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    message: str = ""


def node_reported_key(node_id: int) -> str:
    """The event a step waiting for a node's next agent report waits on; ingestion signals it
    (workflows.services.health.on_node_reported)."""
    return f"node:{node_id}:reported"


@dataclass(frozen=True)
class WaitForEvent:
    key: str
    recheck_in: dt.timedelta
    message: str = ""
    transition: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


def RetryLater(countdown: dt.timedelta, message: str = "") -> WaitForEvent:
    """Run the step again after `countdown`, waiting on no particular event."""
    return WaitForEvent(key="", recheck_in=countdown, message=message)


@dataclass(frozen=True)
class Failed:
    reason: str
    transition: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


StepOutcome = Done | WaitForEvent | Failed


class StepContext:
    """The run, its ticket and the tools a step uses. Built by workflows.runner for one attempt.

    `state` is the step's memory across attempts and waits (saved with the outcome); `ticket.data` is the
    workflow's shared data (read it here, return changes in the outcome's `data`).
    """

    def __init__(self, *, run: StepRun, ticket: Ticket, now: dt.datetime | None = None) -> None:
        self.run = run
        self.ticket = ticket
        self.now = now or timezone.now()
        self.state: dict[str, Any] = dict(run.state or {})
        self._log_buffer: list[StepLogLine] = []

    # --- logging ----------------------------------------------------------------------------------------------

    def log(self, message: str, level: str = "info") -> None:
        """A log line for this run. Buffered and written after each effect and at the end of the attempt, never
        inside an effect's transaction, so lines describing a rolled-back effect are kept."""
        self._log_buffer.append(StepLogLine(run=self.run, at=timezone.now(), level=level, message=message[:1000]))

    def flush_log(self) -> None:
        if self._log_buffer:
            StepLogLine.objects.bulk_create(list(self._log_buffer))
            self._log_buffer.clear()  # in place: a view of this context (a node's, in cabling) shares the list

    # --- side effects, each performed at most once per run sequence ------------------------------------------

    def _key(self, name: str) -> str:
        return f"{self.run.effect_prefix}:{name}"

    def has_effect(self, name: str) -> bool:
        return StepEffect.objects.filter(key=self._key(name)).exists()

    def effect(self, name: str, fn: Callable[[], T]) -> T:
        """Perform a database side effect once: `fn` (a CMDB service call) and its checkpoint row commit
        together, so after a crash either both exist or neither does. Returns `fn`'s JSON result, or the
        stored one when the effect was already performed."""
        key = self._key(name)
        with transaction.atomic():
            done = StepEffect.objects.filter(key=key).first()
            if done is not None:
                self.log(f"{name}: already done, not repeated")
                result: Any = done.result
            else:
                result = fn()
                StepEffect.objects.create(
                    key=key, ticket_id=self.run.ticket_id, run=self.run, name=name, result=result, at=timezone.now()
                )
                self.log(f"{name}: done")
        self.flush_log()
        return result

    def external(self, name: str, fn: Callable[[], T]) -> T:
        """Perform an external call (scheduler, notifier) once. The checkpoint is written after the call
        returns, outside any transaction: no database lock is held while a remote command runs. A worker
        lost between the call and the checkpoint repeats the call, so adapters keep their calls idempotent
        (draining a drained node is a no-op)."""
        key = self._key(name)
        done = StepEffect.objects.filter(key=key).first()
        if done is not None:
            self.log(f"{name}: already done, not repeated")
            self.flush_log()
            return done.result  # type: ignore[return-value]
        result = fn()
        try:
            with transaction.atomic():
                StepEffect.objects.create(
                    key=key, ticket_id=self.run.ticket_id, run=self.run, name=name, result=result, at=timezone.now()
                )
        except IntegrityError:
            pass  # a requeued twin recorded it first; the call is idempotent by contract
        self.log(f"{name}: done")
        self.flush_log()
        return result

    # --- helpers ---------------------------------------------------------------------------------------------

    def deadline(self, name: str, after: dt.timedelta) -> dt.datetime:
        """A deadline remembered across attempts: set `after` from the first call, then fixed."""
        key = f"deadline:{name}"
        if key not in self.state:
            self.state[key] = (self.now + after).isoformat()
        return dt.datetime.fromisoformat(self.state[key])

    def subject_node(self) -> Node | None:
        """The ticket's subject node (locked neither here nor in the services that change it later)."""
        from cmdb.models import Node

        link = self.ticket.links.filter(role="subject", node__isnull=False).first()
        return Node.objects.select_related("cluster", "site").get(pk=link.node_id) if link else None

    def subject_accelerator(self) -> Accelerator | None:
        from cmdb.models import Accelerator

        link = self.ticket.links.filter(role="subject", accelerator__isnull=False).first()
        return Accelerator.objects.select_related("model", "node").get(pk=link.accelerator_id) if link else None


__all__ = ["Done", "Failed", "RetryLater", "StepContext", "StepOutcome", "WaitForEvent"]
