"""Celery tasks of the rollouts app. Thin: load by id, call the runner or a service.

Names start with `workflows.` so the project's routing sends them to the `workflows` queue (a flood of agent
reports on `ingest` cannot starve a rollout). Arguments are ids only.
"""

from __future__ import annotations

from celery import shared_task

from gpuops.tasks import BaseTask


@shared_task(base=BaseTask, name="workflows.rollouts.node_step", autoretry_for=(), max_retries=0)
def node_step_task(step_id: str) -> str:
    """Run one attempt of rollout node step `step_id` (== this task's id). Idempotent: the step is claimed by
    compare-and-set, so a redelivered message does nothing. Transient errors are retried by the runner (the
    step waits with backoff), not by Celery, so every retry goes through the same claim."""
    from .runner import node_step_execute

    return node_step_execute(step_id)


@shared_task(base=BaseTask, name="workflows.rollouts.advance", autoretry_for=(), max_retries=0)
def rollout_advance_task(rollout_id: int) -> str:
    """Move rollout `rollout_id` along (start nodes, pause on a blown budget, finish waves). Idempotent."""
    from .services import rollout_advance

    return rollout_advance(rollout_id)


@shared_task(base=BaseTask, name="workflows.rollouts.wake_due")
def wake_due_task() -> dict[str, int]:
    """Beat: publish due node and provisioning steps, requeue lost ones, and advance active rollouts."""
    from .provisioning.runner import provisioning_steps_sweep
    from .runner import node_steps_sweep
    from .services import rollouts_advance_active

    counts = node_steps_sweep()
    counts["provisioning"] = sum(provisioning_steps_sweep().values())
    counts["rollouts"] = rollouts_advance_active()
    return counts


@shared_task(base=BaseTask, name="workflows.rollouts.provisioning_step", autoretry_for=(), max_retries=0)
def provisioning_step_task(step_id: str) -> str:
    """Run one attempt of provisioning step `step_id` (== this task's id). Same claim rules as node steps."""
    from .provisioning.runner import provisioning_step_execute

    return provisioning_step_execute(step_id)
