"""Node topology: the one writer of NodeTopology, the expected topology of a server model, and departures.

A topology is the agent report's `topology` object ({"sources", "devices", "links"}, see docs/topology.md).
Ingestion hands each reported topology to `node_topology_record`, which writes the row only when its content
digest changed (the save goes through the change log like every tracked write). `topology_departures`
compares a node's topology with its server model's expected one: a pair whose link got worse (fewer NVLinks,
a GPU-NIC path that moved to SYS) or disappeared is a departure.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from ..models import Node, NodeTopology, ServerModel

DEVICE_KEYS = ("name", "type", "alias", "cpu_affinity", "numa_affinity", "gpu_numa_id", "numa_node", "nvlinks")
NVLINK_KEYS = ("link", "state", "speed_gbps")
LINK_KEYS = ("a", "b", "kind", "a_alias", "b_alias", "weight", "hops")
# How direct a path is, best first (nvidia-smi's legend order); NV# ranks by its NVLink count.
_RANK = {
    "X": -1,
    "XGMI": 0,
    "HCCS": 0,
    "HCCS_SW": 0,
    "SIO": 0,
    "PIX": 1,
    "PXB": 2,
    "PHB": 3,
    "PCIE": 3,
    "NODE": 4,
    "SYS": 5,
    "SOC": 5,
    "NA": 6,
}
_NV = re.compile(r"^NV(\d+)$")


def topology_canonical(raw: dict[str, Any]) -> dict[str, Any]:
    """The stored form of a reported topology: known keys only, in a fixed order (so equal content hashes
    equally whatever the agent version's key order)."""
    devices = [
        {key: _nvlinks(d[key]) if key == "nvlinks" else d.get(key) for key in DEVICE_KEYS if key in d}
        for d in raw.get("devices") or []
        if isinstance(d, dict) and d.get("name")
    ]
    links = [
        {key: link.get(key) for key in LINK_KEYS if key in link}
        for link in raw.get("links") or []
        if isinstance(link, dict) and link.get("a") and link.get("b")
    ]
    return {"sources": [str(s) for s in raw.get("sources") or []], "devices": devices, "links": links}


def _nvlinks(value: Any) -> list[dict[str, Any]]:
    """A GPU's NVLink states in the stored form (known keys, by link index)."""
    rows = [
        {key: row.get(key) for key in NVLINK_KEYS if key in row}
        for row in value or []
        if isinstance(row, dict) and isinstance(row.get("link"), int)
    ]
    return sorted(rows, key=lambda row: row["link"])


def topology_digest(topology: dict[str, Any]) -> str:
    blob = json.dumps([topology["sources"], topology["devices"], topology["links"]], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def node_topology_current(node: Node) -> NodeTopology | None:
    """The node's stored topology, from the select_related cache when the caller loaded it (no query then)."""
    try:
        return node.topology
    except NodeTopology.DoesNotExist:
        return None


def node_topology_record(node: Node, topology: dict[str, Any], current: NodeTopology | None) -> NodeTopology | None:
    """Store `topology` (canonical) for `node` unless `current` holds the same content. Returns the row when it
    was written (created or changed), None when nothing changed. The caller holds the node's lock; the save's
    change record carries the caller's change context (actor, source, correlation id)."""
    digest = topology_digest(topology)
    if current is not None and current.digest == digest:
        return None
    row = current if current is not None else NodeTopology(node=node)
    row.sources = topology["sources"]
    row.devices = topology["devices"]
    row.links = topology["links"]
    row.digest = digest
    row.save()
    node.topology = row
    return row


def server_model_expected_topology_set(server_model: ServerModel, topology: dict[str, Any]) -> ServerModel:
    """Make `topology` (any reported or stored topology) the expected one of `server_model`, recorded."""
    canonical = topology_canonical(topology)
    server_model.expected_topology = {"devices": canonical["devices"], "links": canonical["links"]}
    server_model.save(update_fields=["expected_topology", "version", "updated_at"])
    return server_model


@dataclass(frozen=True)
class Departure:
    a: str
    b: str
    expected: str
    actual: str | None

    @property
    def pair(self) -> str:
        return f"{self.a}-{self.b}"

    @property
    def message(self) -> str:
        got = self.actual if self.actual is not None else "no link reported"
        return f"topology departs from the server model: {self.pair} is {got}, expected {self.expected}"


def topology_kind_rank(kind: str) -> float:
    """How direct a link kind is, lower is better: NV# ranks before every PCIe kind and by its NVLink count
    (NV18 before NV12); an unknown code ranks last."""
    nv = _NV.match(kind)
    if nv:
        return -1 + 1 / (1 + int(nv.group(1)))
    return _RANK.get(kind, 7)


def _worse(actual: str, expected: str) -> bool:
    """Is `actual` a less direct path than `expected`? Unknown codes differ only when not equal."""
    if actual == expected:
        return False
    nv_a, nv_e = _NV.match(actual), _NV.match(expected)
    if nv_e:
        return not nv_a or int(nv_a.group(1)) < int(nv_e.group(1))
    if nv_a:
        return False  # an NVLink where PCIe was expected is no degradation
    if actual in _RANK and expected in _RANK:
        return _RANK[actual] > _RANK[expected]
    return True


def topology_shape_problem(value: Any) -> str:
    """Why `value` is no usable expected topology ('' when it is): links must name a, b and kind as text."""
    if value in ({}, None):
        return ""
    if not isinstance(value, dict) or not isinstance(value.get("links"), list):
        return 'expected {"links": [{"a": ..., "b": ..., "kind": ...}, ...]} or {}'
    for i, link in enumerate(value["links"]):
        if not isinstance(link, dict) or not all(isinstance(link.get(k), str) and link[k] for k in ("a", "b", "kind")):
            return f"links[{i}] needs text a, b and kind"
    if not isinstance(value.get("devices", []), list):
        return "devices must be a list"
    for i, device in enumerate(value.get("devices", [])):
        nvlinks = device.get("nvlinks", []) if isinstance(device, dict) else []
        if not isinstance(nvlinks, list) or not all(
            isinstance(row, dict) and isinstance(row.get("link"), int) and row.get("state") in ("active", "inactive")
            for row in nvlinks
        ):
            return f"devices[{i}].nvlinks needs {{link: integer, state: active or inactive}} items"
    return ""


def _pair_kinds(topology: dict[str, Any]) -> dict[frozenset[str], str]:
    return {frozenset((link["a"], link["b"])): link["kind"] for link in topology.get("links") or []}


def topology_departures(expected: dict[str, Any], actual: dict[str, Any]) -> list[Departure]:
    """The expected pairs the actual topology prints worse or not at all (in the expected order), then each NVLink
    the model expects active that the node reports inactive or not at all (pair `GPU3-NVLink2`). NVLinks are
    compared only for a GPU whose report carries them (`nvidia-smi nvlink -s` ran)."""
    if not expected or topology_shape_problem(expected) or not expected.get("links"):
        return []  # none, or malformed data (the API refuses it; an admin edit must not break ingestion)
    kinds = _pair_kinds(actual)
    departures = []
    for link in expected["links"]:
        got = kinds.get(frozenset((link["a"], link["b"])))
        if got is None or _worse(got, link["kind"]):
            departures.append(Departure(link["a"], link["b"], link["kind"], got))
    return departures + _nvlink_departures(expected, actual)


def _nvlink_states(topology: dict[str, Any]) -> dict[str, dict[int, str]]:
    return {
        d["name"]: {row["link"]: row.get("state") for row in _nvlinks(d["nvlinks"])}
        for d in topology.get("devices") or []
        if isinstance(d, dict) and d.get("name") and isinstance(d.get("nvlinks"), list)
    }


def _nvlink_departures(expected: dict[str, Any], actual: dict[str, Any]) -> list[Departure]:
    seen = _nvlink_states(actual)
    departures = []
    for device, links in _nvlink_states(expected).items():
        if device not in seen:
            continue  # no nvlink status for this GPU (tool absent or failed): nothing to compare
        for index, state in links.items():
            got = seen[device].get(index)
            if state == "active" and got != "active":
                departures.append(Departure(device, f"NVLink{index}", "active", got))
    return departures


@dataclass(frozen=True)
class TopologyCheck:
    """The burn-in gate's reading of a node's topology: `problems` (empty: it passes) name each departing pair;
    `note` says why nothing was compared (the server model expects no topology)."""

    problems: list[str]
    note: str = ""

    @property
    def passed(self) -> bool:
        return not self.problems


def node_topology_check(node: Node) -> TopologyCheck:
    """Does the node's last reported topology match its server model's expected one? The gate of the rollout's
    verify and provisioning's burn-in before a node returns to service.

    No expected topology on the model (none learned or set): passes, with a note saying it was not checked - a
    model nobody described cannot be departed from. An expected topology and no reported one (no topology tool on
    the node, or it never parsed): fails, since nothing shows the links are there. Otherwise each departing pair
    is a problem naming it (expected vs seen). One query at most (none when the node came with
    select_related("server_model", "topology"))."""
    model = node.server_model
    expected = (model.expected_topology if model else None) or {}
    if not expected.get("links") or topology_shape_problem(expected):
        name = model.name if model else "no server model"
        return TopologyCheck([], f"topology not checked: {name} has no expected topology")
    current = node_topology_current(node)
    if current is None:
        return TopologyCheck([f"no topology reported (the {model.name} model expects {len(expected['links'])} links)"])
    departures = topology_departures(expected, {"links": current.links, "devices": current.devices})
    if not departures:
        return TopologyCheck([])
    pairs = [f"{d.pair} is {d.actual or 'no link reported'}, expected {d.expected}" for d in departures[:8]]
    more = f" and {len(departures) - 8} more pairs" if len(departures) > 8 else ""
    return TopologyCheck([f"topology departs from the server model: {'; '.join(pairs)}{more}"])


__all__ = [
    "Departure",
    "TopologyCheck",
    "node_topology_check",
    "node_topology_current",
    "node_topology_record",
    "server_model_expected_topology_set",
    "topology_canonical",
    "topology_departures",
    "topology_digest",
    "topology_kind_rank",
    "topology_shape_problem",
]
