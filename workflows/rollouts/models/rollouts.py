"""Driver rollouts: the plan (waves of nodes), each node's run through drain -> install -> reboot -> verify ->
resume, the step records whose ids are Celery task ids, and the per-node log."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class RolloutStatus(models.TextChoices):
    PREPARING = "preparing", "Preparing the plan"
    PLANNED = "planned", "Planned"
    RUNNING = "running", "Running"
    PAUSED = "paused", "Paused"
    ABORTING = "aborting", "Aborting (waiting for nodes in flight)"
    ABORTED = "aborted", "Aborted"
    COMPLETED = "completed", "Completed"
    ROLLING_BACK = "rolling_back", "Rolling back all"
    ROLLED_BACK = "rolled_back", "Rolled back"
    CANCELLED = "cancelled", "Cancelled before start"


# Statuses in which the rollout holds its node locks (a preparing rollout has taken none yet).
LOCKING_STATUSES = (
    RolloutStatus.PLANNED,
    RolloutStatus.RUNNING,
    RolloutStatus.PAUSED,
    RolloutStatus.ABORTING,
    RolloutStatus.ROLLING_BACK,
)
FINAL_STATUSES = (RolloutStatus.ABORTED, RolloutStatus.COMPLETED, RolloutStatus.ROLLED_BACK, RolloutStatus.CANCELLED)


class Rollout(models.Model):
    """One driver rollout: a package, the nodes it was planned for, and how far it got.

    Written only by `workflows.rollouts.services` (status) and the node runner (progress). A new rollout is
    `preparing`: its inputs are saved, its waves, node runs and node locks not yet (rollout_prepare writes them
    outside the request that created it). `plan` keeps what the approver saw: refused nodes with reasons, skipped
    nodes, the per-cluster limits and the options; empty while preparing.
    `correlation_id` is the ticket's when the rollout belongs to one, so every CMDB change it makes carries it.
    """

    ticket = models.OneToOneField(
        "workflows.Ticket", null=True, blank=True, on_delete=models.SET_NULL, related_name="rollout"
    )
    # PROTECT: a package that was rolled out somewhere is history; deleting it would orphan the rollback command.
    package = models.ForeignKey("cmdb.DriverPackage", on_delete=models.PROTECT, related_name="rollouts")
    component = models.CharField(max_length=32)
    target_version = models.CharField(max_length=64)
    selector = models.JSONField(default=dict, help_text="How nodes were selected (cluster, site, model, tags, list).")
    options = models.JSONField(default=dict, help_text="Wave sizes, limits, failure budgets, timeouts.")
    plan = models.JSONField(default=dict, help_text="Refused and skipped nodes with reasons; limits used.")
    status = models.CharField(
        max_length=16, choices=RolloutStatus.choices, default=RolloutStatus.PREPARING, db_index=True
    )
    paused_reason = models.CharField(max_length=500, blank=True)
    correlation_id = models.CharField(max_length=64, db_index=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.label}: {self.component} {self.target_version} ({self.status})"

    @property
    def label(self) -> str:
        """What people call it: the ticket reference when there is one."""
        return self.ticket.reference if self.ticket_id and self.ticket else f"rollout #{self.pk}"

    @property
    def lock_key(self) -> str:
        return f"rollout:{self.pk}"


class WaveKind(models.TextChoices):
    CANARY = "canary", "Canary"
    WAVE = "wave", "Wave"
    REVERT = "revert", "Roll back all"


class WaveStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    CANCELLED = "cancelled", "Cancelled"


class RolloutWave(models.Model):
    """A group of nodes drained at once. Waves run in `index` order; a wave starts when the previous one is done.

    `failure_allowance` starts at the planned budget; an operator resuming a rollout paused by this wave's
    failures raises it to the failures seen so far (they were looked at), so only new failures pause again.
    """

    rollout = models.ForeignKey(Rollout, on_delete=models.CASCADE, related_name="waves")
    index = models.PositiveIntegerField()
    kind = models.CharField(max_length=8, choices=WaveKind.choices)
    status = models.CharField(max_length=12, choices=WaveStatus.choices, default=WaveStatus.PENDING)
    failure_budget = models.PositiveIntegerField(default=0)
    failure_allowance = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["rollout_id", "index"]
        constraints = [models.UniqueConstraint(fields=["rollout", "index"], name="rolloutwave_unique_index")]

    def __str__(self) -> str:
        return f"{self.kind} {self.index} ({self.status})"


class NodeRunAction(models.TextChoices):
    UPGRADE = "upgrade", "Install target"
    REVERT = "revert", "Roll back to previous"


class NodeRunState(models.TextChoices):
    PENDING = "pending", "Pending"
    DRAINING = "draining", "Draining"
    INSTALLING = "installing", "Installing"
    REBOOTING = "rebooting", "Rebooting"
    VERIFYING = "verifying", "Verifying"
    RESUMING = "resuming", "Resuming"
    ROLLING_BACK = "rolling_back", "Rolling back"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed (rolled back, left drained)"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL_NODE_STATES = (NodeRunState.SUCCEEDED, NodeRunState.FAILED, NodeRunState.CANCELLED)
IN_FLIGHT_NODE_STATES = (
    NodeRunState.DRAINING,
    NodeRunState.INSTALLING,
    NodeRunState.REBOOTING,
    NodeRunState.VERIFYING,
    NodeRunState.RESUMING,
    NodeRunState.ROLLING_BACK,
)


class NodeRun(models.Model):
    """One node's pass through the pipeline in one wave: install `target_version` (upgrade) or go back to it
    (revert, for "roll back all"). `previous_version` is what the node had when the run started, the version a
    failed run rolls back to. `expected_serials` are the cards the node had when it was drained; verification
    wants every one of them back, healthy, in a fresh agent report.
    """

    rollout = models.ForeignKey(Rollout, on_delete=models.CASCADE, related_name="node_runs")
    wave = models.ForeignKey(RolloutWave, on_delete=models.CASCADE, related_name="node_runs")
    # SET_NULL + hostname: the history of a rollout outlives a node deleted after decommissioning.
    node = models.ForeignKey("cmdb.Node", null=True, on_delete=models.SET_NULL, related_name="+")
    hostname = models.CharField(max_length=253)
    action = models.CharField(max_length=8, choices=NodeRunAction.choices, default=NodeRunAction.UPGRADE)
    position = models.PositiveIntegerField(default=0, help_text="Order within the wave.")
    previous_version = models.CharField(max_length=64)
    target_version = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=NodeRunState.choices, default=NodeRunState.PENDING, db_index=True)
    status_before = models.CharField(max_length=16, blank=True, help_text="Node status when drained; restored.")
    expected_serials = models.JSONField(default=list, blank=True)
    verify_since = models.DateTimeField(
        null=True, blank=True, help_text="Agent reports older than this do not count as verification."
    )
    is_flagged = models.BooleanField(default=False, help_text="Failed: needs a person (left drained, cordoned).")
    is_dry_run = models.BooleanField(default=False, help_text="The executor only logged its commands.")
    error = models.TextField(blank=True)
    reverts = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="For a revert: the upgrade run it undoes.",
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["wave__index", "position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["rollout", "node", "action"], condition=Q(node__isnull=False), name="noderun_once_per_action"
            ),
        ]
        indexes = [models.Index(fields=["rollout", "state"]), models.Index(fields=["wave", "state"])]

    def __str__(self) -> str:
        return f"{self.hostname} {self.action} -> {self.target_version} ({self.state})"

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_NODE_STATES


class NodeStepStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    WAITING = "waiting", "Waiting"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class NodeStep(models.Model):
    """One step (drain, install, reboot, verify, resume, rollback) of one node run.

    Its primary key is the Celery task id: the row is written in the transaction that decides to run the step,
    the message is published on commit, and every later message for the step (a poll, a retry after a
    transient error, a requeue by the beat task) reuses the id. A worker claims the step by compare-and-set on
    `status` (pending, or waiting and due -> running); a duplicate message finds it claimed and exits.
    `state` is the step's memory (deadlines, which external calls are done) across polls and retries.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    node_run = models.ForeignKey(NodeRun, on_delete=models.CASCADE, related_name="steps")
    name = models.CharField(max_length=16)
    status = models.CharField(
        max_length=12, choices=NodeStepStatus.choices, default=NodeStepStatus.PENDING, db_index=True
    )
    attempts = models.PositiveIntegerField(default=0)
    wake_at = models.DateTimeField(null=True, blank=True, db_index=True)
    state = models.JSONField(default=dict, blank=True)
    message = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True, help_text="When the current attempt started.")
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [models.UniqueConstraint(fields=["node_run", "name"], name="nodestep_once_per_run")]
        indexes = [models.Index(fields=["status", "wake_at"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"


class NodeLogLine(models.Model):
    """A log line of a node run. Written after each step attempt, outside the step's transactions, so the lines
    describing work that was rolled back are kept (what the operator needs to see a failure)."""

    node_run = models.ForeignKey(NodeRun, on_delete=models.CASCADE, related_name="log_lines")
    step = models.CharField(max_length=16, blank=True)
    at = models.DateTimeField()
    level = models.CharField(max_length=8, default="info")
    message = models.TextField()

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S} {self.step} {self.level} {self.message[:80]}"
