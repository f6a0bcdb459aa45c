"""Structured logs (GPUOPS_LOG_FORMAT=json): every stdout line is one JSON object; the request and task lines carry
what a log shipper indexes (request id / correlation id, user, duration, outcome)."""

from __future__ import annotations

import datetime as dt

import pytest
from celery import shared_task
from django.test import Client
from rest_framework.authtoken.models import Token

from cmdb import models as m
from gpuops import celery_app
from gpuops.context import change_context
from gpuops.exceptions import TransientError
from gpuops.logs import CORRELATION_HEADER
from gpuops.tasks import BaseTask
from tests.factories.cmdb import NodeFactory, UserFactory

pytestmark = pytest.mark.django_db


@shared_task(base=BaseTask, name="tests.logs.flaky")
def flaky_task(fail_times: int) -> str:
    """Fails with a transient error `fail_times` times (counted on the task object), then succeeds."""
    flaky_task.calls = getattr(flaky_task, "calls", 0) + 1
    if flaky_task.calls <= fail_times:
        raise TransientError(f"peer busy (call {flaky_task.calls})")
    return "ok"


@shared_task(base=BaseTask, name="tests.logs.broken")
def broken_task() -> None:
    raise ValueError("the step has a bug")


def events(lines: list[dict], event: str) -> list[dict]:
    return [line for line in lines if line.get("event") == event]


def test_one_json_line_per_request_with_id_user_status_and_duration(json_logs):
    user = UserFactory(username="ops-anna")
    token = Token.objects.create(user=user)
    client = Client()

    response = client.get("/api/workflows/tickets/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200
    lines = json_logs()
    (line,) = events(lines, "http_request")
    assert line["logger"] == "gpuops.request" and line["level"] == "info"
    assert line["method"] == "GET" and line["path"] == "/api/workflows/tickets/" and line["status"] == 200
    assert line["request_id"] == response["X-Request-ID"] == line["correlation_id"]
    assert line["user"] == "ops-anna"  # token authentication (DRF), not only the session
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    assert dt.datetime.fromisoformat(line["ts"]).tzinfo is not None
    assert "GET /api/workflows/tickets/ 200" in line["message"]


def test_request_line_keeps_a_client_request_id_and_names_no_user_when_anonymous(json_logs):
    response = Client().get("/api/workflows/tickets/", HTTP_X_REQUEST_ID="lb-7f3a.42")
    assert response.status_code == 401
    (line,) = events(json_logs(), "http_request")
    assert line["request_id"] == "lb-7f3a.42" and line["status"] == 401 and line["user"] is None


def test_a_task_run_is_one_line_and_runs_under_the_correlation_id_its_message_carries(json_logs):
    nodes = NodeFactory.create_batch(2, status="active")
    from cmdb.tasks import nodes_set_status_task

    # What a worker sees when the publisher ran under a change context: the id in the message headers.
    nodes_set_status_task.apply(
        args=[[n.pk for n in nodes], "draining", "logs test"], headers={CORRELATION_HEADER: "ops-4711"}
    )
    (line,) = events(json_logs(), "task_run")
    assert line["logger"] == "gpuops.task" and line["task"] == "cmdb.nodes_set_status"
    assert line["outcome"] == "success" and line["correlation_id"] == "ops-4711" and line["retries"] == 0
    assert line["task_id"] and line["duration_ms"] >= 0
    # The change records the task wrote carry the same id: a log search and the change history meet.
    records = m.ChangeRecord.objects.filter(object_id__in=[str(n.pk) for n in nodes], action="update")
    assert records.count() == 2 and set(records.values_list("correlation_id", flat=True)) == {"ops-4711"}


def test_a_task_without_a_carried_id_runs_under_its_own_task_id(json_logs):
    nodes = NodeFactory.create_batch(1, status="active")
    from cmdb.tasks import nodes_set_status_task

    result = nodes_set_status_task.apply(args=[[nodes[0].pk], "draining", "logs test"])
    (line,) = events(json_logs(), "task_run")
    assert line["correlation_id"] == line["task_id"] == result.id


def test_retries_and_a_failure_each_get_their_line(json_logs, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    flaky_task.calls = 0
    assert flaky_task.apply_async(args=[2]).get() == "ok"
    runs = events(json_logs(), "task_run")
    assert [line["outcome"] for line in runs] == ["retry", "retry", "success"]
    assert [line["retries"] for line in runs] == [0, 1, 2]
    assert runs[0]["level"] == "warning" and runs[0]["error"] == "TransientError: peer busy (call 1)"
    assert len({line["task_id"] for line in runs}) == 1  # a retry is the same task

    with pytest.raises(ValueError):
        broken_task.apply_async()
    (failed,) = events(json_logs(), "task_run")
    assert failed["outcome"] == "failure" and failed["level"] == "error"
    assert failed["error"] == "ValueError: the step has a bug"


def test_a_published_task_carries_the_publishers_correlation_id():
    from celery import signals

    from cmdb.tasks import nodes_set_status_task

    published: list[dict] = []

    def capture(headers=None, **_):
        published.append(dict(headers or {}))

    signals.after_task_publish.connect(capture, weak=False)
    try:
        # kombu's in-memory transport: a real publish, no broker needed.
        with celery_app.connection_for_write("memory://") as conn, celery_app.amqp.Producer(conn) as producer:
            with change_context(correlation_id="req-42"):
                nodes_set_status_task.apply_async(args=[[], "draining"], producer=producer)
            nodes_set_status_task.apply_async(args=[[], "draining"], producer=producer)
    finally:
        signals.after_task_publish.disconnect(capture)
    assert published[0][CORRELATION_HEADER] == "req-42"
    assert CORRELATION_HEADER not in published[1]  # no context, nothing invented


def test_plain_format_is_the_default_and_other_values_are_refused(monkeypatch):
    import runpy

    from tests.conftest import REPO

    monkeypatch.delenv("GPUOPS_LOG_FORMAT", raising=False)
    plain = runpy.run_path(str(REPO / "gpuops" / "settings.py"))
    assert plain["GPUOPS_LOG_FORMAT"] == "plain" and plain["LOGGING"]["root"]["handlers"] == ["console"]
    assert plain["CELERY_WORKER_HIJACK_ROOT_LOGGER"] is True  # script/server's worker log stays Celery's own
    monkeypatch.setenv("GPUOPS_LOG_FORMAT", "yaml")
    with pytest.raises(ValueError, match="GPUOPS_LOG_FORMAT must be 'plain' or 'json'"):
        runpy.run_path(str(REPO / "gpuops" / "settings.py"))


def test_plain_format_writes_the_request_line_only_for_server_errors(caplog):
    import time
    from types import SimpleNamespace

    from gpuops.logs import request_log

    request = SimpleNamespace(method="GET", path="/api/cmdb/nodes/", user=None)
    with caplog.at_level("DEBUG", logger="gpuops"):
        caplog.set_level("WARNING", logger="gpuops.request")  # what the plain LOGGING sets
        request_log(request, 200, time.monotonic(), "rid-ok")
        request_log(request, 502, time.monotonic(), "rid-bad")
    lines = [r for r in caplog.records if r.name == "gpuops.request"]
    assert [(r.levelname, r.request_id, r.status) for r in lines] == [("ERROR", "rid-bad", 502)]
    assert lines[0].getMessage().startswith("GET /api/cmdb/nodes/ 502 ")
