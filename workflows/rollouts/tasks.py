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


@shared_task(base=BaseTask, name="workflows.rollouts.prepare", autoretry_for=(), max_retries=0)
def rollout_prepare_task(rollout_id: int) -> str:
    """Write the plan of preparing rollout `rollout_id` (waves, node runs, node locks) in one transaction.
    Idempotent: a rollout already prepared or cancelled is left alone. Used for rollouts without a ticket; a
    ticket prepares its rollout in its own step."""
    from .services import rollout_prepare

    return rollout_prepare(rollout=rollout_id).status


@shared_task(base=BaseTask, name="workflows.rollouts.advance", autoretry_for=(), max_retries=0)
def rollout_advance_task(rollout_id: int) -> str:
    """Move rollout `rollout_id` along (start nodes, pause on a blown budget, finish waves). Idempotent."""
    from .services import rollout_advance

    return rollout_advance(rollout_id)


@shared_task(base=BaseTask, name="workflows.rollouts.wake_due")
def wake_due_task() -> dict[str, int]:
    """Beat: publish due node steps, requeue lost ones, advance active rollouts (a lost advance message must not
    stall a rollout between waves) and republish lost preparations. Provisioning steps and the rollout tickets'
    prepare steps are ticket steps: the workflows app's sweeps cover them."""
    from .runner import node_steps_sweep
    from .services import rollouts_advance_active, rollouts_prepare_stalled

    counts = node_steps_sweep()
    counts["rollouts"] = rollouts_advance_active()
    counts["preparing"] = rollouts_prepare_stalled()
    return counts
