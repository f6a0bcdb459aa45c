"""Kubernetes through its API, with the official `kubernetes` Python client.

    drain   PATCH the node: spec.unschedulable=true and the annotation gpuops.io/drain-reason=<reason>;
            then POST an Eviction for every pod on the node that a drain waits for (not DaemonSet-owned, not a
            static mirror pod, not finished). A 429 is a PodDisruptionBudget saying "not now": the eviction is
            retried with backoff until `drain_timeout_s`, and what is still refused stays on the node.
    resume  PATCH the node: spec.unschedulable removed, the annotation removed.
    state   GET the node; LIST the pods with fieldSelector spec.nodeName=<n>.
    history LIST the pods with fieldSelector spec.nodeName=<n>: those (not DaemonSet) whose run overlaps the window;
            the API keeps a finished pod only until it is deleted or garbage-collected, so this is what it still has.
    alloc   LIST the nodes and the unfinished pods: accelerators allocatable vs requested by the pods on each node.
    remove  DELETE the node (gone already is done).

Kubernetes has no drain reason, so it goes into an annotation. A drain that ends with pods still held by a
disruption budget is not an error: the node is cordoned and `node_state` keeps reporting the pods left (and which
ones), which the workflow waits on and shows on the ticket.

Credentials are referenced, never stored: a kubeconfig path (and context) or the in-cluster service account.
Responses are read as the API's JSON (`_preload_content=False`): the same shape as `kubectl get -o json`, which
the parsers here are tested on, and no model objects built for fields gpuops never reads.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from integrations.exceptions import PermanentError, TransientError

from .base import SchedulerAllocation, SchedulerJob, SchedulerNode, SchedulerNodeState

REASON_ANNOTATION = "gpuops.io/drain-reason"
# Extended resources that are accelerators, by vendor device plugin.
ACCELERATOR_RESOURCES = ("nvidia.com/gpu", "huawei.com/Ascend910", "huawei.com/Ascend310P", "hygon.com/dcu")
# API statuses worth a retry: throttling, timeouts, the API server or etcd unavailable.
_TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class KubernetesNodeFacts:
    """What the API says of a node beyond schedulability: conditions, taints, accelerator capacity."""

    name: str
    conditions: dict[str, str]  # type -> "True" / "False" / "Unknown"
    taints: list[dict[str, str]]
    capacity: dict[str, int]  # accelerator resource -> count
    allocatable: dict[str, int]
    unschedulable: bool
    reason: str = ""
    labels: dict[str, str] = field(default_factory=dict)


def _is_plumbing(pod: dict[str, Any]) -> bool:
    """A pod that belongs to the node, not to work on it: DaemonSet-owned or a static mirror pod."""
    meta = pod.get("metadata", {})
    if any(ref.get("kind") == "DaemonSet" for ref in meta.get("ownerReferences") or []):
        return True
    return "kubernetes.io/config.mirror" in (meta.get("annotations") or {})


def pods_blocking_drain(pods_json: dict[str, Any]) -> list[dict[str, Any]]:
    """Pods still running on a node that a drain waits for: not DaemonSet-owned, not static mirror pods,
    not finished."""
    blocking = []
    for pod in pods_json.get("items", []):
        if _is_plumbing(pod):
            continue
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        blocking.append(pod)
    return blocking


def _quantity(value: Any) -> int:
    """An extended resource's quantity ("8", 8); anything else (fractions, garbage) counts as 0."""
    try:
        return int(str(value))
    except ValueError:
        return 0


def node_facts_parse(node_json: dict[str, Any]) -> KubernetesNodeFacts:
    """The facts gpuops keeps of one node object (`kubectl get node -o json` or an item of its list)."""
    meta, spec, status = node_json.get("metadata", {}), node_json.get("spec", {}), node_json.get("status", {})
    resources = {
        kind: {r: _quantity(v) for r, v in (status.get(kind) or {}).items() if r in ACCELERATOR_RESOURCES}
        for kind in ("capacity", "allocatable")
    }
    return KubernetesNodeFacts(
        name=meta.get("name", ""),
        conditions={c.get("type", ""): c.get("status", "Unknown") for c in status.get("conditions") or []},
        taints=[
            {k: str(t.get(k, "")) for k in ("key", "value", "effect") if t.get(k) is not None}
            for t in spec.get("taints") or []
        ],
        capacity=resources["capacity"],
        allocatable=resources["allocatable"],
        unschedulable=bool(spec.get("unschedulable")),
        reason=(meta.get("annotations") or {}).get(REASON_ANNOTATION, ""),
        labels=dict(meta.get("labels") or {}),
    )


def pod_accelerators(pod: dict[str, Any]) -> int:
    """Accelerators a pod holds: its containers' requests (or limits: an extended resource's request defaults to
    its limit) summed, or the largest init container's, whichever is more - how the kube-scheduler counts."""
    spec = pod.get("spec", {})

    def wanted(container: dict[str, Any]) -> int:
        resources = container.get("resources") or {}
        amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return sum(_quantity(v) for r, v in amounts.items() if r in ACCELERATOR_RESOURCES)

    main = sum(wanted(c) for c in spec.get("containers") or [])
    init = max((wanted(c) for c in spec.get("initContainers") or []), default=0)
    return max(main, init)


def _when(value: Any) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def pod_job(pod: dict[str, Any]) -> SchedulerJob:
    """A pod as a job: namespace/name, its phase, the owner that made it (a Job, a ReplicaSet...) as the name,
    started at status.startTime, ended at its last container's finish (unfinished pods have none)."""
    meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status", {})
    owners = meta.get("ownerReferences") or []
    finished = [
        _when(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for c in status.get("containerStatuses") or []
    ]
    ended = [f for f in finished if f is not None]
    done = status.get("phase") in ("Succeeded", "Failed")
    return SchedulerJob(
        job_id=_pod_name(pod),
        state=str(status.get("phase", "")),
        user=str(meta.get("namespace", "")),
        name=f"{owners[0].get('kind', '')}/{owners[0].get('name', '')}" if owners else str(meta.get("name", "")),
        nodes=(str(spec.get("nodeName", "")),) if spec.get("nodeName") else (),
        start_at=_when(status.get("startTime")),
        end_at=max(ended) if done and ended else None,
    )


def _pod_name(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _api_message(exc: Any) -> str:
    """The API server's Status message, else the HTTP reason."""
    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason or "")


def _state(facts: KubernetesNodeFacts, blocking: list[dict[str, Any]]) -> SchedulerNodeState:
    ready = facts.conditions.get("Ready", "Unknown") == "True"
    words = ["Ready" if ready else "NotReady"] + (["SchedulingDisabled"] if facts.unschedulable else [])
    names = ", ".join(_pod_name(p) for p in blocking[:10]) + (" ..." if len(blocking) > 10 else "")
    return SchedulerNodeState(
        name=facts.name,
        state=",".join(words),
        # A NotReady node takes no work whatever its cordon says.
        is_schedulable=not facts.unschedulable and ready,
        is_drained=facts.unschedulable and not blocking,
        running=len(blocking),
        reason=f"{facts.reason} (pods left: {names})".strip() if blocking else facts.reason,
        jobs=tuple(_pod_name(p) for p in blocking),
    )


class KubernetesScheduler:
    """The Scheduler protocol on the Kubernetes API (official client)."""

    def __init__(
        self,
        *,
        kubeconfig: str = "",
        context: str = "",
        in_cluster: bool = False,
        drain_timeout_s: float = 120.0,
        eviction_retry_s: float = 5.0,
        request_timeout_s: float = 30.0,
        api_client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.kubeconfig, self.context, self.in_cluster = kubeconfig, context, in_cluster
        self.drain_timeout_s, self.eviction_retry_s = drain_timeout_s, eviction_retry_s
        self.request_timeout_s = request_timeout_s
        self._api_client, self._core = api_client, None
        self._sleep = sleep
        self.peer = "kubernetes"

    # --- the client ------------------------------------------------------------------------------------------

    def _api(self) -> Any:
        """CoreV1Api, built on first use so that a bad kubeconfig fails the call that needs it, not start-up."""
        if self._core is None:
            from kubernetes import client, config

            api_client = self._api_client
            if api_client is None:
                try:
                    if self.in_cluster:
                        config.load_incluster_config()
                        api_client = client.ApiClient()
                    else:
                        api_client = config.new_client_from_config(
                            config_file=self.kubeconfig or None, context=self.context or None
                        )
                except (config.ConfigException, OSError) as exc:
                    raise PermanentError(f"Kubernetes credentials: {exc}", peer=self.peer) from exc
            self.peer = getattr(getattr(api_client, "configuration", None), "host", "") or "kubernetes"
            self._core = client.CoreV1Api(api_client)
        return self._core

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, ok_statuses: tuple[int, ...] = (), **kw: Any) -> Any:
        """Run one API call; return its decoded JSON (None for an allowed error status). Errors become
        TransientError / PermanentError carrying the API server's message."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError as Urllib3Error

        try:
            response = fn(*args, _preload_content=False, _request_timeout=self.request_timeout_s, **kw)
        except ApiException as exc:
            if exc.status in ok_statuses:
                return None
            error = TransientError if (exc.status or 0) in _TRANSIENT_STATUSES else PermanentError
            raise error(f"Kubernetes {what}: {exc.status} {_api_message(exc)}", peer=self.peer) from exc
        except (Urllib3Error, OSError) as exc:
            raise TransientError(f"Kubernetes {what}: {exc}", peer=self.peer) from exc
        raw = response.data
        try:
            return json.loads(raw) if raw else {}
        except ValueError as exc:
            raise PermanentError(f"Kubernetes {what}: the answer is not JSON ({exc})", peer=self.peer) from exc

    def _node(self, name: str) -> dict[str, Any]:
        return self._call(f"read node {name}", self._api().read_node, name)

    def _patch_node(self, name: str, body: dict[str, Any], *, what: str) -> None:
        # A JSON merge patch, said so: the client's default content type for a patch is a JSON Patch (a list of
        # operations), which the API server refuses for an object body.
        self._call(f"{what} {name}", self._api().patch_node, name, body, _content_type="application/merge-patch+json")

    def _pods(self, name: str) -> dict[str, Any]:
        return self._call(
            f"list pods on {name}", self._api().list_pod_for_all_namespaces, field_selector=f"spec.nodeName={name}"
        )

    def _evict(self, pod: dict[str, Any]) -> bool:
        """Ask the API to evict one pod. True when it is gone or going; False while a disruption budget refuses
        it (429)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError as Urllib3Error

        meta = pod.get("metadata", {})
        name, namespace = meta.get("name", ""), meta.get("namespace", "default")
        body = client.V1Eviction(
            api_version="policy/v1", kind="Eviction", metadata=client.V1ObjectMeta(name=name, namespace=namespace)
        )
        try:
            self._api().create_namespaced_pod_eviction(
                name, namespace, body, _preload_content=False, _request_timeout=self.request_timeout_s
            )
        except ApiException as exc:
            if exc.status == 404:  # gone already
                return True
            if exc.status == 429:  # a PodDisruptionBudget: not now
                return False
            error = TransientError if (exc.status or 0) in _TRANSIENT_STATUSES else PermanentError
            raise error(
                f"Kubernetes evict pod {namespace}/{name}: {exc.status} {_api_message(exc)}", peer=self.peer
            ) from exc
        except (Urllib3Error, OSError) as exc:
            raise TransientError(f"Kubernetes evict pod {namespace}/{name}: {exc}", peer=self.peer) from exc
        return True

    # --- the protocol ----------------------------------------------------------------------------------------

    def drain(self, node: SchedulerNode, *, reason: str) -> None:
        """Cordon with the reason, then evict what a drain waits for, honouring disruption budgets."""
        body = {
            "spec": {"unschedulable": True},
            "metadata": {"annotations": {REASON_ANNOTATION: " ".join(reason.split())[:250]}},
        }
        self._patch_node(node.name, body, what="cordon")
        deadline = time.monotonic() + self.drain_timeout_s
        pending = pods_blocking_drain(self._pods(node.name))
        while pending:
            refused = [pod for pod in pending if not self._evict(pod)]
            if not refused or time.monotonic() + self.eviction_retry_s > deadline:
                return
            self._sleep(self.eviction_retry_s)
            pending = refused

    def resume(self, node: SchedulerNode) -> None:
        # A JSON merge patch: null removes a field (an absent one is fine), which is how `kubectl uncordon` does it.
        body = {"spec": {"unschedulable": None}, "metadata": {"annotations": {REASON_ANNOTATION: None}}}
        self._patch_node(node.name, body, what="uncordon")

    def node_state(self, node: SchedulerNode) -> SchedulerNodeState:
        facts = node_facts_parse(self._node(node.name))
        return _state(facts, pods_blocking_drain(self._pods(node.name)))

    def _cluster_read(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Every node and every unfinished pod: two calls for the whole cluster."""
        listing = self._call("list nodes", self._api().list_node)
        pods = self._call(
            "list pods",
            self._api().list_pod_for_all_namespaces,
            field_selector="status.phase!=Succeeded,status.phase!=Failed",
        )
        return listing, pods

    def nodes_state(self, nodes: list[SchedulerNode]) -> dict[str, SchedulerNodeState]:
        """The state of many nodes in two calls (every node, every unfinished pod) instead of two per node: what
        the scheduler sync reads. Nodes the API does not know are absent from the answer."""
        wanted = {n.name for n in nodes}
        listing, pods = self._cluster_read()
        by_node: dict[str, list[dict[str, Any]]] = {}
        for pod in pods_blocking_drain(pods):
            by_node.setdefault(pod.get("spec", {}).get("nodeName", ""), []).append(pod)
        states = {}
        for item in listing.get("items", []):
            facts = node_facts_parse(item)
            if facts.name in wanted:
                states[facts.name] = _state(facts, by_node.get(facts.name, []))
        return states

    def job_history(self, node: SchedulerNode, *, start_at: dt.datetime, end_at: dt.datetime) -> list[SchedulerJob]:
        """The pods (not DaemonSet or mirror pods) whose run on the node overlaps the window, as far as the API
        still keeps them."""
        jobs = []
        for pod in self._pods(node.name).get("items", []):
            if _is_plumbing(pod):
                continue
            job = pod_job(pod)
            if job.start_at is None or job.start_at > end_at or (job.end_at is not None and job.end_at < start_at):
                continue
            jobs.append(job)
        return sorted(jobs, key=lambda j: (j.start_at or end_at, j.job_id))

    def nodes_allocation(self, nodes: list[SchedulerNode]) -> dict[str, SchedulerAllocation]:
        """Accelerators allocatable on each node and requested by its unfinished pods, in two calls."""
        wanted = {n.name for n in nodes}
        listing, pods = self._cluster_read()
        used: dict[str, int] = {}
        for pod in pods.get("items", []):
            name = pod.get("spec", {}).get("nodeName") or ""
            if name in wanted and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                used[name] = used.get(name, 0) + pod_accelerators(pod)
        allocations = {}
        for item in listing.get("items", []):
            facts = node_facts_parse(item)
            if facts.name in wanted:
                total = sum(facts.allocatable.values())
                allocations[facts.name] = SchedulerAllocation(facts.name, total, used.get(facts.name, 0))
        return allocations

    def node_facts(self, node: SchedulerNode) -> KubernetesNodeFacts:
        """Conditions, taints and accelerator capacity / allocatable of the node."""
        return node_facts_parse(self._node(node.name))

    def remove(self, node: SchedulerNode, *, reason: str) -> None:
        self._call(f"delete node {node.name}", self._api().delete_node, node.name, ok_statuses=(404,))


__all__ = [
    "ACCELERATOR_RESOURCES",
    "REASON_ANNOTATION",
    "KubernetesNodeFacts",
    "KubernetesScheduler",
    "node_facts_parse",
    "pod_accelerators",
    "pod_job",
    "pods_blocking_drain",
]
