"""The geometry of the console's pictures (pure functions, no database)."""

from __future__ import annotations

from dataclasses import dataclass

from console.drawing import (
    U_PX,
    FabricLine,
    FabricNode,
    FabricSwitch,
    RackDevice,
    cable_lines,
    fabric_diagram,
    rack_elevation,
    rack_fill,
    unit_y,
)


def _node(name: str, position: int | None, height: int, face: str = "front", tone: str = "ok") -> RackDevice:
    return RackDevice("node", name, position, height, face, tone=tone, url=f"/nodes/{name}/")


def test_u1_is_the_bottom_row_and_each_u_is_one_row_high():
    assert unit_y(42, 42) < unit_y(1, 42)
    assert unit_y(1, 42) - unit_y(2, 42) == U_PX
    face = rack_elevation(42, [], "front")
    assert [slot.u for slot in face.units] == list(range(42, 0, -1))
    assert face.units[-1].y == unit_y(1, 42) and face.units[-1].y + U_PX == face.rack_y + face.rack_h


def test_a_device_spans_its_height_from_its_position_upwards():
    face = rack_elevation(42, [_node("gpu-01", 3, 8)], "front")
    (rect,) = face.devices
    assert (rect.u, rect.height, rect.top_u) == (3, 8, 10)
    # From the top of U10 to the bottom of U3 (1 px inset on each edge).
    assert rect.y == unit_y(10, 42) + 1
    assert rect.y + rect.h + 1 == unit_y(3, 42) + U_PX
    assert rect.x == face.rack_x + 2 and rect.w == face.rack_w - 4
    empty = {slot.u for slot in face.units if slot.is_empty}
    assert empty == set(range(1, 43)) - set(range(3, 11))
    assert (face.used_u, face.empty_u) == (8, 34)


def test_faces_are_drawn_apart():
    devices = [_node("front-box", 1, 2, "front"), _node("rear-box", 1, 1, "rear")]
    front, rear = rack_elevation(10, devices, "front"), rack_elevation(10, devices, "rear")
    assert [d.name for d in front.devices] == ["front-box"]
    assert [d.name for d in rear.devices] == ["rear-box"]
    assert (front.used_u, rear.used_u) == (2, 1)
    assert rack_fill(10, devices) == 2  # U1 taken on both faces counts once


def test_unplaced_clipped_and_overlapping_devices_are_reported():
    devices = [
        _node("nowhere", None, 2),
        _node("below", 0, 1),
        _node("too-tall", 9, 4),
        _node("a", 2, 2),
        _node("b", 3, 1),
    ]
    face = rack_elevation(10, devices, "front")
    assert sorted(d.name for d in face.unplaced) == ["below", "nowhere"]
    tall = next(d for d in face.devices if d.name == "too-tall")
    assert tall.is_clipped and (tall.u, tall.height, tall.top_u) == (9, 2, 10)
    assert face.overlaps == ["b"]


def test_unknown_health_draws_as_unknown():
    (rect,) = rack_elevation(4, [_node("x", 1, 1, tone="weird")], "front").devices
    assert rect.tone == "unknown"


def test_fabric_diagram_rows_and_groups():
    switches = [
        FabricSwitch("spine1", "spine"),
        FabricSwitch("leaf-r1-su1", "leaf", rail=1, scalable_unit=1),
        FabricSwitch("leaf-r0-su2", "leaf", rail=0, scalable_unit=2),
        FabricSwitch("leaf-r0-su1", "leaf", rail=0, scalable_unit=1),
    ]
    nodes = [FabricNode("n2", "SU 2"), FabricNode("n1", "SU 1"), FabricNode("n3", "SU 1")]
    lines = [
        FabricLine("n1", "leaf-r0-su1", "ok"),
        FabricLine("n3", "leaf-r1-su1", "crossed"),
        FabricLine("leaf-r0-su1", "spine1", "planned"),
        FabricLine("ghost", "spine1", "ok"),  # a device not drawn: no segment
    ]
    d = fabric_diagram(switches, nodes, lines)
    spine, leaves, node_boxes = d.box("spine1"), [b for b in d.boxes if "leaf" in b.name], d.boxes[-3:]
    assert spine.y < leaves[0].y < node_boxes[0].y
    # Leaves: rail 0 first (SU 1 then 2), then rail 1; each rail group labelled.
    assert [b.name for b in leaves] == ["leaf-r0-su1", "leaf-r0-su2", "leaf-r1-su1"]
    assert {lab.text for lab in d.labels} >= {"rail 0", "rail 1", "SU 1", "SU 2", "spines / core"}
    assert [b.name for b in node_boxes] == ["n1", "n3", "n2"]
    assert d.box("n3").x < d.box("n2").x - 20  # a gap between groups
    assert len(d.segments) == 3 and d.counts["crossed"] == 1 and d.counts["ok"] == 1
    # Problems are drawn last (on top); a segment runs from the lower box's top to the upper box's bottom.
    assert d.segments[-1].state == "crossed"
    seg = next(s for s in d.segments if s.a == "n1")
    assert (seg.x1, seg.y1) == (d.box("n1").cx, d.box("n1").y)
    assert (seg.x2, seg.y2) == (d.box("leaf-r0-su1").cx, d.box("leaf-r0-su1").y + d.box("leaf-r0-su1").h)
    assert d.width >= max(b.x + b.w for b in d.boxes)


@dataclass(frozen=True)
class _Ep:
    device: str
    port: str

    def __str__(self) -> str:
        return f"{self.device}:{self.port}"


@dataclass(frozen=True)
class _Finding:
    kind: str
    switch: str
    port: str
    found: _Ep | None = None
    swap_partner: object = None
    rail_violation: str = ""


def test_cable_lines_take_the_verdict_of_their_switch_port():
    planned = [
        ("n1", "leaf0", "p1", "mlx5_0/1"),
        ("n2", "leaf0", "p2", "mlx5_0/1"),
        ("n3", "leaf0", "p3", "mlx5_0/1"),
        ("n4", "leaf0", "p4", "mlx5_0/1"),
        ("n5", "leaf0", "p5", "mlx5_0/1"),
        ("n6", "leaf0", "p6", "mlx5_0/1"),
    ]
    findings = [
        _Finding("ok", "leaf0", "p1", found=_Ep("n1", "mlx5_0/1")),
        _Finding("missing", "leaf0", "p2"),
        _Finding("miswired", "leaf0", "p3", found=_Ep("n4", "mlx5_0/1"), swap_partner="leaf0:p4"),
        _Finding("miswired", "leaf0", "p4", found=_Ep("n3", "mlx5_0/1"), swap_partner="leaf0:p3"),
        _Finding("ok", "leaf0", "p5", found=_Ep("n5", "mlx5_0/1"), rail_violation="rail violation: ..."),
        _Finding("unexpected", "leaf0", "p30", found=_Ep("n9", "mlx5_6/1")),
    ]
    lines = {(line.a, line.b, line.observed): line.state for line in cable_lines(planned, findings)}
    assert lines[("n1", "leaf0", False)] == "ok"
    assert lines[("n2", "leaf0", False)] == "missing"
    assert lines[("n3", "leaf0", False)] == lines[("n4", "leaf0", False)] == "crossed"
    # The crossed cables are also drawn (dashed) to where they really land.
    assert lines[("n4", "leaf0", True)] == lines[("n3", "leaf0", True)] == "crossed"
    assert lines[("n5", "leaf0", False)] == "miswired"  # as planned, but the plan breaks the rail
    assert lines[("n6", "leaf0", False)] == "planned"  # no finding: not judged
    assert lines[("n9", "leaf0", True)] == "unexpected"
    assert len(lines) == 9


def test_cable_lines_keep_the_worst_state_of_a_pair():
    planned = [("spine", "leaf", "p1", "p9"), ("leaf", "spine", "p9", "p1")]
    findings = [_Finding("ok", "leaf", "p1", found=_Ep("spine", "p9")), _Finding("missing", "spine", "p9")]
    (line,) = cable_lines(planned, findings)
    assert line.state == "missing"


def test_switch_labels_drop_the_prefix_every_switch_shares():
    from console.drawing import short_labels

    names = ["sh1-ib-compute-su001-leaf0", "sh1-ib-compute-su002-leaf0", "sh1-ib-compute-spine1"]
    assert short_labels(names) == {
        "sh1-ib-compute-su001-leaf0": "su001-leaf0",
        "sh1-ib-compute-su002-leaf0": "su002-leaf0",
        "sh1-ib-compute-spine1": "spine1",
    }
    assert short_labels(["leaf1", "leaf2"]) == {"leaf1": "leaf1", "leaf2": "leaf2"}  # no separator: kept whole
    assert short_labels(["only-one"]) == {"only-one": "only-one"}
    d = fabric_diagram([FabricSwitch("x-a-leaf0", "leaf", rail=0), FabricSwitch("x-a-leaf1", "leaf", rail=1)], [], [])
    assert [b.label for b in d.boxes] == ["leaf0", "leaf1"]
