"""Geometry of the console's pictures: rack elevations and fabric diagrams.

Pure functions over small dataclasses (no Django, no queries): the views hand them what they read, the
templates render the returned shapes as inline SVG. Coordinates are SVG user units (px at 100 % zoom).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# --- rack elevation ---------------------------------------------------------------------------------------------

U_PX = 18  # height of one rack unit
GUTTER = 30  # width of the U-number column on the left
RACK_W = 220  # width of the mounting area
PAD = 6  # space around the rack

HEALTH_TONES = {"ok": "ok", "degraded": "degraded", "failed": "failed", "unknown": "unknown"}


@dataclass(frozen=True)
class RackDevice:
    """A node or switch as the elevation needs it: where it sits and how to colour it."""

    kind: str  # node | switch
    name: str
    position: int | None  # lowest U occupied; None when not placed at a U
    height: int  # in U
    face: str  # front | rear
    tone: str = "unknown"  # ok | degraded | failed | unknown
    url: str = ""


@dataclass(frozen=True)
class DeviceRect:
    kind: str
    name: str
    u: int  # lowest U
    height: int  # U drawn (clipped to the rack)
    tone: str
    url: str
    x: int
    y: int
    w: int
    h: int
    label_y: int
    top_u: int
    is_clipped: bool  # part of it lies above the rack's top U


@dataclass(frozen=True)
class UnitSlot:
    """One U row: its number, where it is drawn, and whether nothing occupies it on this face."""

    u: int
    y: int
    label_y: int
    is_empty: bool


@dataclass(frozen=True)
class Elevation:
    face: str
    u_height: int
    width: int
    height: int
    rack_x: int
    rack_y: int
    rack_w: int
    rack_h: int
    units: list[UnitSlot]
    devices: list[DeviceRect]
    unplaced: list[RackDevice] = field(default_factory=list)  # on this face but at no valid U
    overlaps: list[str] = field(default_factory=list)  # names of devices drawn over another

    @property
    def used_u(self) -> int:
        return sum(1 for slot in self.units if not slot.is_empty)

    @property
    def empty_u(self) -> int:
        return self.u_height - self.used_u


def unit_y(u: int, u_height: int) -> int:
    """The top edge of U `u` (U1 is the bottom row, as racks are numbered)."""
    return PAD + (u_height - u) * U_PX


def rack_elevation(u_height: int, devices: Iterable[RackDevice], face: str) -> Elevation:
    """The elevation of one face: a row per U (numbered, marked empty or not) and a rect per device.

    A device whose position is missing or below U1 is listed in `unplaced`; one reaching above the top is drawn
    clipped (`is_clipped`); a device over U already drawn is still drawn and named in `overlaps` (the database
    refuses overlaps, so this only shows data that got in some other way)."""
    u_height = max(int(u_height), 1)
    occupied: set[int] = set()
    rects: list[DeviceRect] = []
    unplaced: list[RackDevice] = []
    overlaps: list[str] = []
    rack_x = PAD + GUTTER
    on_face = sorted((d for d in devices if d.face == face), key=lambda d: (d.position or 0, d.name))
    for d in on_face:
        height = max(int(d.height), 1)
        if d.position is None or d.position < 1 or d.position > u_height:
            unplaced.append(d)
            continue
        top = min(d.position + height - 1, u_height)
        span = set(range(d.position, top + 1))
        if span & occupied:
            overlaps.append(d.name)
        occupied |= span
        y = unit_y(top, u_height)
        h = (top - d.position + 1) * U_PX
        rects.append(
            DeviceRect(
                kind=d.kind,
                name=d.name,
                u=d.position,
                height=top - d.position + 1,
                tone=HEALTH_TONES.get(d.tone, "unknown"),
                url=d.url,
                x=rack_x + 2,
                y=y + 1,
                w=RACK_W - 4,
                h=h - 2,
                label_y=y + h // 2 + 4,
                top_u=top,
                is_clipped=d.position + height - 1 > u_height,
            )
        )
    units = [
        UnitSlot(u=u, y=unit_y(u, u_height), label_y=unit_y(u, u_height) + U_PX // 2 + 4, is_empty=u not in occupied)
        for u in range(u_height, 0, -1)
    ]
    rack_h = u_height * U_PX
    return Elevation(
        face=face,
        u_height=u_height,
        width=rack_x + RACK_W + PAD,
        height=rack_h + 2 * PAD,
        rack_x=rack_x,
        rack_y=PAD,
        rack_w=RACK_W,
        rack_h=rack_h,
        units=units,
        devices=rects,
        unplaced=unplaced,
        overlaps=overlaps,
    )


def rack_fill(u_height: int, devices: Iterable[RackDevice]) -> int:
    """Used U of a rack: the U numbers occupied on either face (a U taken front and rear counts once)."""
    used: set[int] = set()
    for d in devices:
        if d.position is None or d.position < 1:
            continue
        used |= set(range(d.position, min(d.position + max(d.height, 1) - 1, u_height) + 1))
    return len(used)


# --- fabric diagram -----------------------------------------------------------------------------------------------

BOX_W = 96  # a switch box
BOX_H = 26
NODE_W = 14  # a node box (names in the tooltip and the table)
NODE_H = 14
GAP = 10
GROUP_GAP = 28
ROW_GAP = 110
MARGIN = 16
LABEL_H = 16

#: line states, worst first (a line gets the worst state of the findings about its cable)
LINK_STATES = ("miswired", "crossed", "missing", "unknown", "unexpected", "ok", "planned")


@dataclass(frozen=True)
class FabricSwitch:
    name: str
    role: str  # leaf | spine | ...
    rail: int | None = None
    scalable_unit: int | None = None
    url: str = ""


@dataclass(frozen=True)
class FabricNode:
    name: str
    group: str  # scalable unit or rack label
    tone: str = "unknown"
    url: str = ""


@dataclass(frozen=True)
class FabricLine:
    """A cable between two drawn devices. `state` is one of LINK_STATES; `observed` marks a cable seen where
    nothing (or something else) was planned, drawn dashed."""

    a: str
    b: str
    state: str
    observed: bool = False
    title: str = ""


@dataclass(frozen=True)
class Box:
    name: str
    kind: str  # switch | node
    x: int
    y: int
    w: int
    h: int
    tone: str
    url: str
    label: str

    @property
    def cx(self) -> int:
        return self.x + self.w // 2

    @property
    def cy(self) -> int:
        return self.y + self.h // 2


@dataclass(frozen=True)
class GroupLabel:
    text: str
    x: int
    y: int
    w: int


@dataclass(frozen=True)
class Segment:
    a: str
    b: str
    x1: int
    y1: int
    x2: int
    y2: int
    state: str
    observed: bool
    title: str


@dataclass(frozen=True)
class FabricDiagram:
    width: int
    height: int
    boxes: list[Box]
    labels: list[GroupLabel]
    segments: list[Segment]
    counts: dict[str, int]

    def box(self, name: str) -> Box | None:
        return next((b for b in self.boxes if b.name == name), None)


def _row(
    groups: Sequence[tuple[str, Sequence[tuple[str, str, str, str]]]], y: int, w: int, h: int, kind: str
) -> tuple[list[Box], list[GroupLabel], int]:
    """Lay groups of (name, label, tone, url) out left to right at height `y`; returns the row's width."""
    boxes: list[Box] = []
    labels: list[GroupLabel] = []
    x = MARGIN
    for title, members in groups:
        start = x
        for name, label, tone, url in members:
            boxes.append(Box(name=name, kind=kind, x=x, y=y, w=w, h=h, tone=tone, url=url, label=label))
            x += w + GAP
        width = max(x - GAP - start, w)
        labels.append(GroupLabel(text=title, x=start, y=y - 6 if kind == "switch" else y + h + LABEL_H, w=width))
        x = start + width + GROUP_GAP
    return boxes, labels, x - GROUP_GAP + MARGIN


def short_labels(names: Sequence[str]) -> dict[str, str]:
    """Names without the prefix they all share up to a separator (`sh1-ib-compute-su001-leaf2` -> `su001-leaf2`
    when every switch of the fabric starts with `sh1-ib-compute-`); a name is never shortened to nothing."""
    if len(names) < 2:
        return {n: n for n in names}
    first, last = min(names), max(names)
    common = 0
    while common < min(len(first), len(last)) and first[common] == last[common]:
        common += 1
    cut = max((first.rfind(sep, 0, common) for sep in "-._"), default=-1) + 1
    return {n: n[cut:] or n for n in names}


def _rail_title(rail: int | None) -> str:
    return f"rail {rail}" if rail is not None else "no rail"


def fabric_diagram(
    switches: Iterable[FabricSwitch], nodes: Iterable[FabricNode], lines: Iterable[FabricLine]
) -> FabricDiagram:
    """Spines on top, leaves grouped by rail in the middle, nodes grouped (scalable unit or rack) at the bottom,
    a segment per line whose two ends are drawn. Lines naming a device not drawn are left out (the caller draws
    only what the user may see)."""
    switches = list(switches)
    label = short_labels([s.name for s in switches])
    upper = sorted((s for s in switches if s.role != "leaf"), key=lambda s: (s.role, s.name))
    leaves = [s for s in switches if s.role == "leaf"]
    by_rail: dict[int | None, list[FabricSwitch]] = defaultdict(list)
    for s in leaves:
        by_rail[s.rail].append(s)
    rail_groups = [
        (
            _rail_title(rail),
            [
                (s.name, label[s.name], "switch", s.url)
                for s in sorted(by_rail[rail], key=lambda s: (s.scalable_unit or 0, s.name))
            ],
        )
        for rail in sorted(by_rail, key=lambda r: (r is None, r or 0))
    ]
    by_group: dict[str, list[FabricNode]] = defaultdict(list)
    for n in nodes:
        by_group[n.group].append(n)
    node_groups = [
        (group, [(n.name, n.name, n.tone, n.url) for n in sorted(by_group[group], key=lambda n: n.name)])
        for group in sorted(by_group)
    ]

    y = MARGIN + LABEL_H
    boxes: list[Box] = []
    labels: list[GroupLabel] = []
    widths = [2 * MARGIN]
    if upper:
        spines = [("spines / core", [(s.name, label[s.name], "switch", s.url) for s in upper])]
        b, lab, w = _row(spines, y, BOX_W, BOX_H, "switch")
        boxes, labels, widths = boxes + b, labels + lab, [*widths, w]
        y += BOX_H + ROW_GAP
    if rail_groups:
        b, lab, w = _row(rail_groups, y, BOX_W, BOX_H, "switch")
        boxes, labels, widths = boxes + b, labels + lab, [*widths, w]
        y += BOX_H + ROW_GAP
    if node_groups:
        b, lab, w = _row(node_groups, y, NODE_W, NODE_H, "node")
        boxes, labels, widths = boxes + b, labels + lab, [*widths, w]
        y += NODE_H + LABEL_H + 4
    at = {b.name: b for b in boxes}

    segments: list[Segment] = []
    counts = {state: 0 for state in LINK_STATES}
    for line in lines:
        a, b = at.get(line.a), at.get(line.b)
        if a is None or b is None:
            continue
        state = line.state if line.state in counts else "planned"
        counts[state] += 1
        low, high = (a, b) if a.y >= b.y else (b, a)  # from the top edge of the lower box to the bottom of the upper
        segments.append(
            Segment(
                a=line.a,
                b=line.b,
                x1=low.cx,
                y1=low.y,
                x2=high.cx,
                y2=high.y + high.h,
                state=state,
                observed=line.observed,
                title=line.title,
            )
        )
    # Problems last, so they are drawn over the healthy lines.
    segments.sort(key=lambda s: -LINK_STATES.index(s.state))
    return FabricDiagram(
        width=max(widths), height=y + MARGIN, boxes=boxes, labels=labels, segments=segments, counts=counts
    )


def cable_lines(planned: Iterable[tuple[str, str, str, str]], findings: Iterable) -> list[FabricLine]:
    """The lines of a fabric diagram from its planned cables and the cabling findings.

    `planned`: (a device, b switch, b port, a port label) per planned cable; `findings`: objects with the
    attributes of integrations.switches.cabling.Finding (kind, switch, port, found, swap_partner, rail_violation).
    A planned cable takes the state of the finding at its switch port (none: `planned`, not judged); a miswired
    or unexpected port also gets a dashed line to what it really sees. One line per pair of devices and kind
    (solid, dashed), with the worst state."""
    by_port = {(f.switch, f.port): f for f in findings}
    worst: dict[tuple[str, str, bool], FabricLine] = {}

    def add(line: FabricLine) -> None:
        key = (*sorted((line.a, line.b)), line.observed)
        held = worst.get(key)
        if held is None or LINK_STATES.index(line.state) < LINK_STATES.index(held.state):
            worst[key] = line

    for a_device, switch, port, a_label in planned:
        f = by_port.get((switch, port))
        kind = getattr(getattr(f, "kind", None), "value", getattr(f, "kind", None))
        if f is None:
            state = "planned"
        elif kind == "ok":
            state = "miswired" if f.rail_violation else "ok"
        elif kind == "missing":
            state = "missing"
        elif kind == "miswired":
            state = "crossed" if f.swap_partner else "miswired"
        else:
            state = "unknown"
        title = f"{a_device}:{a_label} → {switch}:{port}: {state}"
        add(FabricLine(a=a_device, b=switch, state=state, title=title))
        if f is not None and kind == "miswired" and f.found is not None and f.found.device != a_device:
            add(
                FabricLine(
                    a=f.found.device,
                    b=switch,
                    state=state,
                    observed=True,
                    title=f"{switch}:{port} sees {f.found} (planned {a_device}:{a_label})",
                )
            )
    for f in by_port.values():
        kind = getattr(f.kind, "value", f.kind)
        if kind == "unexpected" and f.found is not None:
            add(
                FabricLine(
                    a=f.found.device,
                    b=f.switch,
                    state="unexpected",
                    observed=True,
                    title=f"{f.switch}:{f.port} sees {f.found}, nothing planned",
                )
            )
    return sorted(worst.values(), key=lambda line: (line.a, line.b, line.observed))
