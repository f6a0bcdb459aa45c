"""Reads of the network pages (a switch, a fabric), permission-scoped at the source.

The cabling comparison (planned vs observed) is integrations.switches' own (`fabric_cabling_overview`), the same
the fabric list and the cabling page read. A peer the user may not see (a node of another site on a port of
this switch, an observation naming it) is left out, not named. Fixed query counts whatever the number of
ports, links or nodes.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q

from cmdb.models import Fabric, Link, Node, Switch, SwitchPort
from cmdb.permissions import restrict
from integrations.switches.api import KIND_FILTERS
from integrations.switches.cabling import Finding, device_key, port_key
from integrations.switches.cabling_service import CablingOverview, fabric_cabling_overview
from integrations.switches.models import ObservationSource, ObservedLink
from integrations.switches.views import TONES

from .drawing import FabricDiagram, FabricNode, FabricSwitch, cable_lines, fabric_diagram, short_labels

__all__ = ["KIND_FILTERS", "fabric_get", "fabric_overview", "switch_get", "switch_overview"]


def natural_key(text: str) -> tuple:
    """Port names in the order a person counts them: p2 before p10, Ethernet1/2 before Ethernet1/10."""
    return tuple(int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text))


# --- switch -------------------------------------------------------------------------------------------------------


def switch_get(user: AbstractBaseUser, name: str) -> Switch | None:
    qs = Switch.objects.select_related("vendor", "fabric", "site", "rack__room")
    return restrict(qs, user, "view").filter(name=name).first()


@dataclass
class PortRow:
    port: SwitchPort
    peer_kind: str = ""  # node | switch | "" (nothing planned, or a peer the user may not see)
    peer_device: str = ""
    peer_port: str = ""
    peer_url: str = ""
    link: Link | None = None
    finding: Finding | None = None
    observed: list[ObservedLink] = field(default_factory=list)

    @property
    def finding_tone(self) -> str:
        return TONES.get(self.finding.kind.value, "new") if self.finding else ""


def _visible_names(user: AbstractBaseUser, names: set[str]) -> tuple[set[str], set[str]]:
    """(visible, hidden) among the CMDB node host names and switch names in `names`; names the CMDB does not
    know are in neither (an LLDP neighbour inventory has no record of is an observation, not an object)."""
    if not names:
        return set(), set()
    known = set(Node.objects.filter(hostname__in=names).values_list("hostname", flat=True))
    known |= set(Switch.objects.filter(name__in=names).values_list("name", flat=True))
    seen = set(restrict(Node.objects.filter(hostname__in=known), user, "view").values_list("hostname", flat=True))
    seen |= set(restrict(Switch.objects.filter(name__in=known), user, "view").values_list("name", flat=True))
    return seen, known - seen


def _observation_names(row: ObservedLink) -> set[str]:
    names = {row.remote_system, row.local_device}
    if row.node_id:
        names.add(row.node.hostname)
    if row.nic_port_id:
        names.add(row.nic_port.nic.node.hostname)
    return {n for n in names if n} | {device_key(n) for n in names if n}


def switch_overview(user: AbstractBaseUser, switch: Switch) -> dict[str, Any]:
    """Facts, every port with its planned peer, its cabling verdict and what was observed on it (LLDP,
    ibnetdiscover, host LLDP), and the neighbour list."""
    ports = sorted(
        SwitchPort.objects.filter(switch=switch).select_related(
            "link_as_b__a_nic_port__nic__node",
            "link_as_b__a_switch_port__switch",
            "link_as_a__b_switch_port__switch",
        ),
        key=lambda p: natural_key(p.name),
    )
    observed = sorted(
        ObservedLink.objects.filter(switch=switch).select_related("nic_port__nic__node", "node", "switch_port"),
        key=lambda o: (natural_key(o.switch_port.name if o.switch_port_id else o.local_port), o.pk),
    )
    names: set[str] = set()
    rows: list[PortRow] = []
    for port in ports:
        row = PortRow(port=port)
        link_b = getattr(port, "link_as_b", None)
        link_a = getattr(port, "link_as_a", None)
        if link_b is not None:
            row.link = link_b
            if link_b.a_nic_port_id:
                nic_port = link_b.a_nic_port
                row.peer_kind, row.peer_device = "node", nic_port.nic.node.hostname
                row.peer_port = f"{nic_port.nic.name}/{nic_port.name}"
            else:
                row.peer_kind, row.peer_device = "switch", link_b.a_switch_port.switch.name
                row.peer_port = link_b.a_switch_port.name
        elif link_a is not None:
            row.link = link_a
            row.peer_kind, row.peer_device = "switch", link_a.b_switch_port.switch.name
            row.peer_port = link_a.b_switch_port.name
        if row.peer_device:
            names.add(row.peer_device)
        rows.append(row)
    for obs in observed:
        names |= _observation_names(obs)
    visible, hidden = _visible_names(user, names)
    for row in rows:
        if row.peer_device and row.peer_device not in visible:
            row.peer_kind = row.peer_device = row.peer_port = ""
            row.link = None
        elif row.peer_device:
            row.peer_url = f"/{'nodes' if row.peer_kind == 'node' else 'switches'}/{row.peer_device}/"
    neighbours = [o for o in observed if not (_observation_names(o) & hidden)]
    by_port = {port_key(r.port.name): r for r in rows}
    by_id = {r.port.pk: r for r in rows}
    unmatched: list[ObservedLink] = []
    for obs in neighbours:
        if obs.switch_port_id in by_id:
            by_id[obs.switch_port_id].observed.append(obs)
        elif obs.source != ObservationSource.HOST_LLDP and port_key(obs.local_port) in by_port:
            by_port[port_key(obs.local_port)].observed.append(obs)
        else:
            unmatched.append(obs)

    cabling: CablingOverview | None = None
    fabric = None
    if switch.fabric_id:
        fabric = restrict(Fabric.objects.filter(pk=switch.fabric_id), user, "view").first()
    if fabric is not None:
        cabling = fabric_cabling_overview(fabric, user)
        mine = {port_key(f.port): f for f in cabling.findings if f.switch == switch.name}
        for row in rows:
            row.finding = mine.pop(port_key(row.port.name), None)
    states = Counter(r.port.oper_state for r in rows)
    return {
        "ports": rows,
        "neighbours": neighbours,
        "unmatched": unmatched,
        "fabric": fabric,
        "oper_states": sorted(states.items()),
        "planned_count": sum(1 for r in rows if r.link is not None),
        "problem_count": sum(1 for r in rows if r.finding is not None and r.finding.is_problem),
        "has_cabling": cabling is not None,
    }


# --- fabric -------------------------------------------------------------------------------------------------------


def fabric_get(user: AbstractBaseUser, fabric_id: int) -> Fabric | None:
    return restrict(Fabric.objects.select_related("site"), user, "view").filter(pk=fabric_id).first()


def _node_groups(nodes: list[Node], node_leaves: dict[str, Counter]) -> dict[str, str]:
    """Each node's group in the picture: the scalable unit of the leaves it is planned to (the most common one),
    else its rack, else 'no rack'."""
    groups: dict[str, str] = {}
    for n in nodes:
        sus = node_leaves.get(n.hostname)
        if sus:
            su = sus.most_common(1)[0][0]
            groups[n.hostname] = f"SU {su}"
        elif n.rack_id:
            groups[n.hostname] = f"rack {n.rack.name}"
        else:
            groups[n.hostname] = "no rack"
    return groups


def fabric_overview(user: AbstractBaseUser, fabric: Fabric) -> dict[str, Any]:
    """The fabric's picture (spines, leaves by rail, nodes by scalable unit or rack, a line per cable coloured by
    the cabling verdict) and the cabling findings beside it."""
    cabling = fabric_cabling_overview(fabric, user)
    switches = list(restrict(Switch.objects.filter(fabric=fabric), user, "view").order_by("name"))
    links = list(
        restrict(Link.objects.filter(fabric=fabric), user, "view").select_related(
            "a_nic_port__nic__node", "a_switch_port__switch", "b_switch_port__switch"
        )
    )
    # Nodes drawn: those planned on the fabric and those the switches see where nothing of theirs is planned.
    seen_hosts = {f.found.device for f in cabling.findings if f.found is not None and f.found.kind == "node"}
    on_fabric = Node.objects.filter(Q(nics__ports__link__fabric=fabric) | Q(hostname__in=seen_hosts)).distinct()
    nodes = list(restrict(on_fabric, user, "view").select_related("rack").order_by("hostname"))
    visible_nodes = {n.hostname for n in nodes}
    visible_switches = {s.name for s in switches}
    extra_switch_ids = {
        sp.switch_id for link in links for sp in (link.a_switch_port, link.b_switch_port) if sp is not None
    } - {s.pk for s in switches}
    extra = list(restrict(Switch.objects.filter(pk__in=extra_switch_ids), user, "view")) if extra_switch_ids else []
    visible_switches |= {s.name for s in extra}
    su_of_leaf = {s.name: s.scalable_unit for s in switches if s.scalable_unit is not None}

    planned: list[tuple[str, str, str, str]] = []
    shown_links = 0
    node_leaves: dict[str, Counter] = defaultdict(Counter)
    for link in links:
        b = link.b_switch_port
        if link.a_nic_port_id:
            a_device = link.a_nic_port.nic.node.hostname
            a_label = f"{link.a_nic_port.nic.name}/{link.a_nic_port.name}"
            if b.switch.name in su_of_leaf:
                node_leaves[a_device][su_of_leaf[b.switch.name]] += 1
        else:
            a_device, a_label = link.a_switch_port.switch.name, link.a_switch_port.name
        if b.switch.name in visible_switches and (a_device in visible_nodes or a_device in visible_switches):
            planned.append((a_device, b.switch.name, b.name, a_label))
            shown_links += 1
            if link.a_switch_port_id:
                planned.append((b.switch.name, a_device, link.a_switch_port.name, b.name))
    groups = _node_groups(nodes, node_leaves)
    diagram: FabricDiagram = fabric_diagram(
        [
            FabricSwitch(s.name, s.role, s.rail, s.scalable_unit, url=f"/switches/{s.name}/")
            for s in [*switches, *extra]
        ],
        [FabricNode(n.hostname, groups[n.hostname], tone=n.health, url=f"/nodes/{n.hostname}/") for n in nodes],
        cable_lines(planned, cabling.findings),
    )
    problems = cabling.problems
    short = short_labels(sorted({f.switch for f in problems} | visible_switches))
    return {
        "diagram": diagram,
        "cabling": cabling,
        "summary": cabling.summary,
        "problem_rows": [{"f": f, "tone": TONES[f.kind.value], "switch": short[f.switch]} for f in problems],
        "problem_count": cabling.problem_count,
        "switch_count": len(switches),
        "node_count": len(nodes),
        "link_count": shown_links,
    }
