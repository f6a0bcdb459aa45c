"""Cabling validation rules: hand-written cases and a Hypothesis property over generated rail-optimised fabrics."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from integrations.switches.cabling import (
    CablingSummary,
    Endpoint,
    FindingKind,
    Inventory,
    Observation,
    PlannedLink,
    PortRef,
    SwitchInfo,
    port_key,
    validate_cabling,
)


def _hca(node: int, rail: int) -> Endpoint:
    return Endpoint(
        device=f"gpu{node:03d}",
        port=f"mlx5_{rail}/1",
        hca=f"mlx5_{rail}",
        rail=rail,
        macs=frozenset({f"02:00:00:{node // 256:02x}:{node % 256:02x}:{rail:02x}"}),
        guids=frozenset({f"0x0002c9030000{node:02x}{rail:02x}"}),
    )


def _leaf(rail: int) -> SwitchInfo:
    return SwitchInfo(name=f"su1-leaf{rail}", rail=rail, scalable_unit=1)


def _observe(switch: str, port: str, ep: Endpoint, style: int) -> Observation:
    """The same neighbour as different agents report it: port MAC (lldpd default), host + ifname, IB GUID."""
    if style == 0:
        return Observation(switch, port, remote_chassis_id=next(iter(ep.macs)), remote_port=next(iter(ep.macs)))
    if style == 1:
        return Observation(
            switch,
            port,
            remote_chassis_id="02:ff:ff:ff:ff:ff",
            remote_port=ep.port,
            remote_system=f"{ep.device}.cluster.example",
        )
    return Observation(switch, port, remote_port_guid=next(iter(ep.guids)), remote_port="1")


def test_ok_missing_miswired_swap_unexpected_unknown():
    a, b, c = _hca(1, 0), _hca(2, 0), _hca(3, 0)
    spare = Endpoint("gpu009", "eth9", macs=frozenset({"02:aa:00:00:00:09"}))
    planned = [
        PlannedLink("su1-leaf0", "Ethernet1/1", a),
        PlannedLink("su1-leaf0", "Ethernet1/2", b),
        PlannedLink("su1-leaf0", "Ethernet1/3", c),
    ]
    observed = [
        _observe("su1-leaf0", "Ethernet1/1", b, 0),
        _observe("su1-leaf0", "Ethernet1/2", a, 1),  # crossed pair
        _observe("su1-leaf0", "Ethernet1/5", spare, 0),
        Observation("su1-leaf0", "Ethernet1/6", remote_chassis_id="de:ad:be:ef:00:01", remote_port="eth0"),
    ]
    findings = validate_cabling(
        planned=planned,
        observed=observed,
        inventory=Inventory([a, b, c, spare]),
        switches={"su1-leaf0": _leaf(0)},
        rail_optimized=True,
    )
    by_port = {f.port: f for f in findings}
    assert by_port["Ethernet1/1"].kind == FindingKind.MISWIRED
    assert by_port["Ethernet1/1"].swap_partner == PortRef("su1-leaf0", "Ethernet1/2")
    assert "expected gpu001:mlx5_0/1, found gpu002:mlx5_0/1" in by_port["Ethernet1/1"].message
    assert by_port["Ethernet1/2"].swap_partner == PortRef("su1-leaf0", "Ethernet1/1")
    assert by_port["Ethernet1/3"].kind == FindingKind.MISSING
    assert by_port["Ethernet1/5"].kind == FindingKind.UNEXPECTED
    assert by_port["Ethernet1/6"].kind == FindingKind.UNKNOWN_NEIGHBOR
    assert CablingSummary.of(findings).counts["miswired"] == 2


def test_rail_violation_names_node_hca_and_leaf():
    node = _hca(7, 3)
    findings = validate_cabling(
        planned=[PlannedLink("su1-leaf5", "p7", node)],
        observed=[_observe("su1-leaf5", "p7", node, 0)],
        inventory=Inventory([node]),
        switches={"su1-leaf5": _leaf(5)},
        rail_optimized=True,
    )
    (finding,) = findings
    assert finding.kind == FindingKind.OK and finding.is_problem
    assert finding.rail_violation == "rail violation: node gpu007 HCA mlx5_3 (rail 3) lands on leaf su1-leaf5 (rail 5)"
    # The same cabling on a fabric that is not rail-optimised is fine.
    (plain,) = validate_cabling(
        planned=[PlannedLink("su1-leaf5", "p7", node)],
        observed=[_observe("su1-leaf5", "p7", node, 0)],
        inventory=Inventory([node]),
        switches={"su1-leaf5": _leaf(5)},
        rail_optimized=False,
    )
    assert not plain.is_problem


def test_unpolled_switches_are_not_reported_missing():
    node = _hca(1, 0)
    findings = validate_cabling(
        planned=[PlannedLink("su1-leaf0", "p1", node)], observed=[], inventory=Inventory([node]), polled_switches=set()
    )
    assert findings == []


def test_port_spellings_match():
    assert port_key("Ethernet1/1") == port_key("Eth1/1") == port_key("Et1/1") == port_key("eth 1/1")
    assert port_key("TenGigabitEthernet1/3") == port_key("Te1/3")
    switch_peer = Endpoint("spine1", "Ethernet1/49", kind="switch")
    obs = Observation("leaf1", "Ethernet1/49", remote_system="SPINE1.example.net", remote_port="Eth1/49")
    assert Inventory([switch_peer]).resolve(obs) == switch_peer


# --- property: generated fabrics with injected errors ----------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    nodes: int
    rails: int
    swaps: list[tuple[int, int]]  # indexes into the planned links
    missing: list[int]
    unexpected: int
    unknown: int
    styles: list[int]


@st.composite
def scenarios(draw) -> Scenario:
    nodes = draw(st.integers(min_value=1, max_value=32))
    rails = draw(st.integers(min_value=1, max_value=8))
    count = nodes * rails
    order = draw(st.permutations(range(count)))
    n_swaps = draw(st.integers(min_value=0, max_value=min(6, count // 2)))
    swaps = [(order[2 * i], order[2 * i + 1]) for i in range(n_swaps)]
    rest = order[2 * n_swaps :]
    n_missing = draw(st.integers(min_value=0, max_value=min(6, len(rest))))
    return Scenario(
        nodes=nodes,
        rails=rails,
        swaps=swaps,
        missing=list(rest[:n_missing]),
        unexpected=draw(st.integers(min_value=0, max_value=4)),
        unknown=draw(st.integers(min_value=0, max_value=4)),
        styles=draw(st.lists(st.integers(min_value=0, max_value=2), min_size=count, max_size=count)),
    )


# database=None: no .hypothesis/ folder in the work tree; failures print their reproducing example anyway.
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_every_injected_error_is_reported_exactly_once(s: Scenario):
    # Node n, HCA r -> rail leaf r, port p<n>: the rail-optimised plan for one scalable unit.
    links = [PlannedLink(f"su1-leaf{r}", f"p{n}", _hca(n, r)) for n in range(s.nodes) for r in range(s.rails)]
    switches = {f"su1-leaf{r}": _leaf(r) for r in range(s.rails)}
    seen_peer = {i: link.peer for i, link in enumerate(links)}
    for i, j in s.swaps:
        seen_peer[i], seen_peer[j] = links[j].peer, links[i].peer
    for i in s.missing:
        del seen_peer[i]
    observed = [_observe(links[i].switch, links[i].port, peer, s.styles[i]) for i, peer in seen_peer.items()]
    spares = [
        Endpoint(f"spare{k:02d}", "eth0", macs=frozenset({f"02:bb:00:00:00:{k:02x}"})) for k in range(s.unexpected)
    ]
    free_ports = [(f"su1-leaf{k % s.rails}", f"p{s.nodes + k}") for k in range(s.unexpected + s.unknown)]
    for k, spare in enumerate(spares):
        observed.append(_observe(*free_ports[k], spare, 0))
    for k in range(s.unknown):
        switch, port = free_ports[s.unexpected + k]
        observed.append(Observation(switch, port, remote_chassis_id=f"0e:00:00:00:00:{k:02x}", remote_port="eth1"))

    findings = validate_cabling(
        planned=links,
        observed=observed,
        inventory=Inventory([link.peer for link in links] + spares),
        switches=switches,
        rail_optimized=True,
    )

    want: set[tuple] = set()
    for i, j in s.swaps:
        want.add((FindingKind.MISWIRED, links[i].switch, links[i].port, PortRef(links[j].switch, links[j].port)))
        want.add((FindingKind.MISWIRED, links[j].switch, links[j].port, PortRef(links[i].switch, links[i].port)))
    want |= {(FindingKind.MISSING, links[i].switch, links[i].port, None) for i in s.missing}
    want |= {(FindingKind.UNEXPECTED, sw, port, None) for sw, port in free_ports[: s.unexpected]}
    want |= {(FindingKind.UNKNOWN_NEIGHBOR, sw, port, None) for sw, port in free_ports[s.unexpected :]}

    problems = [f for f in findings if f.is_problem]
    got = [(f.kind, f.switch, f.port, f.swap_partner) for f in problems]
    assert len(got) == len(set(got)), "a port was reported twice"
    assert set(got) == want
    # A crossing between two rails is also a rail violation, carried on the miswired finding (not a new one).
    for f in problems:
        crosses_rails = f.kind == FindingKind.MISWIRED and f.found.rail != f.expected.rail
        assert bool(f.rail_violation) == crosses_rails, f.message
    assert len(findings) == len(links) + s.unexpected + s.unknown
