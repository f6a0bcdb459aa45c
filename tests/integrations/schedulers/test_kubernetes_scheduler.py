"""The Kubernetes adapter through the official client against a loopback API server with the real API's semantics:
cordon with the ticket's reason, drain through the Eviction API honouring disruption budgets, DaemonSet pods left
alone, uncordon, node facts read from real `kubectl get node -o json` captures, errors sorted into transient and
permanent."""

from __future__ import annotations

import json
import socket

import pytest
import yaml

from integrations.exceptions import PermanentError, TransientError
from integrations.schedulers import SchedulerNode
from integrations.schedulers.kubernetes import REASON_ANNOTATION, KubernetesScheduler, node_facts_parse
from integrations.schedulers.registry import cache_clear, scheduler_for
from tests.integrations.schedulers.kube_peer import KubeApi, kube_api, kubeconfig_write, pod

NODE = SchedulerNode(name="nori", cluster="edge-k8s", cluster_kind="kubernetes")
CAPTURE = "kubernetes/edgexr_rke2-a16-vgpu-node_get-nodes-o-json.json"


@pytest.fixture
def captured_nodes(shared_fixtures) -> dict[str, dict]:
    listing = json.loads((shared_fixtures / CAPTURE).read_text())
    return {item["metadata"]["name"]: item for item in listing["items"]}


@pytest.fixture
def api(captured_nodes):
    state = KubeApi(nodes=captured_nodes)
    state.pods = [
        pod("trainer-0", "nori", namespace="team-a"),
        pod("trainer-1", "nori", namespace="team-a"),
        pod("dcgm-exporter-x1", "nori", namespace="gpu-operator", owner="DaemonSet"),
        pod("done-job", "nori", phase="Succeeded", owner="Job"),
        pod("elsewhere", "other-node"),
    ]
    with kube_api(state) as running:
        yield running


@pytest.fixture
def kubeconfig(tmp_path, api) -> str:
    return kubeconfig_write(tmp_path / "kubeconfig", api.url)


def adapter(kubeconfig: str, **options) -> tuple[KubernetesScheduler, list[float]]:
    slept: list[float] = []
    options.setdefault("eviction_retry_s", 0.01)
    return KubernetesScheduler(kubeconfig=kubeconfig, context="gpu-prod", sleep=slept.append, **options), slept


def test_captured_node_facts(captured_nodes, shared_fixtures):
    facts = node_facts_parse(captured_nodes["nori"])
    assert facts.capacity == {"nvidia.com/gpu": 1} and facts.allocatable == {"nvidia.com/gpu": 1}
    assert facts.conditions["Ready"] == "True" and facts.conditions["MemoryPressure"] == "False"
    assert not facts.unschedulable and facts.taints == [] and facts.reason == ""
    # The node status of another capture (YAML, as `kubectl get node -o yaml` prints it).
    status_only = yaml.safe_load(
        (shared_fixtures / "kubernetes/podman-issue7778_node-status-gpu-capacity.yaml").read_text()
    )
    facts = node_facts_parse({"metadata": {"name": "nvidia1"}, **status_only})
    assert facts.capacity == {"nvidia.com/gpu": 1}


def test_taints_and_every_vendor_resource_are_read():
    facts = node_facts_parse(
        {
            "metadata": {"name": "n1", "annotations": {REASON_ANNOTATION: "REP-3: Xid 79"}},
            "spec": {
                "unschedulable": True,
                "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
            },
            "status": {
                "capacity": {"huawei.com/Ascend910": "8", "hygon.com/dcu": "8", "cpu": "192", "nvidia.com/gpu": "x"},
                "allocatable": {"huawei.com/Ascend910": "7"},
            },
        }
    )
    assert facts.capacity == {"huawei.com/Ascend910": 8, "hygon.com/dcu": 8, "nvidia.com/gpu": 0}
    assert facts.allocatable == {"huawei.com/Ascend910": 7}
    assert facts.taints == [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    assert facts.unschedulable and facts.reason == "REP-3: Xid 79"


def test_drain_cordons_with_reason_evicts_workload_and_leaves_daemonsets(api, kubeconfig):
    k8s, _ = adapter(kubeconfig)
    assert k8s.node_state(NODE).is_schedulable
    k8s.drain(NODE, reason="REP-12:  card   GPU-3 Xid 79")
    node = api.nodes["nori"]
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"][REASON_ANNOTATION] == "REP-12: card GPU-3 Xid 79"
    # Captured annotations survive: a merge patch, not a replacement.
    assert "flannel.alpha.coreos.com/backend-type" in node["metadata"]["annotations"]
    left = sorted(p["metadata"]["name"] for p in api.pods_on("nori"))
    assert left == ["dcgm-exporter-x1", "done-job"]
    evictions = [path for method, path, _ in api.requests if method == "POST"]
    assert evictions == [
        "/api/v1/namespaces/team-a/pods/trainer-0/eviction",
        "/api/v1/namespaces/team-a/pods/trainer-1/eviction",
    ]
    assert {kind for method, _, kind in api.requests if method == "PATCH"} == {"application/merge-patch+json"}
    state = k8s.node_state(NODE)
    assert state.is_drained and state.running == 0 and not state.is_schedulable
    assert state.state == "Ready,SchedulingDisabled" and state.reason == "REP-12: card GPU-3 Xid 79"

    k8s.drain(NODE, reason="REP-12: card GPU-3 Xid 79")  # idempotent
    k8s.resume(NODE)
    node = api.nodes["nori"]
    assert "unschedulable" not in node["spec"] and REASON_ANNOTATION not in node["metadata"]["annotations"]
    assert k8s.node_state(NODE).is_schedulable
    k8s.resume(NODE)  # resuming a schedulable node is done already


def test_a_disruption_budget_is_waited_for_and_retried(api, kubeconfig):
    api.budget_refusals["trainer-1"] = 2
    k8s, slept = adapter(kubeconfig, eviction_retry_s=5)
    k8s.drain(NODE, reason="RO-4: driver 550")
    assert [p["metadata"]["name"] for p in api.pods_on("nori") if p["metadata"]["namespace"] == "team-a"] == []
    assert slept == [5, 5]  # two refusals, two waits, then evicted
    tries = [path for method, path, _ in api.requests if path.endswith("trainer-1/eviction")]
    assert len(tries) == 3


def test_a_budget_that_holds_past_the_timeout_leaves_the_node_cordoned_with_the_pods_named(api, kubeconfig):
    api.budget_refusals["trainer-1"] = -1
    k8s, slept = adapter(kubeconfig, drain_timeout_s=0.05, eviction_retry_s=0.01)
    k8s.drain(NODE, reason="REP-7: x")  # not an error: the workflow waits on node_state
    state = k8s.node_state(NODE)
    assert not state.is_schedulable and not state.is_drained and state.running == 1
    assert "team-a/trainer-1" in state.reason and state.reason.startswith("REP-7: x")
    assert slept  # it did wait before giving up


def test_remove_deletes_and_a_gone_node_is_removed_already(api, kubeconfig):
    k8s, _ = adapter(kubeconfig)
    k8s.remove(NODE, reason="decommission")
    assert "nori" not in api.nodes
    k8s.remove(NODE, reason="decommission")


def test_errors_become_transient_or_permanent_with_the_api_message(api, kubeconfig, tmp_path):
    k8s, _ = adapter(kubeconfig)
    with pytest.raises(PermanentError, match='nodes "ghost" not found'):
        k8s.node_state(SchedulerNode(name="ghost"))
    api.fail_next = [503]
    with pytest.raises(TransientError, match="503"):
        k8s.drain(NODE, reason="x")
    api.fail_next = [429]
    with pytest.raises(TransientError):
        k8s.resume(NODE)

    wrong_token = KubernetesScheduler(kubeconfig=kubeconfig_write(tmp_path / "bad", api.url, token="nope"))
    with pytest.raises(PermanentError, match="401"):
        wrong_token.node_state(NODE)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    down = KubernetesScheduler(
        kubeconfig=kubeconfig_write(tmp_path / "down", f"http://127.0.0.1:{closed_port}"), request_timeout_s=2
    )
    with pytest.raises(TransientError):
        down.node_state(NODE)

    with pytest.raises(PermanentError, match="credentials"):
        KubernetesScheduler(kubeconfig=str(tmp_path / "missing")).node_state(NODE)


def test_settings_pick_the_adapter_for_kubernetes_clusters(api, kubeconfig, settings):
    path = "integrations.schedulers.kubernetes.KubernetesScheduler"
    settings.GPUOPS_INTEGRATIONS = {
        "SCHEDULERS": {"kubernetes": path, "default": "integrations.schedulers.noop.NoopScheduler"},
        "SCHEDULER_OPTIONS": {path: {"kubeconfig": kubeconfig, "context": "gpu-prod"}},
    }
    cache_clear()
    try:
        scheduler = scheduler_for("kubernetes")
        assert isinstance(scheduler, KubernetesScheduler)
        scheduler.drain(NODE, reason="REP-1: x")
        assert api.nodes["nori"]["spec"]["unschedulable"] is True
    finally:
        cache_clear()


def _with_gpus(item: dict, count: int, *, started: str, finished: str | None = None, init: int = 0) -> dict:
    """A pod as the API returns it once scheduled: GPU limits on its container, start time, and (finished) the
    container's termination."""
    item["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(count)}}
    if init:
        item["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"nvidia.com/gpu": str(init)}}}]
    item["status"]["startTime"] = started
    if finished:
        item["status"]["containerStatuses"] = [{"name": "main", "state": {"terminated": {"finishedAt": finished}}}]
    return item


def test_job_history_lists_the_pods_whose_run_overlaps_the_window(api, kubeconfig):
    import datetime as dt

    for p in api.pods:
        p["status"]["startTime"] = "2026-12-03T08:00:00Z"
    done = next(p for p in api.pods if p["metadata"]["name"] == "done-job")
    done["status"]["containerStatuses"] = [
        {"name": "main", "state": {"terminated": {"finishedAt": "2026-12-03T09:30:00Z"}}}
    ]
    old = pod("old-job", "nori", phase="Failed", owner="Job")
    api.pods.append(_with_gpus(old, 1, started="2026-12-02T01:00:00Z", finished="2026-12-02T02:00:00Z"))
    k8s, _ = adapter(kubeconfig)
    jobs = k8s.job_history(
        NODE, start_at=dt.datetime(2026, 12, 3, 6, tzinfo=dt.UTC), end_at=dt.datetime(2026, 12, 3, 10, tzinfo=dt.UTC)
    )
    by_id = {j.job_id: j for j in jobs}
    # DaemonSet pods are the node's plumbing, not work; the pod that ended yesterday is outside the window.
    assert sorted(by_id) == ["default/done-job", "team-a/trainer-0", "team-a/trainer-1"]
    finished = by_id["default/done-job"]
    assert finished.state == "Succeeded" and finished.end_at == dt.datetime(2026, 12, 3, 9, 30, tzinfo=dt.UTC)
    assert finished.name == "Job/done-job-owner" and finished.user == "default" and finished.nodes == ("nori",)
    assert by_id["team-a/trainer-0"].end_at is None and by_id["team-a/trainer-0"].state == "Running"


def test_allocation_counts_the_accelerators_unfinished_pods_request(api, kubeconfig):
    from integrations.schedulers.kubernetes import pod_accelerators

    trainer = next(p for p in api.pods if p["metadata"]["name"] == "trainer-0")
    _with_gpus(trainer, 1, started="2026-12-03T08:00:00Z")
    done = next(p for p in api.pods if p["metadata"]["name"] == "done-job")
    _with_gpus(done, 1, started="2026-12-03T08:00:00Z", finished="2026-12-03T09:00:00Z")  # finished: holds nothing
    assert pod_accelerators(_with_gpus(pod("x", "n"), 2, started="", init=4)) == 4  # the larger init container
    k8s, _ = adapter(kubeconfig)
    allocation = k8s.nodes_allocation([NODE, SchedulerNode(name="not-in-k8s")])
    assert list(allocation) == ["nori"]
    assert (allocation["nori"].total, allocation["nori"].allocated) == (1, 1)
