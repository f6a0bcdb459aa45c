"""Scheduler state synced back: a node drained in the scheduler but schedulable in gpuops (or the reverse, or
unknown to the scheduler) becomes a recorded drift shown on the node page, the dashboard and the API; nothing is
overwritten; agreement resolves it. Read through the real Kubernetes client against the loopback API server."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from cmdb import models as m
from cmdb.permissions import grant_scope
from integrations.models import DriftKind, SchedulerDrift
from integrations.schedulers import SchedulerNode
from integrations.schedulers.fake import FakeScheduler
from integrations.schedulers.registry import cache_clear, override
from integrations.schedulers.sync import scheduler_drift_sync, synced_clusters
from integrations.tasks import scheduler_sync_all_task
from tests.factories.cmdb import ClusterFactory, NodeFactory, SiteFactory, UserFactory
from tests.integrations.schedulers.kube_peer import KubeApi, kube_api, kubeconfig_write, pod

K8S = "integrations.schedulers.kubernetes.KubernetesScheduler"


def api_node(name: str, *, unschedulable: bool = False, ready: bool = True, reason: str = "") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"gpuops.io/drain-reason": reason} if reason else {}},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "capacity": {"nvidia.com/gpu": "8"},
            "allocatable": {"nvidia.com/gpu": "8"},
        },
    }


@pytest.fixture
def world(db):
    sa, sb = SiteFactory(code="sa"), SiteFactory(code="sb")
    ka = ClusterFactory(name="k8s-a", kind="kubernetes", site=sa)
    kb = ClusterFactory(name="k8s-b", kind="kubernetes", site=sb)
    nodes = {
        "a-ok": NodeFactory(hostname="a-ok", site=sa, cluster=ka),
        "a-drained-by-hand": NodeFactory(hostname="a-drained-by-hand", site=sa, cluster=ka),
        "a-resumed-by-hand": NodeFactory(
            hostname="a-resumed-by-hand", site=sa, cluster=ka, is_cordoned=True, cordon_reason="REP-9: Xid 79"
        ),
        "a-not-in-k8s": NodeFactory(hostname="a-not-in-k8s", site=sa, cluster=ka),
        "a-racked": NodeFactory(hostname="a-racked", site=sa, cluster=ka, status="racked"),
        "b-down": NodeFactory(hostname="b-down", site=sb, cluster=kb),
    }
    state = KubeApi(
        nodes={
            "a-ok": api_node("a-ok"),
            "a-drained-by-hand": api_node("a-drained-by-hand", unschedulable=True, reason="disk check - bob"),
            "a-resumed-by-hand": api_node("a-resumed-by-hand"),
            "b-down": api_node("b-down", ready=False),
        },
        pods=[pod("trainer-0", "a-drained-by-hand", namespace="team-a")],
    )
    with kube_api(state) as api:
        yield {"sa": sa, "sb": sb, "ka": ka, "kb": kb, "nodes": nodes, "api": api}


@pytest.fixture
def k8s_configured(world, tmp_path, settings):
    config = kubeconfig_write(tmp_path / "kubeconfig", world["api"].url)
    settings.GPUOPS_INTEGRATIONS = {
        "SCHEDULERS": {"kubernetes": K8S, "default": "integrations.schedulers.noop.NoopScheduler"},
        "SCHEDULER_OPTIONS": {K8S: {"kubeconfig": config}},
    }
    cache_clear()
    yield world
    cache_clear()


def open_drifts() -> dict[str, SchedulerDrift]:
    return {d.node.hostname: d for d in SchedulerDrift.objects.filter(resolved_at__isnull=True).select_related("node")}


def test_disagreements_are_recorded_and_nothing_is_overwritten(k8s_configured, django_assert_max_num_queries):
    world = k8s_configured
    with django_assert_max_num_queries(8):
        result = scheduler_drift_sync(world["ka"].pk)
    assert sorted(result.opened) == ["a-drained-by-hand", "a-not-in-k8s", "a-resumed-by-hand"]
    drifts = open_drifts()
    hand = drifts["a-drained-by-hand"]
    assert hand.kind == DriftKind.SCHEDULER_UNSCHEDULABLE and not hand.cmdb_cordoned
    assert hand.scheduler_state == "Ready,SchedulingDisabled"
    assert hand.scheduler_reason.startswith("disk check - bob") and "team-a/trainer-0" in hand.scheduler_reason
    resumed = drifts["a-resumed-by-hand"]
    assert resumed.kind == DriftKind.SCHEDULER_SCHEDULABLE and resumed.cmdb_cordon_reason == "REP-9: Xid 79"
    assert drifts["a-not-in-k8s"].kind == DriftKind.MISSING
    assert "a-racked" not in drifts  # not in a lifecycle the scheduler should know
    # Neither side changed: the CMDB keeps its cordons, the API its nodes.
    assert not m.Node.objects.get(hostname="a-drained-by-hand").is_cordoned
    assert m.Node.objects.get(hostname="a-resumed-by-hand").is_cordoned
    assert world["api"].nodes["a-drained-by-hand"]["spec"] == {"unschedulable": True}
    assert not [r for r in world["api"].requests if r[0] != "GET"]
    # Two reads for the whole cluster, not two per node.
    assert [p for _m, p, _c in world["api"].requests] == ["/api/v1/nodes", "/api/v1/pods"]


def test_a_second_sync_refreshes_and_agreement_resolves(k8s_configured):
    world = k8s_configured
    scheduler_drift_sync(world["ka"].pk)
    first = open_drifts()
    again = scheduler_drift_sync(world["ka"].pk)
    assert again.opened == [] and again.still_open == 3
    assert {h: d.pk for h, d in open_drifts().items()} == {h: d.pk for h, d in first.items()}
    # The operator resumes the node in Kubernetes; the cordoned one is cordoned there too; the missing one retires.
    world["api"].nodes["a-drained-by-hand"] = api_node("a-drained-by-hand")
    world["api"].nodes["a-resumed-by-hand"] = api_node("a-resumed-by-hand", unschedulable=True)
    m.Node.objects.filter(hostname="a-not-in-k8s").update(status="decommissioned")
    result = scheduler_drift_sync(world["ka"].pk)
    assert sorted(result.resolved) == ["a-drained-by-hand", "a-resumed-by-hand"]
    assert open_drifts() == {}
    assert SchedulerDrift.objects.filter(resolved_at__isnull=False).count() == 3


def test_a_changed_disagreement_closes_the_old_row_and_opens_a_new_one(k8s_configured):
    world = k8s_configured
    scheduler_drift_sync(world["ka"].pk)
    del world["api"].nodes["a-drained-by-hand"]  # now unknown to the scheduler
    scheduler_drift_sync(world["ka"].pk)
    rows = SchedulerDrift.objects.filter(node__hostname="a-drained-by-hand").order_by("pk")
    assert [(r.kind, r.is_open) for r in rows] == [
        (DriftKind.SCHEDULER_UNSCHEDULABLE, False),
        (DriftKind.MISSING, True),
    ]


def test_a_not_ready_node_counts_as_unschedulable(k8s_configured):
    scheduler_drift_sync(k8s_configured["kb"].pk)
    drift = open_drifts()["b-down"]
    assert drift.kind == DriftKind.SCHEDULER_UNSCHEDULABLE and drift.scheduler_state == "NotReady"


def test_only_clusters_with_a_real_adapter_are_synced(world, settings):
    settings.GPUOPS_INTEGRATIONS = {"SCHEDULERS": {"default": "integrations.schedulers.noop.NoopScheduler"}}
    cache_clear()
    assert synced_clusters() == []
    assert scheduler_sync_all_task.apply().get() == 0
    slurm = ClusterFactory(name="slurm-a", kind="slurm", site=world["sa"])
    settings.GPUOPS_INTEGRATIONS = {"SCHEDULERS": {"slurm": "integrations.schedulers.fake.FakeScheduler"}}
    assert synced_clusters() == [slurm.pk]
    cache_clear()


def test_adapters_without_a_bulk_read_are_asked_node_by_node(world):
    fake = FakeScheduler()
    with override(fake):
        fake.drain(SchedulerNode(name="a-ok"), reason="manual")
        result = scheduler_drift_sync(world["ka"].pk)
    assert "a-ok" in result.opened and fake.attempts["node_state"] == 4


def test_the_api_node_page_and_dashboard_show_it_scoped(k8s_configured):
    world = k8s_configured
    scheduler_drift_sync(world["ka"].pk)
    scheduler_drift_sync(world["kb"].pk)
    viewer = UserFactory(username="sa-viewer", is_staff=False)
    grant_scope(scope_obj=world["sa"], perms=["view_scope"], users=[viewer])
    client = Client()
    client.force_login(viewer)

    listed = client.get("/api/integrations/schedulers/drift/?open=true").json()["results"]
    assert sorted(d["node"] for d in listed) == ["a-drained-by-hand", "a-not-in-k8s", "a-resumed-by-hand"]
    assert {d["site"] for d in listed} == {"sa"}  # b-down is site B's
    one = client.get("/api/integrations/schedulers/drift/?node=a-drained-by-hand").json()["results"]
    assert one[0]["kind"] == "scheduler_unschedulable" and one[0]["cmdb_cordoned"] is False
    bad = client.get("/api/integrations/schedulers/drift/?open=maybe")
    assert bad.status_code == 400 and "open" in json.dumps(bad.json())

    page = client.get("/nodes/a-drained-by-hand/").content.decode()
    assert 'id="scheduler-drift"' in page and "disk check - bob" in page and "neither side was changed" in page
    assert 'id="scheduler-drift"' not in client.get("/nodes/a-ok/").content.decode()

    dashboard = client.get("/").content.decode()
    href = "/api/integrations/schedulers/drift/?site=sa&amp;open=true"
    assert f'href="{href}"' in dashboard
    behind = client.get(href.replace("&amp;", "&")).json()["count"]
    assert behind == 3


def test_allocation_is_recorded_and_idle_nodes_are_listed_scoped(world):
    """The sync also records how many accelerators the scheduler handed out on each node; a node with none allocated
    since long ago is idle. Nothing in the CMDB's facts changes."""
    import datetime as dt

    from django.utils import timezone

    from integrations.schedulers.base import SchedulerAllocation
    from integrations.schedulers.sync import scheduler_allocation_sync

    fake = FakeScheduler(
        allocation={
            "a-ok": SchedulerAllocation("a-ok", 8, 6),
            "a-drained-by-hand": SchedulerAllocation("a-drained-by-hand", 8, 0),
            "a-resumed-by-hand": SchedulerAllocation("a-resumed-by-hand", 8, None),
        }
    )
    with override(fake):
        assert scheduler_allocation_sync(world["ka"].pk) == 3
        assert scheduler_sync_all_task.apply().get() == 2  # the task runs drift and allocation for both clusters
    rows = {a.node.hostname: a for a in m.NodeAllocation.objects.select_related("node")}
    assert (rows["a-ok"].total, rows["a-ok"].allocated) == (8, 6) and rows["a-ok"].last_allocated_at is not None
    assert rows["a-drained-by-hand"].allocated == 0 and rows["a-drained-by-hand"].last_allocated_at is None
    assert rows["a-resumed-by-hand"].allocated is None
    assert "a-racked" not in rows and "b-down" not in rows  # not synced / unknown to this scheduler

    # A week later the busy node is idle: its last allocation stays where it was.
    m.NodeAllocation.objects.filter(node__hostname="a-ok").update(
        last_allocated_at=timezone.now() - dt.timedelta(days=8)
    )
    fake.allocation["a-ok"] = SchedulerAllocation("a-ok", 8, 0)
    with override(fake):
        scheduler_allocation_sync(world["ka"].pk)
    assert m.NodeAllocation.objects.get(node__hostname="a-ok").last_allocated_at < timezone.now() - dt.timedelta(days=7)

    b_node = world["nodes"]["b-down"]
    m.NodeAllocation.objects.create(
        node=b_node, scheduler="kubernetes", total=8, allocated=0, observed_at=timezone.now()
    )
    viewer = UserFactory(username="sa-alloc", is_staff=False)
    grant_scope(scope_obj=world["sa"], perms=["view_scope"], users=[viewer])
    client = Client()
    client.force_login(viewer)
    listed = client.get("/api/integrations/schedulers/allocation/").json()["results"]
    assert sorted(r["node"] for r in listed) == ["a-drained-by-hand", "a-ok", "a-resumed-by-hand"]  # not site B's
    idle = client.get("/api/integrations/schedulers/allocation/?idle_days=7").json()["results"]
    assert sorted(r["node"] for r in idle) == ["a-drained-by-hand", "a-ok"]
    bad = client.get("/api/integrations/schedulers/allocation/?idle_days=soon")
    assert bad.status_code == 400 and "idle_days" in json.dumps(bad.json())
