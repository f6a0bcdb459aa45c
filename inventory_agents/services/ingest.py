"""The entry point for one received report, independent of HTTP: parse, validate, check the hostname, then
either the cheap path (same digest as the last reconciled report: one UPDATE of last_seen_at) or the full
reconciliation, retried on transient database errors. Refused reports are stored too (status rejected) so an
operator can see why a node stopped updating.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.db import IntegrityError, OperationalError
from django.utils import timezone

from cmdb.models import Node
from cmdb.services.changelog import tracked_update
from gpuops.context import ChangeSource, change_context
from gpuops.metrics import AGENT_REPORTS, REPORT_APPLY_SECONDS

from ..conf import setting
from ..models import AgentToken, Report, ReportStatus
from ..signals import report_received, signal_send
from .normalize import Observed, report_normalize
from .reconcile import node_status_allows_reports, report_apply, report_is_superseded
from .validation import ReportProblem, report_parse, report_text_check, report_validate, storable

logger = logging.getLogger(__name__)
ATTEMPTS = 3


@dataclass
class IngestResult:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def _reject(
    node: Node, problem: ReportProblem, *, size: int, payload: dict[str, Any] | None, received_at: dt.datetime
) -> IngestResult:
    """Store the refused report (errors, and the payload when it parsed) and answer with the problem."""
    report = Report.objects.create(
        node=node,
        received_at=received_at,
        status=ReportStatus.REJECTED,
        size_bytes=size,
        schema=storable(str((payload or {}).get("schema") or ""))[:64],
        agent_version=storable(str((payload or {}).get("agent_version") or ""))[:32],
        payload=storable(payload) if problem.status != 413 else None,
        errors=storable(problem.errors) or [{"path": "$", "message": problem.message}],
    )
    body = problem.as_json()
    body["report_id"] = str(report.id)
    return IngestResult(problem.status, body)


def same_host(reported: str, recorded: str) -> bool:
    """Equal, or one is the short name of the other: `socket.gethostname()` gives `gpu-a17` on some nodes and
    `gpu-a17.dc1.example.net` on others, while the CMDB keeps one of them."""
    return reported == recorded or reported.split(".", 1)[0] == recorded or recorded.split(".", 1)[0] == reported


def report_too_large(*, token: AgentToken, size: int) -> IngestResult:
    limit = setting("AGENT_REPORT_MAX_BYTES")
    problem = ReportProblem(
        413,
        "report_too_large",
        f"The report is {size} bytes; this server accepts at most {limit} bytes.",
        extra={"max_bytes": limit},
    )
    return _reject(token.node, problem, size=size, payload=None, received_at=timezone.now())


def _is_unchanged(node: Node, observed: Observed, now: dt.datetime) -> bool:
    state = getattr(node, "agent_state", None)
    if state is None or not state.last_hash or state.last_hash != observed.digest or node.is_stale:
        return False
    horizon = now - dt.timedelta(minutes=setting("AGENT_FULL_RECONCILE_MINUTES"))
    return state.last_full_at is not None and state.last_full_at > horizon


def _check_clock(observed: Observed, now: dt.datetime) -> None:
    """Refuse a report collected in the future beyond AGENT_MAX_CLOCK_SKEW_MINUTES: once applied, every genuine
    report after it would be older, hence superseded, and the node would go stale until its clock caught up."""
    skew = dt.timedelta(minutes=setting("AGENT_MAX_CLOCK_SKEW_MINUTES"))
    if observed.collected_at is not None and observed.collected_at > now + skew:
        ahead = int((observed.collected_at - now).total_seconds())
        raise ReportProblem(
            400,
            "clock_skew",
            f"collected_at is {ahead} s ahead of the server's clock; at most "
            f"{int(skew.total_seconds())} s are accepted. Fix the node's clock (NTP).",
            errors=[{"path": "$.collected_at", "message": f"{ahead} s in the future"}],
        )


def report_ingest(*, token: AgentToken, body: bytes) -> IngestResult:
    """Handle one report body posted with `token` (already authenticated, its node loaded with agent_state).

    Counted on /metrics by outcome (applied, unchanged, superseded, rejected, failed); an applied report's
    time goes into the apply-latency histogram."""
    started = time.monotonic()
    result = _report_ingest(token=token, body=body, started=started)
    outcome = str(result.body.get("status", "")) if result.status == 200 else ""
    if not outcome:
        outcome = "failed" if result.status >= 500 else "rejected"
    AGENT_REPORTS.labels(outcome=outcome).inc()
    if outcome == "applied":
        REPORT_APPLY_SECONDS.observe(time.monotonic() - started)
    return result


def _report_ingest(*, token: AgentToken, body: bytes, started: float) -> IngestResult:
    now = timezone.now()
    node = token.node
    if not node_status_allows_reports(node):
        return IngestResult(
            403,
            {"error": "node_decommissioned", "detail": f"{node.hostname} is decommissioned; its reports are refused."},
        )
    payload: dict[str, Any] | None = None
    try:
        payload = report_parse(body)
        report_text_check(payload, body)
        schema = report_validate(payload)
        hostname = str(payload.get("hostname") or "").strip().lower()
        if hostname and not same_host(hostname, node.hostname.lower()):
            raise ReportProblem(
                403,
                "hostname_mismatch",
                f"This token belongs to {node.hostname}; the report is for {hostname!r}.",
                errors=[{"path": "$.hostname", "message": "not the token's node"}],
            )
        observed = report_normalize(payload, schema)
        _check_clock(observed, now)
    except ReportProblem as problem:
        return _reject(node, problem, size=len(body), payload=payload, received_at=now)

    state = getattr(node, "agent_state", None)
    if report_is_superseded(state, observed):
        # Replayed from the agent's spool after a newer report was applied: applying it would roll the CMDB
        # back (a moved card would move back). Kept for the record, answered 200 so the agent drops it. This
        # early answer reads the state loaded with the token; report_apply checks again under the node lock.
        report = Report.objects.create(
            node=node,
            received_at=now,
            collected_at=observed.collected_at,
            schema=observed.schema,
            agent_version=observed.agent_version,
            report_hash=observed.digest,
            size_bytes=len(body),
            status=ReportStatus.SUPERSEDED,
            payload=payload,
        )
        return _superseded(node, report)
    if _is_unchanged(node, observed, now):
        # The cheap path: nothing to reconcile, liveness only (no change record, no version bump).
        tracked_update(Node.objects.filter(pk=node.pk), last_seen_at=now)
        node.last_seen_at = now
        signal_send(report_received, node=node, status="unchanged")
        return IngestResult(
            200, {"status": "unchanged", "node": node.hostname, "report_id": str(node.agent_state.last_report_id or "")}
        )

    # The periodic full pass of an unchanged inventory keeps no second copy of the payload: the last stored
    # report with the same digest holds it (12,500 nodes x a report an hour add up).
    same = state is not None and state.last_hash == observed.digest and state.last_report_id is not None
    report = Report(
        node=node,
        received_at=now,
        collected_at=observed.collected_at,
        schema=observed.schema,
        agent_version=observed.agent_version,
        report_hash=observed.digest,
        size_bytes=len(body),
        status=ReportStatus.APPLIED,
        payload=None if same else payload,
    )
    for attempt in range(1, ATTEMPTS + 1):
        try:
            # Every change record and placement of this pass carries the report id as correlation id.
            with change_context(actor=AnonymousUser(), source=ChangeSource.AGENT, correlation_id=str(report.id)):
                summary = report_apply(
                    node_id=node.pk, observed=observed, report=report, token=token, now=now, started=started
                )
            break
        except (IntegrityError, OperationalError) as exc:
            # A card created by another node's report in the same instant, a deadlock, a lock timeout: the
            # transaction rolled back whole, so running it again is safe and sees the other side's result.
            logger.warning("report for %s: attempt %d failed: %s", node.hostname, attempt, exc)
            if attempt == ATTEMPTS:
                return _failed(node, report, exc, status=503)
        except Exception as exc:  # a database error or a hook receiver's: the pass rolled back whole
            logger.exception("report for %s failed", node.hostname)
            return _failed(node, report, exc, status=500)
    if report.status == ReportStatus.SUPERSEDED:
        return _superseded(node, report)
    return IngestResult(
        200, {"status": "applied", "node": node.hostname, "report_id": str(report.id), "summary": summary}
    )


def _superseded(node: Node, report: Report) -> IngestResult:
    return IngestResult(
        200,
        {
            "status": "superseded",
            "node": node.hostname,
            "report_id": str(report.id),
            "detail": "A newer report of this node was applied already.",
        },
    )


def _failed(node: Node, report: Report, exc: Exception, *, status: int) -> IngestResult:
    Report.objects.create(
        id=report.id,
        node=node,
        received_at=report.received_at,
        collected_at=report.collected_at,
        schema=report.schema,
        agent_version=report.agent_version,
        report_hash=report.report_hash,
        size_bytes=report.size_bytes,
        status=ReportStatus.FAILED,
        payload=report.payload,
        errors=[{"path": "$", "message": f"{type(exc).__name__}: {exc}"[:500]}],
    )
    headers = {"Retry-After": "60"} if status == 503 else {}
    return IngestResult(
        status,
        {
            "error": "temporarily_unavailable" if status == 503 else "server_error",
            "detail": "The report could not be applied; send it again later.",
            "report_id": str(report.id),
        },
        headers,
    )
