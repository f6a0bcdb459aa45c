"""A Kubernetes API server on loopback, in a thread, implementing the few endpoints gpuops uses with the real
API's semantics and bodies: node GET / PATCH (merge and strategic-merge patches; a JSON Patch must be a list) /
DELETE, pod LIST by `spec.nodeName` field selector, and the Eviction subresource (201, 404 for a pod that is
gone, 429 with the API's disruption-budget Status while a budget holds the pod). Bearer tokens are checked.

Node objects come from real `kubectl get node -o json` captures; pods are built like the API returns them.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.integrations.notifiers.hooks_peer import serving

TOKEN = "gpuops-test-token"


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    """The API's `Status` object for an error."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def pod(name: str, node: str, *, namespace: str = "default", owner: str = "ReplicaSet", phase: str = "Running") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner", "uid": "o"}],
        },
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
        "status": {"phase": phase},
    }


def field_selector_match(selector: str, obj: dict[str, Any]) -> bool:
    """A field selector as the API server applies it: comma-separated `path=value` / `path!=value` terms, all of
    which must hold."""
    for term in filter(None, selector.split(",")):
        negate = "!=" in term
        path, value = term.split("!=" if negate else "=", 1)
        found: Any = obj
        for part in path.split("."):
            found = found.get(part, "") if isinstance(found, dict) else ""
        if (str(found) == value) == negate:
            return False
    return True


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (what a strategic merge patch does on the fields touched here)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


@dataclass
class KubeApi:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: list[dict[str, Any]] = field(default_factory=list)
    # Pod name -> how many more evictions its PodDisruptionBudget refuses (a number, or -1 for always).
    budget_refusals: dict[str, int] = field(default_factory=dict)
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, content type)
    fail_next: list[int] = field(default_factory=list)  # statuses to answer the next requests with
    url: str = ""

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        return [p for p in self.pods if p["spec"].get("nodeName") == node]

    # --- request handling --------------------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, str], headers: dict[str, str], body: bytes):
        self.requests.append((method, path, headers.get("content-type", "")))
        if headers.get("authorization") != f"Bearer {TOKEN}":
            return 401, status_body(401, "Unauthorized", "Unauthorized")
        if self.fail_next:
            code = self.fail_next.pop(0)
            return code, status_body(code, "ServiceUnavailable", "the server is currently unable to handle the request")
        if m := re.fullmatch(r"/api/v1/nodes/([^/]+)", path):
            return self._node(method, m.group(1), headers, body)
        if path == "/api/v1/nodes" and method == "GET":
            items = list(self.nodes.values())
            return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}
        if path == "/api/v1/pods" and method == "GET":
            items = [p for p in self.pods if field_selector_match(query.get("fieldSelector", ""), p)]
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}
        if (m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction", path)) and method == "POST":
            return self._evict(m.group(1), m.group(2), body)
        return 404, status_body(404, "NotFound", "the server could not find the requested resource")

    def _node(self, method: str, name: str, headers: dict[str, str], body: bytes):
        node = self.nodes.get(name)
        if node is None:
            return 404, status_body(404, "NotFound", f'nodes "{name}" not found', name=name, kind="nodes")
        if method == "GET":
            return 200, node
        if method == "DELETE":
            del self.nodes[name]
            return 200, status_body(200, "", "") | {"status": "Success"}
        if method == "PATCH":
            kind = headers.get("content-type", "")
            patch = json.loads(body or b"null")
            if kind == "application/json-patch+json" and not isinstance(patch, list):
                return 400, status_body(
                    400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
                )
            if kind not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                return 415, status_body(
                    415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {kind}"
                )
            self.nodes[name] = merge_patch(node, patch)
            return 200, self.nodes[name]
        return 405, status_body(
            405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
        )

    def _evict(self, namespace: str, name: str, body: bytes):
        eviction = json.loads(body or b"{}")
        if eviction.get("kind") != "Eviction" or eviction.get("metadata", {}).get("name") != name:
            return 400, status_body(400, "BadRequest", "name in URL does not match name in Eviction object")
        target = next(
            (p for p in self.pods if p["metadata"]["name"] == name and p["metadata"]["namespace"] == namespace), None
        )
        if target is None:
            return 404, status_body(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods")
        left = self.budget_refusals.get(name, 0)
        if left:
            if left > 0:
                self.budget_refusals[name] = left - 1
            return 429, status_body(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                causes=[
                    {
                        "reason": "DisruptionBudget",
                        "message": "The disruption budget train-pdb needs 2 healthy pods and has 2 currently",
                    }
                ],
            )
        self.pods.remove(target)
        return 201, eviction


@contextmanager
def kube_api(api: KubeApi) -> Iterator[KubeApi]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self, method: str) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            status, answer = api.handle(
                method,
                parts.path,
                {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
                {k.lower(): v for k, v in self.headers.items()},
                self.rfile.read(length),
            )
            raw = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        api.url = url
        yield api


def kubeconfig_write(path: Any, url: str, *, token: str = TOKEN, context: str = "gpu-prod") -> str:
    """A kubeconfig naming the loopback API server and a bearer token, as `kubectl config` writes one."""
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "gpu", "cluster": {"server": url}}],
            "users": [{"name": "gpuops", "user": {"token": token}}],
            "contexts": [{"name": context, "context": {"cluster": "gpu", "user": "gpuops"}}],
            "current-context": context,
        }
    )
    path.write_text(text)
    return str(path)
