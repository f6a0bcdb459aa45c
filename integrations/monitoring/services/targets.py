"""Which node and card an alert speaks about, from its labels.

Node: `Hostname` (dcgm-exporter), `instance` (every scrape; "host:9100", "host.domain:9400"), then `hostname`,
`host`, `node`, `nodename` - tried as given, without the port, and without the domain. Card: `UUID` / `uuid`
(identity, found anywhere in the fleet), else `pci_bus_id` or the `gpu` index within the node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cmdb.models import Accelerator, Node

NODE_LABELS = ("Hostname", "instance", "hostname", "host", "node", "nodename", "exported_instance")
CARD_LABELS = ("UUID", "uuid", "pci_bus_id", "gpu")


@dataclass(frozen=True)
class Target:
    node: Node | None
    accelerator: Accelerator | None
    reason: str = ""  # why it is unmatched (the node may be known while its card is not)

    @property
    def is_matched(self) -> bool:
        return self.node is not None and not self.reason


def host_candidates(value: str) -> list[str]:
    """'gpu01.dc1.example:9100' -> ['gpu01.dc1.example:9100', 'gpu01.dc1.example', 'gpu01']."""
    value = value.strip().lower()
    out = [value]
    if value.startswith("["):  # [ipv6]:port
        out.append(value[1:].split("]")[0])
    elif value.count(":") == 1:
        out.append(value.split(":")[0])
    for name in list(out):
        if not re.fullmatch(r"[\d.]+", name) and "." in name:
            out.append(name.split(".")[0])
    return list(dict.fromkeys(v for v in out if v))


def _bus(value: str) -> str:
    """PCI bus ids compare without the domain's width: '00000000:31:00.0' and '0000:31:00.0' are one slot."""
    value = value.strip().lower()
    parts = value.split(":")
    return ":".join(parts[-2:]) if len(parts) >= 2 else value


def node_find(labels: dict[str, str]) -> tuple[Node | None, list[str]]:
    names: list[str] = []
    for label in NODE_LABELS:
        if labels.get(label):
            names += host_candidates(labels[label])
    names = list(dict.fromkeys(names))
    if not names:
        return None, names
    # CMDB hostnames are lower case (ingestion and the writers fold them).
    found = {n.hostname.lower(): n for n in Node.objects.filter(hostname__in=names)}
    for name in names:  # the first label's most specific form wins
        if name in found:
            return found[name], names
    return None, names


def target_find(labels: dict[str, str], *, node_only: bool) -> Target:
    uuid = labels.get("UUID") or labels.get("uuid")
    card = None
    if uuid and not node_only:
        card = Accelerator.objects.select_related("node", "model").filter(uuid__iexact=uuid.strip()).first()
    node, names = node_find(labels)
    if card is not None and card.node_id is not None:
        return Target(node=card.node, accelerator=card)
    if node is None:
        if names:
            return Target(None, None, f"no node named {names[0]!r} in the CMDB")
        if uuid and not node_only:
            return Target(None, None, f"no card with UUID {uuid[:64]!r} in the CMDB")
        return Target(None, None, "the alert names no host (Hostname, instance, host label)")
    if node_only or not any(labels.get(label) for label in CARD_LABELS):
        return Target(node, None)
    if uuid:
        return Target(node, None, f"no card with UUID {uuid[:64]!r} in node {node.hostname}")
    cards = list(Accelerator.objects.select_related("model").filter(node=node))
    bus = labels.get("pci_bus_id")
    if bus:
        for c in cards:
            if c.pci_bus_id and _bus(c.pci_bus_id) == _bus(bus):
                return Target(node, c)
        return Target(node, None, f"no card at PCI {bus[:32]} in node {node.hostname}")
    index = labels.get("gpu", "").strip()
    for c in cards:
        if index.isdigit() and c.slot_index == int(index):
            return Target(node, c)
    return Target(node, None, f"no card in slot {index[:8]} of node {node.hostname}")
