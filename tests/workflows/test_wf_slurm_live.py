"""A repair ticket drains its node in a real Slurm (the cluster of tests/integrations/schedulers/conftest.py):
the drain step waits, naming the running job, until Slurm reports the node drained."""

from __future__ import annotations

import time

import pytest

from cmdb import models as m
from integrations.schedulers import registry as scheduler_registry
from integrations.schedulers.slurm import SlurmScheduler
from tests.integrations.schedulers.conftest import slurm_cluster  # noqa: F401 (the fixture)
from tests.workflows.helpers import open_by_hook, ticket_fresh
from workflows.models import StepRun, StepStatus

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def test_repair_drain_waits_in_slurm_until_the_job_ends(wf, fleet, slurm_cluster, monkeypatch):  # noqa: F811
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    m.Node.objects.filter(pk=fleet.node.pk).update(hostname="gn1")
    job = slurm_cluster.run("sbatch", "--parsable", "-o", "/dev/null", "-w", "gn1", "--wrap", "sleep 300").strip()
    try:
        deadline = time.monotonic() + 30
        while slurm_cluster.run("squeue", "-h", "-j", job, "-o", "%T").strip() != "RUNNING":
            assert time.monotonic() < deadline, "job did not start on gn1"
            time.sleep(0.3)

        with scheduler_registry.override(SlurmScheduler()):
            ticket = open_by_hook(wf, fleet)
            run = StepRun.objects.get(ticket=ticket, step="drain")
            assert run.status == StepStatus.WAITING
            sinfo = slurm_cluster.run("sinfo", "-h", "-N", "-n", "gn1", "-o", "%T|%E").strip()
            assert sinfo.startswith(f"draining|{ticket.reference}: ")
            assert f"gn1 still runs 1 job(s) ({job})" in ticket.timeline.filter(kind="step").last().message
            assert m.Node.objects.get(pk=fleet.node.pk).status == "draining"

            slurm_cluster.run("scancel", job)
            deadline = time.monotonic() + 30
            while slurm_cluster.run("squeue", "-h", "-w", "gn1").strip():
                assert time.monotonic() < deadline, "job did not end"
                time.sleep(0.3)
            wf.wake()
        assert ticket_fresh(ticket).state == "diagnosing"
        assert m.Node.objects.get(pk=fleet.node.pk).status == "maintenance"
        sinfo = slurm_cluster.run("sinfo", "-h", "-N", "-n", "gn1", "-o", "%T|%E").strip()
        assert sinfo.startswith(f"drained|{ticket.reference}: ")
    finally:
        slurm_cluster.run("scancel", "--full", "-u", "root")
        slurm_cluster.run("scontrol", "update", "NodeName=gn1", "State=RESUME")
