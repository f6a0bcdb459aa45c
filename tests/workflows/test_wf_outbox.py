"""Ticket writes that survive a flaky broker and client retries: the outbox sweep (StepRun.published_at,
NotificationOutbox) and the Idempotency-Key on ticket creation and comments.

The broker is taken down at the edge: the Celery app's `amqp.send_task_message` raises kombu's
OperationalError, which is what publishing to an unreachable Redis raises once kombu's retries are spent.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator

import pytest
from django.utils import timezone
from kombu.exceptions import OperationalError
from rest_framework.test import APIClient

from tests.workflows.helpers import open_by_hook, ticket_fresh
from workflows.engine import ticket_pause, transition_apply
from workflows.models import NotificationOutbox, StepRun, StepStatus, Ticket, TimelineEntry
from workflows.runner import runs_republish_unsent
from workflows.services.notifications import notifications_flush
from workflows.tasks import step_run_task

pytestmark = pytest.mark.django_db

TICKETS = "/api/workflows/tickets/"


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@contextlib.contextmanager
def broker_down(settings, monkeypatch) -> Iterator[list[str]]:
    """Publish for real (not eagerly) to a broker that refuses every message; yields the refused task names."""
    from gpuops.celery import app

    refused: list[str] = []

    def refuse(producer, name, message, **options):
        refused.append(name)
        raise OperationalError("Error 111 connecting to 127.0.0.1:1. Connection refused.")

    eager = settings.CELERY_TASK_ALWAYS_EAGER
    settings.CELERY_TASK_ALWAYS_EAGER = False
    with monkeypatch.context() as patch:
        patch.setitem(app.conf, "task_always_eager", False)
        patch.setattr(app.amqp, "send_task_message", refuse)
        yield refused
    settings.CELERY_TASK_ALWAYS_EAGER = eager


def later(seconds: float = 15) -> dt.datetime:
    return timezone.now() + dt.timedelta(seconds=seconds)


def repair_body(fleet) -> dict:
    return {
        "type": "repair",
        "title": "XID 79 on slot 3",
        "priority": "high",
        "inputs": {"accelerator": fleet.failed.serial},
        "start": True,
    }


def test_create_with_the_broker_down_answers_201_once_and_the_sweep_sends_the_step_once(
    wf, fleet, tech, settings, monkeypatch
):
    client = api(tech)
    with broker_down(settings, monkeypatch) as refused, wf.committing():
        first = client.post(TICKETS, repair_body(fleet), format="json", HTTP_IDEMPOTENCY_KEY="open-1")
    assert first.status_code == 201, first.json()
    assert "workflows.step_run" in refused and "workflows.notify" in refused
    ticket = Ticket.objects.get()
    run = StepRun.objects.get(ticket=ticket)
    assert run.status == StepStatus.PENDING and run.published_at is None
    assert NotificationOutbox.objects.filter(ticket=ticket, sent_at__isnull=True).exists()

    # The client did not see the answer and retries: the same ticket, nothing new.
    with broker_down(settings, monkeypatch) as refused_again, wf.committing():
        retry = client.post(TICKETS, repair_body(fleet), format="json", HTTP_IDEMPOTENCY_KEY="open-1")
    assert retry.status_code == 200 and retry.json()["id"] == first.json()["id"]
    assert refused_again == [] and Ticket.objects.count() == 1 and StepRun.objects.count() == 1

    # The broker is back: the beat sweep sends the step once; a second sweep finds nothing to send.
    with wf.committing():
        assert runs_republish_unsent(now=later()) == 1
    with wf.committing():
        assert runs_republish_unsent(now=later()) == 0
    run.refresh_from_db()
    assert run.status == StepStatus.SUCCEEDED and run.attempts == 1 and run.published_at is not None
    assert wf.scheduler.calls["drain"] == 1 and ticket_fresh(ticket).state == "diagnosing"

    assert notifications_flush(now=later()) >= 1
    assert notifications_flush(now=later()) == 0
    assert wf.notifier.events().count("opened") == 1
    assert not NotificationOutbox.objects.filter(sent_at__isnull=True).exists()


def test_comment_with_the_broker_down_answers_201_once_and_the_notification_goes_out_later(
    wf, fleet, tech, settings, monkeypatch
):
    ticket = open_by_hook(wf, fleet)
    wf.notifier.sent.clear()
    url = f"{TICKETS}{ticket.pk}/comments/"
    client = api(tech)
    with broker_down(settings, monkeypatch) as refused, wf.committing():
        posted = client.post(url, {"body": "card reseated"}, format="json", HTTP_IDEMPOTENCY_KEY="c-1")
        again = client.post(url, {"body": "card reseated"}, format="json", HTTP_IDEMPOTENCY_KEY="c-1")
    assert posted.status_code == 201 and again.status_code == 201
    assert refused == ["workflows.notify"]  # the retry owed nobody a second notification
    assert [c["body"] for c in again.json()] == ["card reseated"]
    assert TimelineEntry.objects.filter(ticket=ticket, kind="comment").count() == 1
    assert wf.notifier.events() == []

    assert notifications_flush(now=later()) == 1
    assert notifications_flush(now=later()) == 0
    assert wf.notifier.events() == ["comment"]


def test_the_sweep_stops_at_a_refusal_and_leaves_the_run_unsent(wf, fleet, lead, settings, monkeypatch):
    settings.GPUOPS_WORKFLOWS = {"REPAIR_AUTO_START": False}
    ticket = open_by_hook(wf, fleet)
    with broker_down(settings, monkeypatch) as refused, wf.committing():
        transition_apply(ticket=ticket, name="start", actor=lead)
        assert runs_republish_unsent(now=later()) == 0
    assert refused == ["workflows.step_run", "workflows.step_run"]
    assert StepRun.objects.get(ticket=ticket).published_at is None


def test_the_sweep_sends_only_queued_runs_that_are_unsent_or_unclaimed(wf, fleet, lead, settings, monkeypatch):
    settings.GPUOPS_WORKFLOWS = {"REPAIR_AUTO_START": False}
    ticket = open_by_hook(wf, fleet)
    sent: list[str] = []
    monkeypatch.setattr(step_run_task, "apply_async", lambda args, task_id, **kw: sent.append(task_id))
    with wf.committing():
        transition_apply(ticket=ticket, name="start", actor=lead)
    run = StepRun.objects.get(ticket=ticket)
    assert sent == [str(run.pk)] and run.published_at is not None
    sent.clear()

    def sweep(seconds: float) -> list[str]:
        runs_republish_unsent(now=later(seconds))
        found = list(sent)
        sent.clear()
        return found

    assert sweep(15) == []  # just sent: a worker has a minute to claim it
    assert sweep(61) == [str(run.pk)]  # sent, never claimed: lost in the broker
    StepRun.objects.filter(pk=run.pk).update(published_at=None)
    assert sweep(5) == []  # unsent, but its on-commit publish may still be under way
    assert sweep(15) == [str(run.pk)]
    StepRun.objects.filter(pk=run.pk).update(status=StepStatus.RETRY, wake_at=later(300))
    assert sweep(61) == []  # its Celery retry is not due yet
    assert sweep(300 + 61) == [str(run.pk)]
    StepRun.objects.filter(pk=run.pk).update(status=StepStatus.RUNNING, started_at=timezone.now())
    assert sweep(600) == []  # claimed: the reaper's, not the sweep's
    StepRun.objects.filter(pk=run.pk).update(status=StepStatus.PENDING)
    wf.run(ticket_pause, ticket=ticket_fresh(ticket), actor=lead)
    assert sweep(600) == []  # a paused ticket's runs wait for resume


def test_create_with_an_idempotency_key_replays_and_refuses_another_body(wf, fleet, tech, lead):
    body = {"type": "incident", "title": "NFS slow in sh9", "priority": "normal"}
    first = api(tech).post(TICKETS, body, format="json", HTTP_IDEMPOTENCY_KEY="inc-1")
    assert first.status_code == 201
    again = api(tech).post(TICKETS, body, format="json", HTTP_IDEMPOTENCY_KEY="inc-1")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]

    other = api(tech).post(TICKETS, {**body, "title": "NFS down"}, format="json", HTTP_IDEMPOTENCY_KEY="inc-1")
    assert other.status_code == 422
    error = other.json()["error"]
    assert error["code"] == "idempotency_key_reused"
    assert "Idempotency-Key was used for a different request" in error["message"]
    assert first.json()["reference"] in error["message"]

    # Keys are per user: another user's identical key opens their own ticket.
    theirs = api(lead).post(TICKETS, body, format="json", HTTP_IDEMPOTENCY_KEY="inc-1")
    assert theirs.status_code == 201 and theirs.json()["id"] != first.json()["id"]
    assert api(tech).post(TICKETS, body, format="json").status_code == 201  # no key: a new ticket each time
    assert Ticket.objects.count() == 3
    too_long = api(tech).post(TICKETS, body, format="json", HTTP_IDEMPOTENCY_KEY="k" * 101)
    assert too_long.status_code == 400 and Ticket.objects.count() == 3


def test_comment_key_reused_for_another_text_or_ticket_is_refused(wf, fleet, tech):
    client = api(tech)
    first = client.post(TICKETS, {"type": "incident", "title": "one"}, format="json").json()
    second = client.post(TICKETS, {"type": "incident", "title": "two"}, format="json").json()
    url = f"{TICKETS}{first['id']}/comments/"
    assert client.post(url, {"body": "hello"}, format="json", HTTP_IDEMPOTENCY_KEY="c").status_code == 201
    other_text = client.post(url, {"body": "bye"}, format="json", HTTP_IDEMPOTENCY_KEY="c")
    assert other_text.status_code == 422 and "different request" in other_text.json()["error"]["message"]
    other_ticket = client.post(
        f"{TICKETS}{second['id']}/comments/", {"body": "hello"}, format="json", HTTP_IDEMPOTENCY_KEY="c"
    )
    assert other_ticket.status_code == 422
    assert TimelineEntry.objects.filter(kind="comment").count() == 1


def test_transition_key_reused_for_another_transition_is_422(wf, fleet, tech):
    ticket = open_by_hook(wf, fleet)
    url = f"{TICKETS}{ticket.pk}/transitions"
    client = api(tech)
    with wf.committing():
        assert client.post(f"{url}/diagnose_reseat/", {}, format="json", HTTP_IDEMPOTENCY_KEY="t").status_code == 200
    reused = client.post(f"{url}/cancel/", {}, format="json", HTTP_IDEMPOTENCY_KEY="t")
    assert reused.status_code == 422 and reused.json()["error"]["code"] == "idempotency_key_reused"
