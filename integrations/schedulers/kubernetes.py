"""Kubernetes through `kubectl`, run locally or over SSH on a host with a kubeconfig.

    drain   kubectl cordon <n>; kubectl annotate node <n> gpuops.io/drain-reason=<reason> --overwrite;
            kubectl drain <n> --ignore-daemonsets --delete-emptydir-data --timeout=<s>s
    resume  kubectl uncordon <n>; kubectl annotate node <n> gpuops.io/drain-reason-
    state   kubectl get node <n> -o json; kubectl get pods -A --field-selector spec.nodeName=<n> -o json
    remove  kubectl delete node <n> --ignore-not-found

Kubernetes has no drain reason, so it goes into an annotation. A drain that times out (a PodDisruptionBudget
holds a pod) is not an error here: the node is cordoned and `node_state` keeps reporting the pods left,
which the workflow waits on and shows to the operator.
"""

from __future__ import annotations

import json
from typing import Any

from integrations.exceptions import PermanentError, TransientError

from .base import SchedulerNode, SchedulerNodeState
from .runners import CommandResult, CommandRunner, runner_build

REASON_ANNOTATION = "gpuops.io/drain-reason"
_TRANSIENT = (
    "unable to connect to the server",
    "i/o timeout",
    "connection refused",
    "tls handshake timeout",
    "serviceunavailable",
    "the server is currently unable",
    "etcdserver: request timed out",
    "too many requests",
    "connection reset by peer",
)


def pods_blocking_drain(pods_json: dict[str, Any]) -> int:
    """Pods still running on a node that a drain waits for: not DaemonSet-owned, not static mirror pods,
    not finished."""
    count = 0
    for pod in pods_json.get("items", []):
        meta = pod.get("metadata", {})
        if any(ref.get("kind") == "DaemonSet" for ref in meta.get("ownerReferences", []) or []):
            continue
        if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
            continue
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        count += 1
    return count


class KubectlScheduler:
    """The Scheduler protocol on kubectl."""

    def __init__(
        self,
        runner: CommandRunner | None = None,
        *,
        kubectl: str = "kubectl",
        context: str = "",
        drain_timeout_s: int = 120,
        timeout_s: float = 60.0,
        **runner_options: object,
    ) -> None:
        self.runner = runner or runner_build(**runner_options)  # type: ignore[arg-type]
        self.kubectl, self.context = kubectl, context
        self.drain_timeout_s, self.timeout_s = drain_timeout_s, timeout_s

    def _argv(self, *args: str) -> list[str]:
        return [self.kubectl, *(["--context", self.context] if self.context else []), *args]

    def _run(self, *args: str, timeout_s: float | None = None, allow_fail: bool = False) -> CommandResult:
        result = self.runner.run(self._argv(*args), timeout_s=timeout_s or self.timeout_s)
        if not result.ok and not allow_fail:
            text = result.output.lower()
            error_class = TransientError if any(t in text for t in _TRANSIENT) else PermanentError
            raise error_class(f"kubectl {' '.join(args[:2])}: {result.output[:300]}", peer=self.runner.peer)
        return result

    def drain(self, node: SchedulerNode, *, reason: str) -> None:
        self._run("cordon", node.name)
        self._run("annotate", "node", node.name, f"{REASON_ANNOTATION}={' '.join(reason.split())[:250]}", "--overwrite")
        result = self._run(
            "drain",
            node.name,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            f"--timeout={self.drain_timeout_s}s",
            timeout_s=self.drain_timeout_s + 30,
            allow_fail=True,
        )
        if not result.ok:
            text = result.output.lower()
            if any(t in text for t in _TRANSIENT):
                raise TransientError(f"kubectl drain: {result.output[:300]}", peer=self.runner.peer)
            if "timed out" not in text and "cannot evict pod" not in text:
                raise PermanentError(f"kubectl drain: {result.output[:300]}", peer=self.runner.peer)

    def resume(self, node: SchedulerNode) -> None:
        self._run("uncordon", node.name)
        self._run("annotate", "node", node.name, f"{REASON_ANNOTATION}-")

    def node_state(self, node: SchedulerNode) -> SchedulerNodeState:
        try:
            info = json.loads(self._run("get", "node", node.name, "-o", "json").stdout)
            pods = json.loads(
                self._run(
                    "get", "pods", "--all-namespaces", "--field-selector", f"spec.nodeName={node.name}", "-o", "json"
                ).stdout
            )
        except json.JSONDecodeError as exc:
            raise PermanentError(f"kubectl returned non-JSON: {exc}", peer=self.runner.peer) from exc
        unschedulable = bool(info.get("spec", {}).get("unschedulable"))
        ready = next(
            (c.get("status") for c in info.get("status", {}).get("conditions", []) if c.get("type") == "Ready"),
            "Unknown",
        )
        running = pods_blocking_drain(pods)
        words = ["Ready" if ready == "True" else "NotReady"] + (["SchedulingDisabled"] if unschedulable else [])
        return SchedulerNodeState(
            name=node.name,
            state=",".join(words),
            is_schedulable=not unschedulable,
            is_drained=unschedulable and running == 0,
            running=running,
            reason=(info.get("metadata", {}).get("annotations") or {}).get(REASON_ANNOTATION, ""),
        )

    def remove(self, node: SchedulerNode, *, reason: str) -> None:
        self._run("delete", "node", node.name, "--ignore-not-found")


__all__ = ["KubectlScheduler", "pods_blocking_drain"]
