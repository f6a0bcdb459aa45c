"""Server-rendered SVG figures: the geometry of stacked bars, computed here so templates only draw rectangles.

A bar is a list of segments (label, value, tone, href); its width is shared out by value, and a bar of a
smaller total is drawn shorter when a `scale` (the largest total of the figure) is given, so bars compare.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BAR_WIDTH = 320  # viewBox units; the SVG scales with its box
BAR_HEIGHT = 14


@dataclass(frozen=True)
class Segment:
    label: str
    value: int
    tone: str  # a CSS class suffix (console/dashboard.css: .seg-<tone>)
    href: str = ""


@dataclass(frozen=True)
class DrawnSegment:
    segment: Segment
    x: float
    width: float

    @property
    def title(self) -> str:
        return f"{self.segment.label}: {self.segment.value:,}"


@dataclass(frozen=True)
class Bar:
    segments: list[DrawnSegment]
    total: int
    width: int = BAR_WIDTH
    height: int = BAR_HEIGHT


def stacked_bar(segments: Iterable[Segment], *, scale: int | None = None, width: int = BAR_WIDTH) -> Bar:
    """Lay out the non-empty segments left to right; the bar spans `width * total / scale` (all of it without
    a scale). Widths are rounded to 0.01 units; a segment is never narrower than 1 unit, so it stays visible."""
    parts = [s for s in segments if s.value > 0]
    total = sum(s.value for s in parts)
    span = width if not scale else width * total / max(scale, total, 1)
    drawn: list[DrawnSegment] = []
    x = 0.0
    for s in parts:
        w = max(round(span * s.value / total, 2), 1.0) if total else 0.0
        drawn.append(DrawnSegment(segment=s, x=round(x, 2), width=w))
        x += w
    return Bar(segments=drawn, total=total, width=width)


def largest(totals: Sequence[int]) -> int:
    return max(totals, default=0)


__all__ = ["Bar", "DrawnSegment", "Segment", "largest", "stacked_bar"]
