"""Services tier: ticket writes against a dead broker and racing client retries, on PostgreSQL with Redis.

(a) The web side publishes to a dead broker (redis://127.0.0.1:1/0) while a real worker listens on the real one:
    the ticket is answered 201 once, a client retry gets the same ticket, and the outbox sweep later sends the
    step to the real broker exactly once. (b) 16 threads racing one Idempotency-Key get one ticket, one comment
    and one transition between them.
Runs only when DATABASE_URL / CELERY_BROKER_URL point at real servers (.ci/run sets them).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Callable, Iterator

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from cmdb import models as m
from cmdb.permissions import grant_scope
from tests.conftest import wait_until
from tests.factories.cmdb import UserFactory
from workflows.models import NotificationOutbox, StepEffect, StepRun, StepStatus, Ticket, TimelineEntry, TransitionLog
from workflows.runner import runs_republish_unsent
from workflows.services.notifications import notifications_flush

pytestmark = pytest.mark.services

TICKETS = "/api/workflows/tickets/"
DEAD_BROKER = "redis://127.0.0.1:1/0"


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@contextlib.contextmanager
def web_broker(settings, url: str) -> Iterator[None]:
    """Point this (web) process's publishing at `url`; the worker process keeps the real broker.

    The write URL is set because CELERY_BROKER_URL in the environment wins over `broker_url` in Celery's
    config; the pools are dropped so the next publish connects to the new URL.
    """
    from gpuops.celery import app

    def drop_pools() -> None:
        app._pool = None
        app.amqp._producer_pool = None

    previous, settings.CELERY_BROKER_URL = settings.CELERY_BROKER_URL, url
    app.conf.broker_write_url = url
    drop_pools()
    try:
        yield
    finally:
        settings.CELERY_BROKER_URL = previous
        app.conf.broker_write_url = None
        drop_pools()


def later(seconds: float = 15) -> dt.datetime:
    return timezone.now() + dt.timedelta(seconds=seconds)


def test_dead_broker_at_create_leaves_one_ticket_and_the_sweep_runs_its_step_once(
    celery_worker_process, fleet, groups, settings, monkeypatch, tmp_path
):
    from gpuops.celery import app

    settings.CELERY_TASK_ALWAYS_EAGER = False
    monkeypatch.setitem(app.conf, "task_always_eager", False)
    tech = UserFactory(username="tech-outbox")
    tech.groups.add(groups["dc-technicians"])  # the role; the scope grant is where they work
    grant_scope(scope_obj=fleet.node.site, perms=["change_scope"], users=[tech])
    body = {"type": "repair", "title": "XID 79", "inputs": {"accelerator": fleet.failed.serial}, "start": True}

    with web_broker(settings, DEAD_BROKER):
        first = api(tech).post(TICKETS, body, format="json", HTTP_IDEMPOTENCY_KEY="svc-open-1")
        retry = api(tech).post(TICKETS, body, format="json", HTTP_IDEMPOTENCY_KEY="svc-open-1")
    assert first.status_code == 201, first.content
    assert retry.status_code == 200 and retry.json()["id"] == first.json()["id"]
    assert Ticket.objects.count() == 1
    ticket = Ticket.objects.get()
    run = StepRun.objects.get(ticket=ticket)
    assert run.status == StepStatus.PENDING and run.published_at is None
    assert NotificationOutbox.objects.filter(ticket=ticket, sent_at__isnull=True).exists()

    # The broker is reachable again: the beat sweep sends the step once, a second sweep sends nothing.
    assert runs_republish_unsent(now=later()) == 1
    assert runs_republish_unsent(now=later()) == 0
    assert wait_until(lambda: Ticket.objects.get(pk=ticket.pk).state == "diagnosing", timeout=90), _log(tmp_path)
    run.refresh_from_db()
    assert run.status == StepStatus.SUCCEEDED and run.attempts == 1
    assert _log(tmp_path).count(f"workflows.step_run[{run.pk}] received") == 1
    effects = list(StepEffect.objects.filter(run=run).values_list("key", flat=True))
    assert effects and len(effects) == len(set(effects))
    node = m.Node.objects.get(pk=fleet.node.pk)
    assert node.status == "maintenance" and node.is_cordoned

    assert notifications_flush(now=later()) >= 1
    assert not NotificationOutbox.objects.filter(sent_at__isnull=True).exists()


def race(n: int, request: Callable[[], object]) -> list:
    """Run `request` in n threads released at once; returns each result (or the exception it raised)."""
    barrier = threading.Barrier(n)
    results: list = []
    lock = threading.Lock()

    def worker() -> None:
        try:
            barrier.wait()
            result = request()
        except Exception as exc:  # collected, asserted on by the test
            result = exc
        finally:
            connection.close()  # each thread has its own connection; leave none open to the test database
        with lock:
            results.append(result)

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


def test_sixteen_racing_retries_with_one_key_get_one_ticket_one_comment_one_transition(
    transactional_db, groups, eager, notifier
):
    tech = UserFactory(username="tech-race")
    tech.groups.add(groups["dc-technicians"])
    body = {"type": "incident", "title": "NFS slow in sh9"}

    created = race(16, lambda: api(tech).post(TICKETS, body, format="json", HTTP_IDEMPOTENCY_KEY="race-open"))
    codes = sorted(r.status_code for r in created)
    assert codes == [200] * 15 + [201], [getattr(r, "content", r) for r in created]
    assert len({r.json()["id"] for r in created}) == 1
    assert Ticket.objects.count() == 1
    ticket = Ticket.objects.get()

    url = f"{TICKETS}{ticket.pk}"
    commented = race(
        16, lambda: api(tech).post(f"{url}/comments/", {"body": "on it"}, format="json", HTTP_IDEMPOTENCY_KEY="c")
    )
    assert [r.status_code for r in commented] == [201] * 16
    assert TimelineEntry.objects.filter(ticket=ticket, kind="comment").count() == 1

    started = race(
        16,
        lambda: api(tech).post(f"{url}/transitions/start_work/", {}, format="json", HTTP_IDEMPOTENCY_KEY="start"),
    )
    assert [r.status_code for r in started] == [200] * 16, [r.content for r in started if r.status_code != 200]
    assert TransitionLog.objects.filter(ticket=ticket, name="start_work").count() == 1
    assert Ticket.objects.get(pk=ticket.pk).state == "in_progress"


def _log(tmp_path) -> str:
    path = tmp_path / "worker.log"
    return path.read_text() if path.exists() else ""
