"""Services tier: a small rollout is prepared and runs through a real Celery worker on the configured broker
(Redis) and PostgreSQL. The worker runs with the app's defaults: the dry-run executor and the no-op scheduler, so
the whole pipeline (prepare task, publish on commit, claims, step chain, waves, lock release) is real and nothing
touches a host."""

from __future__ import annotations

import pytest

from cmdb import models as m
from tests.conftest import wait_until
from workflows.rollouts.models import NodeLock, NodeRun, Rollout, RolloutStatus
from workflows.rollouts.options import RolloutOptions
from workflows.rollouts.selectors import NodeSelector
from workflows.rollouts.services import rollout_create, rollout_start

pytestmark = [pytest.mark.services, pytest.mark.slow]

HOSTS = ("sh1-h100-0002", "sh1-h100-0003", "sh1-h100-0007")


def test_small_rollout_through_a_real_worker(celery_worker_process, settings):
    from cmdb.services.demo import demo_load

    settings.CELERY_TASK_ALWAYS_EAGER = False
    demo_load(scale="small")
    package = m.DriverPackage.objects.get(component="nvidia-driver", version="570.133.20")
    rollout = rollout_create(
        package=package,
        selector=NodeSelector(hostnames=HOSTS),
        options=RolloutOptions.from_dict({"canary_size": 1, "wave_size": 2}),
    )
    # Autocommit: the prepare task is published at once, and the worker writes the plan.
    assert wait_until(lambda: Rollout.objects.get(pk=rollout.pk).status == RolloutStatus.PLANNED, timeout=60)
    rollout.refresh_from_db()
    assert rollout.plan["wave_sizes"] == [1, 2]
    rollout_start(rollout=rollout)  # autocommit: the advance task is published at once

    final = (RolloutStatus.COMPLETED, RolloutStatus.PAUSED, RolloutStatus.ABORTED)
    status = wait_until(
        lambda: Rollout.objects.get(pk=rollout.pk).status in final and Rollout.objects.get(pk=rollout.pk).status,
        timeout=120,
    )
    assert status == RolloutStatus.COMPLETED, f"rollout ended {status!r}"
    runs = list(NodeRun.objects.filter(rollout=rollout))
    assert {r.state for r in runs} == {"succeeded"} and all(r.is_dry_run for r in runs)
    assert set(m.Node.objects.filter(hostname__in=HOSTS).values_list("status", flat=True)) == {"active"}
    assert not NodeLock.objects.filter(owner_key=rollout.lock_key, released_at__isnull=True).exists()
    # Every step ran in the worker, each under its own task id (== the step row's id).
    steps = {s.name for r in runs for s in r.steps.all()}
    assert steps == {"drain", "install", "reboot", "verify", "resume"}
