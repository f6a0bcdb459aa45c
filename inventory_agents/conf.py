"""Ingestion settings, read from settings.GPUOPS with the defaults documented in docs/ingestion.md."""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    # Bodies above this many bytes are refused with 413 before they are read.
    "AGENT_REPORT_MAX_BYTES": 2 * 1024 * 1024,
    # Nodes whose agent has not reported for this long are flagged is_stale by the beat task.
    "AGENT_STALE_AFTER_MINUTES": 30,
    # An unchanged report is still fully reconciled when the last full pass is older than this, so edits made
    # behind ingestion's back (admin, API) converge back to what the node reports.
    "AGENT_FULL_RECONCILE_MINUTES": 60,
    # Raw reports kept per node (older ones are pruned by the beat task).
    "AGENT_REPORTS_KEEP_PER_NODE": 10,
    # NVIDIA retires at most 64 pages per GPU; at 60 the card is due for RMA (NVIDIA dynamic page retirement).
    "AGENT_RETIRED_PAGES_LIMIT": 60,
    # A report collected further than this in the future is refused (400 clock_skew): applied, it would make
    # every genuine report after it look older ("superseded") until the clock caught up, and the node go stale.
    "AGENT_MAX_CLOCK_SKEW_MINUTES": 10,
}


def setting(name: str) -> Any:
    return getattr(settings, "GPUOPS", {}).get(name, DEFAULTS[name])
