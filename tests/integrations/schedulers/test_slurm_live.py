"""Contract test of the Slurm adapter against a real Slurm (slurmctld + two slurmd + munged on 127.0.0.1):
drain with the ticket's reason, wait for the running job, new work avoids the drained node, resume."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from integrations.exceptions import PermanentError
from integrations.schedulers import SchedulerNode, scheduler_for
from integrations.schedulers.registry import cache_clear
from integrations.schedulers.slurm import SlurmScheduler

pytestmark = pytest.mark.services

GN1 = SchedulerNode(name="gn1", cluster="gpuopstest", cluster_kind="slurm")
GN2 = SchedulerNode(name="gn2", cluster="gpuopstest", cluster_kind="slurm")
REASON = "REP-42: GPU 1654SH100000003 failed (XID 79)"


def until(what: str, check, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"{what}: not after {timeout_s:.0f} s")


@pytest.fixture
def slurm(slurm_cluster, settings, monkeypatch):
    """The adapter gpuops picks for a Slurm cluster, as settings configure it."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    settings.GPUOPS_INTEGRATIONS = {"SCHEDULERS": {"slurm": "integrations.schedulers.slurm.SlurmScheduler"}}
    cache_clear()
    yield scheduler_for("slurm")
    cache_clear()
    slurm_cluster.run("scancel", "--full", "-u", "root")
    if "drain" in slurm_cluster.run("sinfo", "-h", "-N", "-o", "%T"):
        slurm_cluster.run("scontrol", "update", "NodeName=gn1,gn2", "State=RESUME")


def sbatch(cluster, *options: str) -> str:
    out = cluster.run("sbatch", "--parsable", "-o", "/dev/null", "--gres=gpu:1", *options, "--wrap", "sleep 300")
    return out.strip().split(";")[0]


def job_node(cluster, job_id: str) -> str:
    out = cluster.run("squeue", "-h", "-j", job_id, "-o", "%T %N").split()
    return out[1] if len(out) == 2 and out[0] == "RUNNING" else ""


def test_drain_waits_for_the_running_job_new_work_avoids_the_node_and_resume_brings_it_back(slurm_cluster, slurm):
    assert isinstance(slurm, SlurmScheduler)
    assert slurm.node_state(GN1).is_schedulable
    busy = sbatch(slurm_cluster, "-w", "gn1")
    until("job on gn1 running", lambda: job_node(slurm_cluster, busy) == "gn1")

    slurm.drain(GN1, reason=REASON)
    sinfo = slurm_cluster.run("sinfo", "-h", "-N", "-n", "gn1", "-o", "%T|%E").strip()
    assert sinfo == f"draining|{REASON}"
    draining = slurm.node_state(GN1)
    assert (draining.is_schedulable, draining.is_drained, draining.jobs) == (False, False, (busy,))
    assert draining.reason == REASON and "DRAIN" in draining.state
    assert [job.job_id for job in slurm.node_jobs(GN1)] == [busy]

    other = sbatch(slurm_cluster)
    assert until("new job running", lambda: job_node(slurm_cluster, other)) == "gn2"
    slurm.drain(GN1, reason=REASON)  # again: idempotent

    slurm_cluster.run("scancel", busy)
    drained = until("gn1 drained", lambda: (s := slurm.node_state(GN1)).is_drained and s)
    assert drained.jobs == () and drained.reason == REASON
    assert slurm_cluster.run("sinfo", "-h", "-N", "-n", "gn1", "-o", "%T|%E").strip() == f"drained|{REASON}"
    states = slurm.nodes_state([GN1, GN2])
    assert states["gn1"].is_drained and states["gn1"].reason == REASON and states["gn2"].is_schedulable

    slurm.resume(GN1)
    slurm.resume(GN1)  # again: idempotent
    assert slurm.node_state(GN1).is_schedulable
    until(
        "gn1 idle in sinfo", lambda: slurm_cluster.run("sinfo", "-h", "-N", "-n", "gn1", "-o", "%T").strip() == "idle"
    )
    pinned = sbatch(slurm_cluster, "-w", "gn1")
    assert until("job on resumed gn1", lambda: job_node(slurm_cluster, pinned)) == "gn1"


def test_scheduler_errors_carry_slurm_message(slurm_cluster, slurm):
    with pytest.raises(PermanentError, match=r"(?i)invalid node name"):
        slurm.drain(SchedulerNode(name="gn9", cluster_kind="slurm"), reason=REASON)
    # No accounting database runs here: sacct's refusal reaches the caller as a PermanentError.
    with pytest.raises(PermanentError, match="sacct"):
        slurm.job_history(GN2, start_at=dt.datetime(2026, 1, 1), end_at=dt.datetime(2026, 1, 2))


@pytest.mark.django_db
def test_a_node_drained_by_hand_in_slurm_is_recorded_as_drift(slurm_cluster, slurm):
    """The scheduler sync reads the real Slurm (one sinfo for the cluster) and records an operator's drain that
    gpuops did not make, without changing either side; resuming in Slurm resolves it."""
    from integrations.models import DriftKind, SchedulerDrift
    from integrations.schedulers.sync import scheduler_drift_sync, synced_clusters
    from tests.factories.cmdb import ClusterFactory, NodeFactory

    cluster = ClusterFactory(name="gpuopstest", kind="slurm")
    for name in ("gn1", "gn2", "gn3"):
        NodeFactory(hostname=name, site=cluster.site, cluster=cluster)
    assert synced_clusters() == [cluster.pk]
    slurm_cluster.run("scontrol", "update", "NodeName=gn1", "State=DRAIN", "Reason=bios update - alice")

    result = scheduler_drift_sync(cluster.pk)
    drifts = {d.node.hostname: d for d in SchedulerDrift.objects.filter(resolved_at__isnull=True)}
    assert sorted(result.opened) == ["gn1", "gn3"]  # gn3 is not in slurm.conf
    assert drifts["gn1"].kind == DriftKind.SCHEDULER_UNSCHEDULABLE
    assert drifts["gn1"].scheduler_reason == "bios update - alice"
    assert drifts["gn3"].kind == DriftKind.MISSING
    assert "drain" in slurm_cluster.run("sinfo", "-h", "-n", "gn1", "-o", "%T")  # not resumed by the sync

    slurm_cluster.run("scontrol", "update", "NodeName=gn1", "State=RESUME")
    until("gn1 idle", lambda: "drain" not in slurm_cluster.run("sinfo", "-h", "-n", "gn1", "-o", "%T"))
    assert scheduler_drift_sync(cluster.pk).resolved == ["gn1"]


def test_allocation_counts_the_gpus_jobs_hold(slurm_cluster, slurm):
    """GPUs handed to jobs per node (sinfo GresUsed), read for the whole cluster in one call - also where Slurm's
    TRES accounting does not track gres/gpu, as in this cluster (its AllocTRES has no gres/gpu)."""
    held = sbatch(slurm_cluster, "-w", "gn2", "--gres=gpu:3")
    until("job on gn2 running", lambda: job_node(slurm_cluster, held) == "gn2")
    allocation = slurm.nodes_allocation([GN1, GN2])
    assert (allocation["gn2"].total, allocation["gn2"].allocated) == (8, 3)
    assert (allocation["gn1"].total, allocation["gn1"].allocated) == (8, 0)
    slurm_cluster.run("scancel", held)
    assert until("gn2 released", lambda: slurm.nodes_allocation([GN2])["gn2"].allocated == 0)
