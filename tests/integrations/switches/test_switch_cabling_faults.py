"""Findings grouped into cabling faults, one repair ticket each: a crossed pair is one swap, a cable in the wrong
port one move, anything else alone; unknown neighbours and planning mistakes are not cabling faults."""

from __future__ import annotations

from integrations.switches.cabling import Endpoint, Inventory, Observation, PlannedLink, SwitchInfo, validate_cabling
from integrations.switches.cabling_faults import FaultKind, cabling_faults


def _hca(node: int, rail: int) -> Endpoint:
    return Endpoint(
        device=f"gpu{node:03d}",
        port=f"mlx5_{rail}/1",
        hca=f"mlx5_{rail}",
        rail=rail,
        macs=frozenset({f"02:00:00:00:{node:02x}:{rail:02x}"}),
    )


def _sees(switch: str, port: str, ep: Endpoint) -> Observation:
    mac = next(iter(ep.macs))
    return Observation(switch, port, remote_chassis_id=mac, remote_port=mac)


def _faults(planned, observed, endpoints, *, rail_optimized=False):
    findings = validate_cabling(
        planned=planned,
        observed=observed,
        inventory=Inventory(endpoints),
        switches={f"leaf{r}": SwitchInfo(f"leaf{r}", rail=r) for r in range(4)},
        rail_optimized=rail_optimized,
    )
    return findings, cabling_faults(findings)


def test_a_crossed_pair_is_one_swap():
    a, b = _hca(1, 0), _hca(2, 0)
    planned = [PlannedLink("leaf0", "e1", a), PlannedLink("leaf0", "e2", b)]
    findings, faults = _faults(planned, [_sees("leaf0", "e1", b), _sees("leaf0", "e2", a)], [a, b])
    assert sum(f.is_problem for f in findings) == 2
    (fault,) = faults
    assert fault.kind == FaultKind.CROSSED and fault.key == "leaf0:e1 leaf0:e2"
    assert fault.title == "Crossed cables on leaf0:e1 and leaf0:e2"
    assert fault.nodes == ["gpu001", "gpu002"]
    assert fault.instructions == [
        "Swap the cables on leaf0:e1 and leaf0:e2.",
        "- leaf0:e1 must connect gpu001:mlx5_0/1; it connects gpu002:mlx5_0/1.",
        "- leaf0:e2 must connect gpu002:mlx5_0/1; it connects gpu001:mlx5_0/1.",
    ]


def test_a_cable_in_the_wrong_port_is_one_move_and_the_rest_stand_alone():
    a, b, c, d = _hca(1, 0), _hca(2, 0), _hca(3, 0), _hca(4, 0)
    planned = [PlannedLink("leaf0", "e1", a), PlannedLink("leaf0", "e2", b), PlannedLink("leaf0", "e3", c)]
    observed = [
        _sees("leaf0", "e9", a),  # a's cable in spare port e9: moved
        _sees("leaf0", "e2", d),  # b planned, d there, d planned nowhere: miswired, no partner
        # e3 (c) sees nothing: missing, and c is found nowhere else
        Observation("leaf0", "e7", remote_chassis_id="de:ad:be:ef:00:01", remote_port="eth0"),  # unknown
    ]
    _, faults = _faults(planned, observed, [a, b, c, d])
    assert [(f.kind, f.key) for f in faults] == [
        (FaultKind.MOVED, "leaf0:e1 leaf0:e9"),
        (FaultKind.MISWIRED, "leaf0:e2"),
        (FaultKind.MISSING, "leaf0:e3"),
    ]
    moved, miswired, missing = faults
    assert moved.title == "Cable of gpu001:mlx5_0/1 in leaf0:e9 instead of leaf0:e1"
    assert moved.instructions == [
        "Move the cable of gpu001:mlx5_0/1 from leaf0:e9 (nothing is planned there) to leaf0:e1."
    ]
    assert miswired.title == "Miswired cable on leaf0:e2" and miswired.nodes == ["gpu002", "gpu004"]
    assert missing.title == "Missing cable on leaf0:e3" and "sees nothing" in missing.instructions[0]


def test_unplanned_cable_alone_and_rail_violations_named():
    a, stray = _hca(1, 0), _hca(2, 1)
    planned = [PlannedLink("leaf0", "e1", a)]
    _, faults = _faults(
        planned, [_sees("leaf0", "e1", a), _sees("leaf0", "e5", stray)], [a, stray], rail_optimized=True
    )
    (fault,) = faults
    assert (fault.kind, fault.title) == (FaultKind.UNEXPECTED, "Unplanned cable on leaf0:e5")
    assert "planned nowhere on this port" in fault.instructions[0]
    assert fault.instructions[1].startswith("- rail violation: node gpu002 HCA mlx5_1 (rail 1) lands on leaf leaf0")


def test_a_plan_that_breaks_the_rail_rule_is_no_cabling_fault():
    wrong_rail = _hca(1, 2)
    findings, faults = _faults(
        [PlannedLink("leaf0", "e1", wrong_rail)], [_sees("leaf0", "e1", wrong_rail)], [wrong_rail], rail_optimized=True
    )
    assert findings[0].is_problem and findings[0].rail_violation
    assert faults == []
