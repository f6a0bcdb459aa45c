"""The step lines of the JSON logs, and a request's id on the step tasks it enqueued (eager Celery, on commit)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from workflows.models import Ticket


@pytest.fixture
def committed(transactional_db):
    """Real commits: on-commit callbacks (the step tasks) run inside the request, as they do in production."""


def test_a_request_that_starts_a_ticket_logs_its_step_and_task_under_the_requests_id(
    committed, json_logs, eager, scheduler, notifier, fleet, tech
):
    fleet.spare()
    client = APIClient()
    client.force_authenticate(tech)
    response = client.post(
        "/api/workflows/tickets/",
        {"type": "repair", "title": "XID 79", "inputs": {"accelerator": fleet.failed.serial}, "start": True},
        format="json",
        HTTP_X_REQUEST_ID="req-repair-1",
    )
    assert response.status_code == 201, response.json()
    ticket = Ticket.objects.get(pk=response.json()["id"])
    lines = json_logs()

    steps = [line for line in lines if line.get("event") == "step_run"]
    drain = next(line for line in steps if line["step"] == "drain")
    assert drain["logger"] == "gpuops.step" and drain["outcome"] == "succeeded"
    assert drain["ticket"] == ticket.reference and drain["workflow"] == "repair" and drain["attempt"] == 1
    assert drain["actor"] == "tech" and drain["correlation_id"] == ticket.correlation_id
    assert drain["duration_ms"] >= 0

    (task,) = [line for line in lines if line.get("event") == "task_run" and line["task_id"] == drain["run_id"]]
    assert task["task"] == "workflows.step_run" and task["outcome"] == "success"
    assert task["correlation_id"] == "req-repair-1"  # the request that enqueued it
    assert task["ticket"] == ticket.reference  # bound by the runner once it knew the ticket

    (request_line,) = [line for line in lines if line.get("event") == "http_request"]
    assert request_line["request_id"] == "req-repair-1" and request_line["status"] == 201
    assert request_line["user"] == "tech"
