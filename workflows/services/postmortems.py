"""Incident postmortems: written by people (summary, root cause, action items), computed from the records
(impact, timeline, what changed before the incident).

- Affected objects: the ticket's linked nodes, cards, racks and switches, the cards' nodes, and around them
  the nodes' racks, clusters, installed cards, software and firmware rows, the switches their cables land on
  and those switches' ports.
- What changed: every change record (rollouts, provisioning, switch pushes, agent reports, manual edits) on
  an affected object in the `window_hours` before the incident start, with actor, source and the ticket whose
  correlation id it carries. The incident's own changes are not listed.
- Timeline: the ticket's own events, the health events of the affected nodes and cards and the status/health
  changes of those nodes and cards, from the window start to the incident end.
- Impact: nodes, cards, tenants and minutes derived from the above; a number set on the postmortem wins.

An incident ticket closes only when `postmortem_missing` is empty (the incident workflow's close guard).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.contrib.contenttypes.models import ContentType
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from cmdb import models as cm
from cmdb.permissions import restrict

from ..models import (
    LinkRole,
    Postmortem,
    PostmortemAction,
    RootCauseCategory,
    Ticket,
    TicketPriority,
    TimelineEntry,
    TimelineKind,
    TransitionLog,
)
from ..permissions import can_act, can_change, has_ticket_perm

INCIDENT = "incident"
MAX_WINDOW_HOURS = 24 * 30
# Change records per postmortem shown (the newest first beyond it would hide the oldest: the limit is generous).
MAX_CHANGES = 500
STATUS_FIELDS = ("status", "health", "lifecycle", "is_cordoned")


@dataclass
class Affected:
    """Ids of the objects an incident touched, by kind."""

    nodes: set[int] = field(default_factory=set)
    cards: set[int] = field(default_factory=set)
    racks: set[int] = field(default_factory=set)
    switches: set[int] = field(default_factory=set)
    clusters: set[int] = field(default_factory=set)
    tenants: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class ImpactFigure:
    label: str
    value: int
    derived: int
    is_override: bool


@dataclass(frozen=True)
class ChangeLine:
    at: dt.datetime
    kind: str
    object_repr: str
    action: str
    changes: dict[str, Any]
    actor: str
    source: str
    reason: str
    ticket_reference: str
    ticket_id: int | None
    record_id: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.record_id,
            "at": self.at.isoformat(),
            "object_type": self.kind,
            "object": self.object_repr,
            "action": self.action,
            "changes": self.changes,
            "actor": self.actor,
            "source": self.source,
            "reason": self.reason,
            "ticket": self.ticket_reference,
            "ticket_id": self.ticket_id,
        }


@dataclass(frozen=True)
class TimelineLine:
    at: dt.datetime
    source: str  # ticket / health / change
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {"at": self.at.isoformat(), "source": self.source, "text": self.text}


@dataclass
class PostmortemReport:
    ticket: Ticket
    postmortem: Postmortem | None
    start: dt.datetime
    end: dt.datetime
    window_start: dt.datetime
    impact: list[ImpactFigure]
    changes: list[ChangeLine]
    timeline: list[TimelineLine]
    actions: list[Ticket]
    missing: list[str]
    # The jobs that ran on the incident's node before it (the jobs_impact step), as the scheduler told them.
    jobs: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        pm = self.postmortem
        return {
            "ticket": self.ticket.reference,
            "exists": pm is not None,
            "summary": pm.summary if pm else "",
            "root_cause": pm.root_cause.slug if pm and pm.root_cause_id else None,
            "root_cause_detail": pm.root_cause_detail if pm else "",
            "started_at": self.start.isoformat(),
            "ended_at": self.end.isoformat(),
            "window_hours": pm.window_hours if pm else Postmortem._meta.get_field("window_hours").default,
            "window_start": self.window_start.isoformat(),
            "impact": {
                f.label: {"value": f.value, "derived": f.derived, "override": f.is_override} for f in self.impact
            },
            "what_changed": [c.as_dict() for c in self.changes],
            "timeline": [t.as_dict() for t in self.timeline],
            "action_items": [
                {"id": t.pk, "reference": t.reference, "title": t.title, "state": t.state} for t in self.actions
            ],
            "missing": self.missing,
            "jobs": self.jobs,
        }


# --- reads --------------------------------------------------------------------------------------------------------


def affected_objects(ticket: Ticket, user: AbstractBaseUser | None = None) -> Affected:
    """The objects the incident touched (see the module docstring); restricted to what `user` may see."""
    a = Affected()
    for link in ticket.links.all():
        if link.node_id:
            a.nodes.add(link.node_id)
        elif link.accelerator_id:
            a.cards.add(link.accelerator_id)
        elif link.rack_id:
            a.racks.add(link.rack_id)
        elif link.switch_id:
            a.switches.add(link.switch_id)
    a.nodes |= set(cm.Accelerator.objects.filter(pk__in=a.cards, node__isnull=False).values_list("node_id", flat=True))
    nodes = cm.Node.objects.filter(pk__in=a.nodes)
    if user is not None:
        nodes = restrict(nodes, user, "view")
    rows = list(nodes.values_list("pk", "rack_id", "cluster_id", "tenant_id"))
    a.nodes = {pk for pk, *_ in rows}
    a.racks |= {rack for _, rack, _, _ in rows if rack}
    a.clusters = {cluster for _, _, cluster, _ in rows if cluster}
    a.tenants = {tenant for *_, tenant in rows if tenant}
    a.cards |= set(cm.Accelerator.objects.filter(node_id__in=a.nodes).values_list("pk", flat=True))
    a.switches |= set(
        cm.Link.objects.filter(a_nic_port__nic__node_id__in=a.nodes).values_list("b_switch_port__switch_id", flat=True)
    )
    if user is not None:
        a.cards = set(
            restrict(cm.Accelerator.objects.filter(pk__in=a.cards), user, "view").values_list("pk", flat=True)
        )
        a.switches = set(
            restrict(cm.Switch.objects.filter(pk__in=a.switches), user, "view").values_list("pk", flat=True)
        )
        a.racks = set(restrict(cm.Rack.objects.filter(pk__in=a.racks), user, "view").values_list("pk", flat=True))
    return a


def incident_period(ticket: Ticket, pm: Postmortem | None = None) -> tuple[dt.datetime, dt.datetime]:
    """(start, end): the postmortem's own times, else the ticket's opening and its (last) resolution."""
    start = (pm.started_at if pm else None) or ticket.created_at
    end = pm.ended_at if pm else None
    if end is None:
        resolved = (
            TransitionLog.objects.filter(ticket=ticket, target="resolved").order_by("-at").values_list("at", flat=True)
        ).first()
        end = resolved or ticket.closed_at or timezone.now()
    return start, max(end, start)


def _object_q(a: Affected) -> Q:
    """Change records of the affected objects and the rows that hang off them."""
    ct = ContentType.objects.get_for_models(
        cm.Node,
        cm.Accelerator,
        cm.Rack,
        cm.Switch,
        cm.Cluster,
        cm.InstalledSoftware,
        cm.NodeFirmware,
        cm.SwitchPort,
        cm.Link,
    )
    parts = {
        cm.Node: a.nodes,
        cm.Accelerator: a.cards,
        cm.Rack: a.racks,
        cm.Switch: a.switches,
        cm.Cluster: a.clusters,
        cm.InstalledSoftware: set(
            cm.InstalledSoftware.objects.filter(node_id__in=a.nodes).values_list("pk", flat=True)
        ),
        cm.NodeFirmware: set(cm.NodeFirmware.objects.filter(node_id__in=a.nodes).values_list("pk", flat=True)),
        cm.SwitchPort: set(cm.SwitchPort.objects.filter(switch_id__in=a.switches).values_list("pk", flat=True)),
        cm.Link: set(cm.Link.objects.filter(a_nic_port__nic__node_id__in=a.nodes).values_list("pk", flat=True)),
    }
    q = Q(pk__in=[])
    for model, ids in parts.items():
        if ids:
            q |= Q(content_type=ct[model], object_id__in=ids)
    return q


def postmortem_changes(
    ticket: Ticket, *, affected: Affected, start: dt.datetime, window: dt.timedelta
) -> list[ChangeLine]:
    """Every recorded change on the affected objects in [start - window, start), oldest first."""
    records = list(
        cm.ChangeRecord.objects.filter(_object_q(affected), at__gte=start - window, at__lt=start)
        .exclude(correlation_id=ticket.correlation_id)
        .select_related("content_type")
        .order_by("at", "id")[:MAX_CHANGES]
    )
    by_correlation = {
        t.correlation_id: t
        for t in Ticket.objects.filter(correlation_id__in={r.correlation_id for r in records if r.correlation_id})
    }
    lines = []
    for r in records:
        owner = by_correlation.get(r.correlation_id)
        lines.append(
            ChangeLine(
                at=r.at,
                kind=r.content_type.model,
                object_repr=r.object_repr,
                action=r.action,
                changes=r.changes,
                actor=r.actor_repr,
                source=r.source,
                reason=r.reason,
                ticket_reference=owner.reference if owner else "",
                ticket_id=owner.pk if owner else None,
                record_id=r.pk,
            )
        )
    return lines


def _timeline(ticket: Ticket, affected: Affected, since: dt.datetime, until: dt.datetime) -> list[TimelineLine]:
    lines = [
        TimelineLine(e.at, "ticket", f"{e.message}{' - ' + e.body[:200] if e.body else ''}")
        for e in TimelineEntry.objects.filter(ticket=ticket).exclude(kind=TimelineKind.STEP)
    ]
    events = cm.HealthEvent.objects.filter(
        Q(node_id__in=affected.nodes) | Q(accelerator_id__in=affected.cards),
        first_seen_at__gte=since,
        first_seen_at__lte=until,
    ).select_related("node", "accelerator")
    for ev in events:
        where = f"{ev.accelerator} in {ev.node}" if ev.accelerator_id else str(ev.node)
        code = f" {ev.code}" if ev.code else ""
        lines.append(
            TimelineLine(ev.first_seen_at, "health", f"{ev.severity} {ev.kind}{code} on {where} (x{ev.count})")
        )
    ct = ContentType.objects.get_for_models(cm.Node, cm.Accelerator)
    status_q = Q()
    for name in STATUS_FIELDS:
        status_q |= Q(changes__has_key=name)
    records = cm.ChangeRecord.objects.filter(
        (
            Q(content_type=ct[cm.Node], object_id__in=affected.nodes)
            | Q(content_type=ct[cm.Accelerator], object_id__in=affected.cards)
        )
        & status_q,
        at__gte=since,
        at__lte=until,
    ).order_by("at", "id")[:MAX_CHANGES]
    for r in records:
        moved = ", ".join(
            f"{name} {_pair(r.changes[name])[0]} → {_pair(r.changes[name])[1]}"
            for name in STATUS_FIELDS
            if name in r.changes
        )
        lines.append(TimelineLine(r.at, "change", f"{r.object_repr}: {moved} ({r.actor_repr or r.source})"))
    return sorted(lines, key=lambda line: line.at)


def _pair(value: Any) -> tuple[Any, Any]:
    return (value[0], value[1]) if isinstance(value, list | tuple) and len(value) == 2 else ("", value)


def _cards_count(affected: Affected) -> int:
    return len(affected.cards)


def postmortem_missing(ticket: Ticket) -> list[str]:
    """What the incident still needs before it may close (empty: complete)."""
    pm = Postmortem.objects.filter(ticket=ticket).first()
    if pm is None:
        return ["a postmortem (summary and root cause category)"]
    missing = []
    if not pm.summary.strip():
        missing.append("the postmortem's summary")
    if pm.root_cause_id is None:
        missing.append("the postmortem's root cause category")
    return missing


def postmortem_report(ticket: Ticket, user: AbstractBaseUser | None = None) -> PostmortemReport:
    """Everything the postmortem page, API and Markdown show."""
    pm = Postmortem.objects.filter(ticket=ticket).select_related("root_cause").first()
    start, end = incident_period(ticket, pm)
    window = dt.timedelta(hours=pm.window_hours if pm else 72)
    affected = affected_objects(ticket, user)
    derived = {
        "nodes": len(affected.nodes),
        "cards": _cards_count(affected),
        "tenants": len(affected.tenants),
        "minutes": int((end - start).total_seconds() // 60),
    }
    impact = []
    for name, value in derived.items():
        override = getattr(pm, f"impact_{name}") if pm else None
        impact.append(ImpactFigure(name, override if override is not None else value, value, override is not None))
    actions = [a.ticket for a in PostmortemAction.objects.filter(postmortem=pm).select_related("ticket")] if pm else []
    return PostmortemReport(
        ticket=ticket,
        postmortem=pm,
        start=start,
        end=end,
        window_start=start - window,
        impact=impact,
        changes=postmortem_changes(ticket, affected=affected, start=start, window=window),
        timeline=_timeline(ticket, affected, start - window, end),
        actions=actions,
        missing=postmortem_missing(ticket),
        jobs=ticket.data.get("jobs_impact") or {},
    )


def root_causes_offered() -> list[RootCauseCategory]:
    return list(RootCauseCategory.objects.filter(is_active=True))


# --- writes -------------------------------------------------------------------------------------------------------


def _may_write(actor: AbstractBaseUser, ticket: Ticket) -> bool:
    return can_act(actor, ticket) and (can_change(actor, ticket) or has_ticket_perm(actor, "incident_work", ticket))


def _incident_for_writing(ticket: Ticket, actor: AbstractBaseUser) -> Ticket:
    """The incident, locked, once the actor may write its postmortem and it is still open."""
    from ..engine import ForbiddenError, NotAllowedError

    locked = Ticket.objects.select_for_update().get(pk=ticket.pk)
    if locked.type != INCIDENT:
        raise NotAllowedError("Only incident tickets have a postmortem.")
    if not _may_write(actor, locked):
        raise ForbiddenError("You may not edit this ticket's postmortem.")
    if not locked.is_open:
        raise NotAllowedError(f"{locked.reference} is closed; its postmortem is a record now.")
    return locked


def _clean(data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name in ("summary", "root_cause_detail"):
        if name in data:
            values[name] = str(data.get(name) or "").strip()[:20000]
    if "root_cause" in data:
        slug = str(data.get("root_cause") or "").strip()
        if not slug:
            values["root_cause"] = None
        elif (cause := RootCauseCategory.objects.filter(slug=slug, is_active=True).first()) is None:
            offered = ", ".join(RootCauseCategory.objects.filter(is_active=True).values_list("slug", flat=True))
            errors["root_cause"] = f"Unknown root cause category {slug!r}; one of: {offered}."
        else:
            values["root_cause"] = cause
    for name in ("started_at", "ended_at"):
        if name in data:
            raw = data.get(name)
            if raw in (None, ""):
                values[name] = None
                continue
            parsed = raw if isinstance(raw, dt.datetime) else parse_datetime(str(raw))
            if parsed is None:
                errors[name] = "Not a date and time (ISO 8601, e.g. 2026-12-01T08:30:00+00:00)."
            else:
                values[name] = parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, dt.UTC)
    for name, high in (
        ("window_hours", MAX_WINDOW_HOURS),
        ("impact_nodes", None),
        ("impact_cards", None),
        ("impact_tenants", None),
        ("impact_minutes", None),
    ):
        if name not in data:
            continue
        raw = data.get(name)
        if raw in (None, "") and name != "window_hours":
            values[name] = None
            continue
        try:
            number = int(raw)
        except (TypeError, ValueError):
            errors[name] = "Must be a whole number."
            continue
        if number < (1 if name == "window_hours" else 0) or (high is not None and number > high):
            errors[name] = f"Must be between {1 if name == 'window_hours' else 0} and {high or 'any'}."
            continue
        values[name] = number
    if values.get("started_at") and values.get("ended_at") and values["ended_at"] < values["started_at"]:
        errors["ended_at"] = "The incident cannot end before it starts."
    return values, errors


@transaction.atomic
def postmortem_save(*, ticket: Ticket, actor: AbstractBaseUser, data: Mapping[str, Any]) -> Postmortem:
    """Create or update the postmortem of an incident ticket with the given fields (others are kept).

    Needs change rights on the ticket (its requester, `change_ticket` or `incident_work`); refused once the
    ticket is closed or cancelled. Records a timeline entry.
    """
    from ..engine import GuardError, timeline_add

    locked = _incident_for_writing(ticket, actor)
    values, errors = _clean(data)
    if errors:
        raise GuardError(list(errors.values()), field_errors=errors)
    pm, created = Postmortem.objects.get_or_create(ticket=locked, defaults={"author": actor})
    for name, value in values.items():
        setattr(pm, name, value)
    if pm.started_at and pm.ended_at and pm.ended_at < pm.started_at:
        raise GuardError(["The incident cannot end before it starts."], field_errors={"ended_at": "Before the start."})
    pm.save()
    timeline_add(
        ticket=locked,
        kind=TimelineKind.NOTE,
        actor=actor,
        message="Postmortem written" if created else "Postmortem edited",
        data={"fields": sorted(values)},
    )
    return pm


@transaction.atomic
def postmortem_action_add(
    *,
    ticket: Ticket,
    actor: AbstractBaseUser,
    title: str,
    description: str = "",
    priority: str = TicketPriority.NORMAL,
) -> Ticket:
    """Open a follow-up ticket (an incident / request, through the engine) as an action item of the postmortem.
    It concerns the incident's subject objects (as related links) and is recorded on both tickets."""
    from ..engine import ticket_create, timeline_add

    locked = _incident_for_writing(ticket, actor)
    subjects: list[tuple[str, models.Model]] = [
        (LinkRole.RELATED, link.target)
        for link in locked.links.filter(role=LinkRole.SUBJECT).select_related("node", "accelerator", "rack", "switch")
        if link.target is not None and link.kind in ("node", "accelerator", "rack", "switch")
    ]
    follow_up = ticket_create(
        type_=INCIDENT,
        title=title,
        requester=actor,
        description=(description + "\n\n" if description else "")
        + f"Action item of the postmortem of {locked.reference}.",
        priority=priority,
        links=subjects,
    )
    pm, _ = Postmortem.objects.get_or_create(ticket=locked, defaults={"author": actor})
    PostmortemAction.objects.create(postmortem=pm, ticket=follow_up)
    timeline_add(
        ticket=locked,
        kind=TimelineKind.NOTE,
        actor=actor,
        message=f"Action item {follow_up.reference} opened: {follow_up.title}",
        data={"action_ticket": follow_up.pk},
    )
    return follow_up


# --- Markdown -----------------------------------------------------------------------------------------------------


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def postmortem_markdown(report: PostmortemReport) -> str:
    """The postmortem as a Markdown document (the download and the API's `markdown` endpoint)."""
    t, pm = report.ticket, report.postmortem
    cause = f"{pm.root_cause.name} ({pm.root_cause.slug})" if pm and pm.root_cause_id else "not set"
    out = [f"# Postmortem: {t.reference} {t.title}", ""]
    out += [
        f"- Incident: {report.start:%Y-%m-%d %H:%M} UTC to {report.end:%Y-%m-%d %H:%M} UTC",
        f"- Root cause: {cause}",
        f"- State: {t.state}",
        "",
        "## Summary",
        "",
        (pm.summary if pm and pm.summary else "_Not written yet._"),
        "",
    ]
    if pm and pm.root_cause_detail:
        out += ["## Root cause", "", pm.root_cause_detail, ""]
    out += ["## Impact", "", "| | value | derived |", "|---|---:|---:|"]
    for f in report.impact:
        out.append(f"| {f.label} | {f.value}{' (set by hand)' if f.is_override else ''} | {f.derived} |")
    out += ["", "## Timeline", "", "| at (UTC) | source | event |", "|---|---|---|"]
    for line in report.timeline:
        out.append(f"| {line.at:%Y-%m-%d %H:%M:%S} | {line.source} | {_md(line.text)} |")
    hours = int((report.start - report.window_start).total_seconds() // 3600)
    out += ["", f"## What changed ({hours} h before the start)", ""]
    if report.changes:
        out += ["| at (UTC) | object | action | fields | actor | source | ticket |", "|---|---|---|---|---|---|---|"]
        for c in report.changes:
            fields = ", ".join(sorted(c.changes)) if isinstance(c.changes, dict) else ""
            out.append(
                f"| {c.at:%Y-%m-%d %H:%M:%S} | {c.kind} {_md(c.object_repr)} | {c.action} | {_md(fields)} | "
                f"{_md(c.actor or '-')} | {c.source} | {c.ticket_reference or '-'} |"
            )
    else:
        out.append("No recorded change on the affected objects in the window.")
    if report.jobs:
        jobs = report.jobs
        out += ["", f"## Jobs on {jobs.get('node', '')} before the incident ({jobs.get('scheduler', '')})", ""]
        if jobs.get("note"):
            out += [f"_{_md(jobs['note'])}_", ""]
        if jobs.get("jobs"):
            out += ["| job | state | user | partition | name | started | ended |", "|---|---|---|---|---|---|---|"]
            for j in jobs["jobs"]:
                row = [j["job_id"], j["state"], j["user"], j["partition"], j["name"], j["start_at"], j["end_at"]]
                out.append("| " + " | ".join(_md(v or "-") for v in row) + " |")
            if jobs.get("total", 0) > len(jobs["jobs"]):
                out.append(f"\n{jobs['total'] - len(jobs['jobs'])} older job(s) not listed.")
        else:
            out.append("No jobs ran on the node in the window.")
    out += ["", "## Action items", ""]
    out += [f"- [{'x' if not a.is_open else ' '}] {a.reference} {a.title} ({a.state})" for a in report.actions] or [
        "None."
    ]
    if report.missing:
        out += ["", "## Missing before close", ""] + [f"- {m}" for m in report.missing]
    return "\n".join(out) + "\n"


__all__ = [
    "Affected",
    "PostmortemReport",
    "affected_objects",
    "incident_period",
    "postmortem_action_add",
    "postmortem_changes",
    "postmortem_markdown",
    "postmortem_missing",
    "postmortem_report",
    "postmortem_save",
    "root_causes_offered",
]
