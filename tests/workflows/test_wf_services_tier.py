"""Services tier: one repair ticket end to end through a real Celery worker process on Redis, with PostgreSQL.

The test process plays the people (transitions) and the agent (a healthy report); the worker runs every step.
Runs only when DATABASE_URL / CELERY_BROKER_URL point at real servers (.ci/run sets them).
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from cmdb import models as m
from cmdb.hooks import AcceleratorFailure, accelerator_failed
from cmdb.permissions import grant_scope
from inventory_agents.signals import report_received
from tests.conftest import wait_until
from tests.factories.cmdb import UserFactory
from workflows.engine import transition_apply
from workflows.models import StepRun, StepStatus, Ticket

pytestmark = pytest.mark.services


def _state_becomes(ticket: Ticket, state: str, timeout: float = 90) -> bool:
    return bool(wait_until(lambda: Ticket.objects.get(pk=ticket.pk).state == state, timeout=timeout))


def _take(ticket: Ticket, name: str, user, **inputs) -> None:
    transition_apply(ticket=Ticket.objects.get(pk=ticket.pk), name=name, actor=user, data=inputs)


def test_repair_through_a_real_worker(celery_worker_process, fleet, groups, settings, monkeypatch, tmp_path):
    from gpuops.celery import app

    # Earlier tests in this session may have run Celery eagerly; this one publishes to Redis for real.
    settings.CELERY_TASK_ALWAYS_EAGER = False
    monkeypatch.setitem(app.conf, "task_always_eager", False)
    tech = UserFactory(username="tech-svc")
    tech.groups.add(groups["dc-technicians"])  # the role; the scope grant below is where they work
    grant_scope(scope_obj=fleet.node.site, perms=["change_scope"], users=[tech])
    spare = fleet.spare("SPARE-SVC-1")

    accelerator_failed(
        AcceleratorFailure(
            accelerator_id=fleet.failed.pk,
            node_id=fleet.node.pk,
            health_event_id=None,
            kind="xid",
            code="79",
            message="fell off the bus",
        )
    )
    ticket = Ticket.objects.get(type="repair", is_open=True)
    assert _state_becomes(ticket, "diagnosing"), _worker_log(tmp_path)
    node = m.Node.objects.get(pk=fleet.node.pk)
    assert node.status == "maintenance" and node.is_cordoned

    _take(ticket, "diagnose_replace", tech)
    assert _state_becomes(ticket, "awaiting_swap"), _worker_log(tmp_path)
    _take(ticket, "confirm_swap", tech, old_serial=fleet.failed.serial, new_serial="SPARE-SVC-1")
    assert wait_until(
        lambda: StepRun.objects.filter(ticket=ticket, step="verify", status=StepStatus.WAITING).exists()
    ), _worker_log(tmp_path)

    # The agent reports the new card healthy; ingestion wakes the waiting verification at once.
    m.Accelerator.objects.filter(pk=spare.pk).update(health="ok", last_seen_at=timezone.now() + dt.timedelta(seconds=1))
    report_received.send(sender=m.Node, node=m.Node.objects.get(pk=fleet.node.pk), status="unchanged")
    assert _state_becomes(ticket, "awaiting_rma_shipment"), _worker_log(tmp_path)

    _take(ticket, "record_rma_shipment", tech, rma_vendor="NVIDIA", rma_number="RMA-1", rma_tracking="TRK-1")
    _take(ticket, "receive_replacement", tech, replacement_serial="1654SVC-RMA-1")
    assert _state_becomes(ticket, "closed"), _worker_log(tmp_path)

    runs = list(StepRun.objects.filter(ticket=ticket))
    assert {r.status for r in runs} == {"succeeded"}
    log = _worker_log(tmp_path)
    for run in runs:  # the worker ran each step under the run's id as its task id
        assert f"workflows.step_run[{run.pk}]" in log
    records = m.ChangeRecord.objects.filter(correlation_id=ticket.correlation_id)
    assert records.count() >= 6 and set(records.values_list("source", flat=True)) == {"workflow"}
    assert m.Accelerator.objects.get(serial="1654SVC-RMA-1").lifecycle == "in_stock"


def _worker_log(tmp_path) -> str:
    path = tmp_path / "worker.log"
    return path.read_text() if path.exists() else ""
