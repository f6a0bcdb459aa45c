"""Grading health signals with HealthPolicy (data): one grader for every source (agent reports, monitoring alerts).

The most specific policy row wins: (vendor, kind, code) > (any vendor, kind, code) > (vendor, kind, any code) >
(any vendor, kind, any code). A signal no row matches is a warning to monitor: unknown signals are surfaced,
never silently dropped, and never fail a card on their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import HEALTH_RANK, Health, HealthAction, HealthPolicy, Severity
from .health_policies import health_policies_ensure


@dataclass(frozen=True)
class Grade:
    severity: str
    action: str
    marks_failed: bool
    description: str = ""

    @property
    def health(self) -> str:
        if self.marks_failed:
            return Health.FAILED
        return Health.OK if self.severity == Severity.INFO else Health.DEGRADED

    @property
    def opens_repair(self) -> bool:
        """A new event graded so on a card asks the workflows for a repair (cmdb.hooks.accelerator_failed): the
        card is failed, or the action is 'drain and repair' on a card left degraded (a topology departure)."""
        return self.marks_failed or self.action == HealthAction.DRAIN_REPAIR


UNGRADED = Grade(Severity.WARNING, HealthAction.MONITOR, False, "No policy for this signal")


class PolicyBook:
    """All policy rows, loaded in one query, answering `grade(vendor_id, kind, code)` from memory."""

    def __init__(self, rows: list[HealthPolicy]) -> None:
        self._rows = {
            (r.vendor_id, r.kind, r.code.lower()): Grade(r.severity, r.action, r.marks_failed, r.description)
            for r in rows
        }

    @classmethod
    def load(cls) -> PolicyBook:
        rows = list(HealthPolicy.objects.all())
        if not rows:  # a database nobody seeded: grade with the defaults rather than with nothing
            health_policies_ensure()
            rows = list(HealthPolicy.objects.all())
        return cls(rows)

    def grade(self, vendor_id: int | None, kind: str, code: str) -> Grade:
        code = code.lower()
        for key in ((vendor_id, kind, code), (None, kind, code), (vendor_id, kind, ""), (None, kind, "")):
            grade = self._rows.get(key)
            if grade is not None:
                return grade
        return UNGRADED


def worst(*healths: str) -> str:
    return max(healths, key=lambda h: HEALTH_RANK.get(h, 1)) if healths else Health.OK
