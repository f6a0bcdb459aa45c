"""The engine's guarantees: retries without repeated side effects, idempotent redelivery, the reaper, pause and
resume, operator retry, permissions, idempotency keys, graph validation."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone

from cmdb import models as m
from tests.workflows.helpers import open_by_hook, take, ticket_fresh
from workflows.declarations import Field, Transition, Workflow
from workflows.engine import (
    ForbiddenError,
    NotAllowedError,
    step_retry,
    ticket_pause,
    ticket_resume,
    transition_apply,
)
from workflows.models import StepEffect, StepRun, StepStatus, TimelineKind, TransitionLog
from workflows.registry import WorkflowDefinitionError, register
from workflows.runner import runs_reap_stuck
from workflows.tasks import step_run_task

pytestmark = pytest.mark.django_db


def node_status_records(node: m.Node, status: str) -> int:
    ct = ContentType.objects.get_for_model(m.Node)
    return sum(
        1
        for r in m.ChangeRecord.objects.filter(content_type=ct, object_id=node.pk)
        if r.changes.get("status", [None, None])[1] == status
    )


def test_transient_error_twice_then_success_performs_side_effects_once(wf, fleet, groups):
    # The scheduler is unreachable for the first two attempts of the drain itself.
    wf.scheduler.fail_next["drain"] = 2
    ticket = open_by_hook(wf, fleet)
    assert ticket.state == "diagnosing"
    run = StepRun.objects.get(ticket=ticket, step="drain")
    assert run.status == StepStatus.SUCCEEDED and run.attempts == 3
    assert wf.scheduler.attempts["drain"] == 3
    assert wf.scheduler.calls["drain"] == 1
    retries = ticket.timeline.filter(kind=TimelineKind.STEP, message__contains="retrying in")
    assert retries.count() == 2
    assert node_status_records(fleet.node, "draining") == 1


def test_transient_error_after_effects_does_not_repeat_them(wf, fleet, groups):
    # Drain and CMDB update succeed; reading the node's state fails twice: the retries must skip both effects.
    wf.scheduler.fail_next["node_state"] = 2
    ticket = open_by_hook(wf, fleet)
    assert ticket.state == "diagnosing"
    assert wf.scheduler.attempts["drain"] == 1 and wf.scheduler.attempts["node_state"] == 3
    assert node_status_records(fleet.node, "draining") == 1
    assert node_status_records(fleet.node, "maintenance") == 1
    ct = ContentType.objects.get_for_model(m.Node)
    cordons = [
        r
        for r in m.ChangeRecord.objects.filter(content_type=ct, object_id=fleet.node.pk)
        if r.action == "update" and "is_cordoned" in r.changes
    ]
    assert len(cordons) == 1
    lines = list(StepRun.objects.get(ticket=ticket, step="drain").log_lines.values_list("message", flat=True))
    # Reading the jobs (and its timeline line), the scheduler drain and the CMDB drain: 4 effects x 2 retries.
    assert sum("already done, not repeated" in line for line in lines) == 8
    assert wf.scheduler.attempts["job_history"] == 1


def test_attempts_exhausted_fails_then_operator_retry_succeeds(wf, fleet, lead, settings):
    wf.scheduler.fail_next["drain"] = 5
    ticket = open_by_hook(wf, fleet)
    run = StepRun.objects.get(ticket=ticket, step="drain")
    assert run.status == StepStatus.FAILED and "gave up after 5 attempts" in run.error
    assert ticket_fresh(ticket).state == "draining"
    assert "step_failed" in wf.notifier.events()

    wf.run(step_retry, run=run, actor=lead)
    run.refresh_from_db()
    assert run.status == StepStatus.SUCCEEDED
    assert ticket_fresh(ticket).state == "diagnosing"
    assert wf.scheduler.calls["drain"] == 1


def test_redelivered_task_is_a_no_op(wf, fleet, groups):
    ticket = open_by_hook(wf, fleet)
    run = StepRun.objects.get(ticket=ticket, step="drain")
    entries = ticket.timeline.count()
    wf.run(step_run_task.apply, args=[str(run.pk)], task_id=str(run.pk))
    run.refresh_from_db()
    assert run.status == StepStatus.SUCCEEDED and run.attempts == 1
    assert ticket.timeline.count() == entries
    assert wf.scheduler.attempts["drain"] == 1


def test_step_run_id_is_the_celery_task_id_and_args_are_json(
    wf, fleet, lead, settings, django_capture_on_commit_callbacks, monkeypatch
):
    settings.GPUOPS_WORKFLOWS = {"REPAIR_AUTO_START": False}
    published = []
    monkeypatch.setattr(step_run_task, "apply_async", lambda args, task_id, **kw: published.append((args, task_id)))
    ticket = open_by_hook(wf, fleet)
    with django_capture_on_commit_callbacks(execute=True):
        transition_apply(ticket=ticket, name="start", actor=lead)
    run = StepRun.objects.get(ticket=ticket, step="drain")
    assert published == [([str(run.pk)], str(run.pk))]
    assert json.loads(json.dumps(published[0][0])) == [str(run.pk)]


def test_no_task_is_published_when_the_transaction_rolls_back(
    wf, fleet, lead, settings, django_capture_on_commit_callbacks
):
    settings.GPUOPS_WORKFLOWS = {"REPAIR_AUTO_START": False}
    ticket = open_by_hook(wf, fleet)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        transition_apply(ticket=ticket, name="start", actor=lead)
    # The run row exists inside the transaction, and its publication waits for the commit.
    assert StepRun.objects.filter(ticket=ticket, status=StepStatus.PENDING).count() == 1
    assert len(callbacks) >= 1
    assert wf.scheduler.attempts["drain"] == 0


def test_worker_lost_mid_step_is_reaped_and_resumed_without_repeating_effects(
    wf, fleet, lead, settings, django_capture_on_commit_callbacks
):
    settings.GPUOPS_WORKFLOWS = {"REPAIR_AUTO_START": False}
    ticket = open_by_hook(wf, fleet)
    with django_capture_on_commit_callbacks(execute=False):
        transition_apply(ticket=ticket, name="start", actor=lead)  # task never delivered
    run = StepRun.objects.get(ticket=ticket, step="drain")
    # A worker claimed it, performed the scheduler drain, and died (SIGKILL) before finishing.
    long_ago = timezone.now() - dt.timedelta(hours=1)
    StepRun.objects.filter(pk=run.pk).update(status=StepStatus.RUNNING, attempts=1, started_at=long_ago)
    StepEffect.objects.create(
        key=f"{run.effect_prefix}:scheduler_drain",
        ticket=ticket,
        run=run,
        name="scheduler_drain",
        result=None,
        at=long_ago,
    )
    from integrations.schedulers import SchedulerNode

    wf.scheduler.drain(SchedulerNode(name=fleet.node.hostname), reason="REP-1: before the crash")
    wf.scheduler.attempts.clear()
    # A redelivery of the message finds the run claimed and leaves it.
    wf.run(step_run_task.apply, args=[str(run.pk)], task_id=str(run.pk))
    assert StepRun.objects.get(pk=run.pk).status == StepStatus.RUNNING

    reaped = wf.run(runs_reap_stuck)
    assert reaped == 1
    run.refresh_from_db()
    assert run.status == StepStatus.SUCCEEDED and run.attempts == 2
    assert wf.scheduler.attempts["drain"] == 0  # performed before the crash, not again
    assert ticket_fresh(ticket).state == "diagnosing"
    assert ticket.timeline.filter(message__contains="stuck running").exists()


def test_reaper_fails_a_lost_run_without_attempts_left(wf, fleet, lead, settings, django_capture_on_commit_callbacks):
    settings.GPUOPS_WORKFLOWS = {"REPAIR_AUTO_START": False}
    ticket = open_by_hook(wf, fleet)
    with django_capture_on_commit_callbacks(execute=False):
        transition_apply(ticket=ticket, name="start", actor=lead)
    run = StepRun.objects.get(ticket=ticket, step="drain")
    StepRun.objects.filter(pk=run.pk).update(
        status=StepStatus.RUNNING, attempts=run.max_attempts, started_at=timezone.now() - dt.timedelta(hours=2)
    )
    wf.run(runs_reap_stuck)
    run.refresh_from_db()
    assert run.status == StepStatus.FAILED and "worker lost" in run.error


def test_reaper_leaves_a_run_within_its_time_limit(wf, fleet, lead, settings, django_capture_on_commit_callbacks):
    settings.GPUOPS_WORKFLOWS = {"REPAIR_AUTO_START": False}
    ticket = open_by_hook(wf, fleet)
    with django_capture_on_commit_callbacks(execute=False):
        transition_apply(ticket=ticket, name="start", actor=lead)
    run = StepRun.objects.get(ticket=ticket, step="drain")
    StepRun.objects.filter(pk=run.pk).update(
        status=StepStatus.RUNNING, attempts=1, started_at=timezone.now() - dt.timedelta(seconds=30)
    )
    assert wf.run(runs_reap_stuck) == 0
    assert StepRun.objects.get(pk=run.pk).status == StepStatus.RUNNING


def test_pause_holds_queued_steps_and_resume_runs_them(
    wf, fleet, lead, tech, settings, django_capture_on_commit_callbacks
):
    settings.GPUOPS_WORKFLOWS = {"REPAIR_AUTO_START": False}
    ticket = open_by_hook(wf, fleet)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        transition_apply(ticket=ticket, name="start", actor=tech)
        ticket_pause(ticket=ticket, actor=lead, reason="change freeze")
    with django_capture_on_commit_callbacks(execute=True):
        for callback in queued:
            callback()  # the task arrives while paused: it leaves the run queued
    run = StepRun.objects.get(ticket=ticket, step="drain")
    assert run.status == StepStatus.PENDING and wf.scheduler.attempts["drain"] == 0
    with pytest.raises(NotAllowedError, match="paused"):
        transition_apply(ticket=ticket_fresh(ticket), name="diagnose_replace", actor=tech)

    wf.run(ticket_resume, ticket=ticket, actor=lead)
    assert StepRun.objects.get(pk=run.pk).status == StepStatus.SUCCEEDED
    assert ticket_fresh(ticket).state == "diagnosing"
    messages = list(ticket.timeline.filter(kind=TimelineKind.OPERATOR).values_list("message", flat=True))
    assert messages[0] == "Paused" and messages[1].startswith("Resumed")


def test_cancel_is_allowed_while_paused(wf, fleet, lead, tech):
    ticket = open_by_hook(wf, fleet)
    wf.run(ticket_pause, ticket=ticket, actor=lead)
    ticket = take(wf, ticket, "cancel", tech, cancel_reason="wrong card")
    assert ticket.state == "cancelled" and not ticket.is_paused


def test_only_operators_pause_and_retry(wf, fleet, outsider, groups):
    ticket = open_by_hook(wf, fleet)
    with pytest.raises(ForbiddenError):
        ticket_pause(ticket=ticket, actor=outsider)
    with pytest.raises(ForbiddenError):
        step_retry(run=StepRun.objects.get(ticket=ticket, step="drain"), actor=outsider)


def test_permissions_and_states_are_enforced(wf, fleet, tech, outsider, lead, settings):
    ticket = open_by_hook(wf, fleet)
    with pytest.raises(ForbiddenError, match="cannot see"):
        transition_apply(ticket=ticket, name="diagnose_replace", actor=outsider)
    with pytest.raises(NotAllowedError, match="taken by the workflow itself"):
        transition_apply(ticket=ticket, name="spare_reserved", actor=lead)
    with pytest.raises(NotAllowedError, match="'Diagnosing'; 'Confirm swap' needs 'Awaiting swap'"):
        transition_apply(ticket=ticket, name="confirm_swap", actor=tech, data={"old_serial": "a", "new_serial": "b"})
    with pytest.raises(NotAllowedError, match="no transition 'explode'"):
        transition_apply(ticket=ticket, name="explode", actor=lead)
    settings.GPUOPS_WORKFLOWS = {"VERIFY_TIMEOUT_MINUTES": 0}
    ticket = take(wf, ticket, "diagnose_reseat", tech)
    assert ticket.state == "verify_timed_out"
    # force_resume is for ops leads, not technicians.
    with pytest.raises(ForbiddenError, match=r"workflows\.repair_force_resume"):
        transition_apply(ticket=ticket, name="force_resume", actor=tech, data={"note": "trust me"})
    take(wf, ticket, "force_resume", lead, note="verified by hand with dcgmi diag -r 3")
    assert ticket_fresh(ticket).state == "closed"


def test_idempotency_key_replays_the_first_result(wf, fleet, tech):
    ticket = open_by_hook(wf, fleet)
    first = wf.run(transition_apply, ticket=ticket, name="diagnose_reseat", actor=tech, idempotency_key="k-1")
    again = wf.run(
        transition_apply, ticket=ticket_fresh(ticket), name="diagnose_reseat", actor=tech, idempotency_key="k-1"
    )
    assert again.replayed and again.log.pk == first.log.pk
    assert TransitionLog.objects.filter(ticket=ticket, name="diagnose_reseat").count() == 1


def test_inputs_are_validated_with_field_errors(wf, fleet, tech):
    from workflows.engine import GuardError

    fleet.spare()
    ticket = open_by_hook(wf, fleet)
    ticket = take(wf, ticket, "diagnose_replace", tech)
    with pytest.raises(GuardError) as err:
        transition_apply(ticket=ticket, name="confirm_swap", actor=tech, data={"old_serial": "  "})
    assert set(err.value.field_errors) == {"old_serial", "new_serial"}


def test_registry_rejects_an_unsound_graph():
    from django.db import models

    class States(models.TextChoices):
        A = "a", "A"
        B = "b", "B"
        C = "c", "C"
        Z = "z", "Z"

    broken = Workflow(
        type="broken",
        label="Broken",
        prefix="BRK",
        states=States,
        initial="a",
        terminal=frozenset({"z"}),
        transitions=(
            Transition("go", "Go", frozenset({"a"}), "b", "broken_go", step="missing"),
            Transition("go", "Go again", frozenset({"b"}), "nowhere", "broken_go"),
            Transition("back", "Back", frozenset({"z"}), "a", None, fields=(Field("x", "X"),)),
        ),
    )
    with pytest.raises(WorkflowDefinitionError) as err:
        register(broken)
    text = str(err.value)
    for problem in (
        "step 'missing' is not declared",
        "transition 'go' is declared twice",
        "target 'nowhere' is not a state",
        "leaves terminal state",
        "state 'c' cannot be reached",
        "state 'c' has no way out",
    ):
        assert problem in text


def test_starting_on_create_needs_the_start_permission(wf, fleet, groups):
    from django.contrib.auth.models import Permission

    from tests.factories.cmdb import UserFactory
    from workflows.engine import ticket_create

    clerk = UserFactory(username="clerk")
    clerk.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["add_ticket", "view_accelerator", "change_accelerator", "view_node", "change_node"]
        )
    )
    with pytest.raises(ForbiddenError, match=r"workflows\.repair_start"):
        ticket_create(
            type_="repair", title="x", requester=clerk, inputs={"accelerator": fleet.failed.serial}, start=True
        )
    ticket = wf.run(
        ticket_create, type_="repair", title="x", requester=clerk, inputs={"accelerator": fleet.failed.serial}
    )
    assert ticket.state == "new" and wf.scheduler.attempts["drain"] == 0
