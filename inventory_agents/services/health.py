"""Grading health signals: the grader lives in cmdb (every source of signals uses it); re-exported where
ingestion looks."""

from __future__ import annotations

from cmdb.services.health_grading import UNGRADED, Grade, PolicyBook, worst
from cmdb.services.health_policies import DEFAULT_POLICIES, health_policies_ensure

__all__ = ["DEFAULT_POLICIES", "UNGRADED", "Grade", "PolicyBook", "health_policies_ensure", "worst"]
