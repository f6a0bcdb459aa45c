"""Services tier: the CMDB on PostgreSQL, and a Celery task through Redis to a real worker process."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from cmdb import models as m
from tests.conftest import wait_until
from tests.factories.cmdb import AcceleratorFactory, NodeFactory

pytestmark = pytest.mark.services


@pytest.mark.django_db
def test_running_on_postgresql():
    assert connection.vendor == "postgresql"


@pytest.mark.django_db
def test_constraints_hold_on_postgresql():
    card = AcceleratorFactory(slot_index=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        AcceleratorFactory(node=card.node, slot_index=0)


def test_task_through_redis_to_a_worker_that_writes_to_the_database(celery_worker_process):
    from cmdb.tasks import nodes_set_status_task

    nodes = NodeFactory.create_batch(3, status="active")
    nodes_set_status_task.delay([n.pk for n in nodes], "draining", "services-tier test", "svc-corr-1")
    done = wait_until(lambda: m.Node.objects.filter(status="draining").count() == 3, timeout=60)
    assert done, "the worker did not process the task"
    records = m.ChangeRecord.objects.filter(correlation_id="svc-corr-1")
    assert records.count() == 3 and set(records.values_list("source", flat=True)) == {"system"}
