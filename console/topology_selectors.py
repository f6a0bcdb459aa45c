"""Reads of the node page's topology panel: the node's reported topology as a devices x devices matrix, each
device's CPU / NUMA affinity and nearest NIC, and the departures from its server model's expected topology.

The topology row comes with one query (none when the caller loaded it with the node through
select_related("topology")); the server model's expected topology is on the node's select_related server model.
The matrix is built in Python, so the page's query count does not depend on the number of devices.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from cmdb.models import Node
from cmdb.services.topology import Departure, node_topology_current, topology_departures, topology_kind_rank

__all__ = ["TopologyCell", "TopologyMatrix", "TopologyRow", "node_topology_matrix"]

# Affinity keys of a reported device -> column titles, in the order nvidia-smi prints them.
AFFINITY_COLUMNS = (
    ("cpu_affinity", "CPU affinity"),
    ("numa_affinity", "NUMA affinity"),
    ("gpu_numa_id", "GPU NUMA ID"),
    ("numa_node", "NUMA node"),
)


@dataclass(frozen=True)
class TopologyCell:
    """One matrix cell: the kind seen for the pair (blank when the tool printed none), its tone class, and, when
    the pair departs from the model, the expected kind and the explanation."""

    kind: str
    tone: str
    expected: str = ""
    departure: Departure | None = None

    @property
    def title(self) -> str:
        if self.departure is not None:
            return f"{self.departure.pair}: expected {self.departure.expected}, seen {self.kind or 'no link'}"
        if self.expected and self.expected != self.kind:
            return f"expected {self.expected}, seen {self.kind} (no worse)"
        return ""


@dataclass
class TopologyRow:
    device: dict[str, Any]
    cells: list[TopologyCell]
    affinity: list[str]
    nearest_nics: list[str] = field(default_factory=list)
    nearest_kind: str = ""
    departs: bool = False
    # `nvidia-smi nvlink -s`: "18/18" (active of all), the inactive link numbers, those the model expects up.
    nvlinks: str = ""
    nvlinks_inactive: list[int] = field(default_factory=list)
    nvlinks_departing: list[int] = field(default_factory=list)


@dataclass
class TopologyMatrix:
    """What the panel shows; `departures` includes pairs whose devices the node no longer reports at all."""

    sources: list[str]
    columns: list[dict[str, Any]]
    rows: list[TopologyRow]
    affinity_titles: list[str]
    has_nics: bool
    has_nvlinks: bool
    has_expected: bool
    departures: list[Departure]
    missing_devices: list[str]
    updated_at: dt.datetime
    api_url: str


def _tone(kind: str) -> str:
    if kind == "X":
        return "k-self"
    if not kind:
        return "k-none"
    rank = topology_kind_rank(kind)
    if rank <= 0:
        return "k-direct"  # NVLink, XGMI, HCCS: the accelerator fabric
    if rank <= 2:
        return "k-pix"  # through PCIe switches only
    if rank <= 4:
        return "k-node"  # through a host bridge, within the NUMA node
    return "k-sys"  # across the CPU interconnect, or unknown


def _alias_label(device: dict[str, Any]) -> str:
    return f"{device['name']} ({device['alias']})" if device.get("alias") else device["name"]


def node_topology_matrix(node: Node) -> TopologyMatrix | None:
    """The node's last reported topology as a matrix with its departures, or None when it reported none."""
    current = node_topology_current(node)
    if current is None:
        return None
    model = node.server_model
    expected = (model.expected_topology if model else None) or {}
    departures = topology_departures(expected, {"links": current.links, "devices": current.devices})
    departing = {frozenset((d.a, d.b)): d for d in departures}
    seen = {frozenset((link["a"], link["b"])): link["kind"] for link in current.links}
    wanted = {frozenset((link["a"], link["b"])): link["kind"] for link in expected.get("links") or []}
    devices = [d for d in current.devices if d.get("name")]
    names = {d["name"] for d in devices}
    nics = [d for d in devices if d.get("type") == "nic"]
    affinity = [(key, title) for key, title in AFFINITY_COLUMNS if any(key in d for d in devices)]
    rows = []
    for device in devices:
        cells = []
        for other in devices:
            pair = frozenset((device["name"], other["name"]))
            kind = "X" if other is device else seen.get(pair, "")
            departure = departing.get(pair)
            cells.append(
                TopologyCell(
                    kind=kind,
                    tone="departs" if departure else _tone(kind),
                    expected=wanted.get(pair, ""),
                    departure=departure,
                )
            )
        down = sorted(int(d.b[6:]) for d in departures if d.a == device["name"] and d.b.startswith("NVLink"))
        row = TopologyRow(
            device=device,
            cells=cells,
            affinity=[str(device[key]) if device.get(key) is not None else "" for key, _ in affinity],
            departs=any(c.departure for c in cells) or bool(down),
            nvlinks_departing=down,
        )
        if isinstance(device.get("nvlinks"), list) and device["nvlinks"]:
            states = device["nvlinks"]
            active = sum(1 for s in states if s.get("state") == "active")
            row.nvlinks = f"{active}/{len(states)}"  # active of all
            row.nvlinks_inactive = [s["link"] for s in states if s.get("state") != "active"]
        if device.get("type") != "nic" and nics:
            by_rank: dict[float, list[str]] = {}
            for nic in nics:
                kind = seen.get(frozenset((device["name"], nic["name"])))
                if kind:
                    by_rank.setdefault(topology_kind_rank(kind), []).append(nic.get("alias") or nic["name"])
            if by_rank:
                best = min(by_rank)
                first = next(n for n in nics if (n.get("alias") or n["name"]) == by_rank[best][0])
                row.nearest_kind = seen[frozenset((device["name"], first["name"]))]
                # Every NIC across the CPUs: no NIC is near; naming them all would say nothing.
                row.nearest_nics = by_rank[best] if best < topology_kind_rank("SYS") else []
        rows.append(row)
    expected_names = {name for link in expected.get("links") or [] for name in (link["a"], link["b"])}
    return TopologyMatrix(
        sources=list(current.sources),
        columns=[{**d, "label": _alias_label(d)} for d in devices],
        rows=rows,
        affinity_titles=[title for _, title in affinity],
        has_nics=bool(nics),
        has_nvlinks=any(d.get("nvlinks") for d in devices),
        has_expected=bool(expected.get("links")),
        departures=departures,
        missing_devices=sorted(expected_names - names),
        updated_at=current.updated_at,
        api_url=f"/api/cmdb/nodes/{node.pk}/topology/",
    )
