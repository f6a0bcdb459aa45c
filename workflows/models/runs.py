"""Execution records: transitions taken, automated step runs, their log lines and their side effects."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from .tickets import Ticket


class TransitionLog(models.Model):
    """An audit row per transition taken (Ralph's TransitionsHistory). `idempotency_key` (from the API's
    Idempotency-Key header or a step run) makes a repeated request return the earlier result."""

    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="transition_logs")
    name = models.CharField(max_length=64)
    source = models.CharField(max_length=32)
    target = models.CharField(max_length=32)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    data = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField()
    idempotency_key = models.CharField(max_length=128, null=True, blank=True, unique=True)

    class Meta:
        ordering = ["ticket_id", "at", "id"]

    def __str__(self) -> str:
        return f"{self.name}: {self.source} -> {self.target}"


class StepStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    RETRY = "retry", "Retry scheduled"
    WAITING = "waiting", "Waiting"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


ACTIVE_STEP_STATUSES = (StepStatus.PENDING, StepStatus.RUNNING, StepStatus.RETRY, StepStatus.WAITING)


class StepRun(models.Model):
    """One run of an automated step for a ticket. Its primary key *is* the Celery task id (Nautobot's JobResult
    rule): the row is written in the transaction that decides to run the step, and the task is published only
    after that transaction commits, so a task never looks for a row that does not exist.

    Publishing after commit never fails the request: a message the broker refused or lost is re-sent by the
    beat task `workflows.republish_unsent` (an outbox keyed by `published_at`).

    A worker claims the run by compare-and-set on `status` (pending/retry, or waiting and due -> running);
    a redelivered or duplicate message finds it claimed and exits. `sequence` numbers the runs of one step on
    one ticket; with the ticket id it forms the idempotency key of the run's side effects (StepEffect), so a
    retried or resumed run never repeats an effect it already performed, while a workflow that loops back and
    starts the step again (a new sequence) does.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="runs")
    step = models.CharField(max_length=64)
    sequence = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=16, choices=StepStatus.choices, default=StepStatus.PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=5)
    time_limit_s = models.PositiveIntegerField(default=300)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Whose transition started the step (CMDB changes' actor).",
    )
    transition_log = models.ForeignKey(
        TransitionLog, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    wait_key = models.CharField(
        max_length=128, blank=True, db_index=True, help_text="The event a waiting run waits for (runs_wake_for_event)."
    )
    wake_at = models.DateTimeField(
        null=True, blank=True, db_index=True, help_text="When a waiting or retrying run is due to run again."
    )
    state = models.JSONField(default=dict, blank=True, help_text="The step's own memory between attempts.")
    error = models.TextField(blank=True)
    worker = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The outbox mark: when the task message last reached the broker. Empty while it never did (broker down
    # at commit); `runner.runs_republish_unsent` re-sends queued runs unsent, or unclaimed a minute after sending.
    published_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["ticket", "step", "sequence"], name="steprun_unique_sequence"),
        ]
        indexes = [models.Index(fields=["status", "wake_at"]), models.Index(fields=["status", "started_at"])]

    def __str__(self) -> str:
        return f"{self.step}#{self.sequence} ({self.status})"

    @property
    def effect_prefix(self) -> str:
        return f"ticket:{self.ticket_id}:step:{self.step}:{self.sequence}"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_STEP_STATUSES


class StepLogLine(models.Model):
    """A log line of a step run. Written outside the step's effect transactions, so lines survive a rollback
    of the work they describe (Nautobot's JobLogEntry)."""

    run = models.ForeignKey(StepRun, on_delete=models.CASCADE, related_name="log_lines")
    at = models.DateTimeField()
    level = models.CharField(max_length=8, default="info")
    message = models.CharField(max_length=1000)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S} {self.level} {self.message}"


class StepEffect(models.Model):
    """A side effect a step performed, keyed `ticket:<id>:step:<name>:<sequence>:<effect>`. A step asks the
    run context to perform an effect by name; if the key exists the stored result is returned and the effect
    is not performed again (Ralph's per-action checkpoint, at the granularity of one effect)."""

    key = models.CharField(max_length=200, unique=True)
    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="effects")
    run = models.ForeignKey(StepRun, null=True, on_delete=models.SET_NULL, related_name="effects")
    name = models.CharField(max_length=64)
    result = models.JSONField(null=True, blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return self.key
