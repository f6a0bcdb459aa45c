"""Console pages: a node and an accelerator card, with what touches them (cabling, software, tickets, health,
the agent's last report, the change history), and the node's cordon / uncordon.

Each page runs a fixed number of queries whatever the node holds: lists are fetched in one query each (or
prefetched) and capped at the newest LIST_LIMIT rows with a link to the full list. The object itself is found
through cmdb.permissions.restrict (outside the user's scope: 404); the lists around it are filtered with the
user's view grants read once (changes.ViewScope). Writes go through cmdb.services.nodes, which check the
user's change rights and the holds of open tickets themselves; a refusal is shown on the page.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet, Subquery, prefetch_related_objects
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from cmdb.compliance import node_compliance
from cmdb.holds import HeldError, holds_for, may_override
from cmdb.models import (
    Accelerator,
    AcceleratorPlacement,
    HealthEvent,
    InstalledSoftware,
    Nic,
    NicPort,
    Node,
    Switch,
)
from cmdb.permissions import can, has_global, restrict, scope_lookups_cached
from cmdb.services.nodes import node_cordon, node_uncordon
from integrations.schedulers.selectors import scheduler_drift_open_for_node
from integrations.switches.models import ObservedLink
from inventory_agents.models import Report
from workflows.models import Ticket, TicketLink
from workflows.registry import workflow_or_none
from workflows.rollouts.selectors import node_dry_run_notes
from workflows.selectors import state_tone, ticket_list

from ..history import ViewScope, change_rows, object_changes, object_filter_value
from ..topology_selectors import node_topology_matrix

LIST_LIMIT = 20


# --- shared ------------------------------------------------------------------------------------------------------


def _capped(qs: QuerySet, limit: int = LIST_LIMIT) -> tuple[list[Any], bool]:
    """The first `limit` rows and whether there are more (one query)."""
    rows = list(qs[: limit + 1])
    return rows[:limit], len(rows) > limit


def _ticket_rows(user: Any, links: QuerySet[TicketLink]) -> tuple[list[dict[str, Any]], bool]:
    """Tickets the user may see among those linked by `links` (OuterRef ticket): open first, then newest."""
    # Without the list's prefetch of links (not shown here): it would run only when there are tickets.
    qs = (
        ticket_list(user, {"status": "all"})
        .filter(Exists(links))
        .prefetch_related(None)
        .order_by("-is_open", "-created_at", "-id")
    )
    tickets, more = _capped(qs)
    rows = []
    for t in tickets:
        wf = workflow_or_none(t.type)
        rows.append(
            {
                "ticket": t,
                "wf": wf,
                "tone": state_tone(wf, t.state),
                "state_label": wf.state_label(t.state) if wf else t.state,
            }
        )
    return rows, more


def _may_open_tickets(user: Any, can_change: bool) -> bool:
    """Opening a repair or a rollout needs the ticket permission and change rights where it acts (the engine
    checks again; this only decides whether the links are shown)."""
    may_add = user.is_superuser or user.has_perm("workflows.add_ticket")
    return may_add and (can_change or has_global(user, Ticket, "change"))


def _repair_url(card: Accelerator, node: Node | None) -> str:
    where = f" in {node.hostname} slot {card.slot_index}" if node is not None else ""
    return "/tickets/new/repair/?" + urlencode({"accelerator": card.serial or "", "title": f"Repair {card}{where}"})


# --- node --------------------------------------------------------------------------------------------------------


def _node_or_404(request: HttpRequest, hostname: str) -> Node:
    qs = Node.objects.select_related(
        "site", "rack__room__site", "server_model__vendor", "server_model__accelerator_model", "cluster", "tenant"
    )
    node = restrict(qs, request.user, "view").filter(hostname=hostname).first()
    if node is None:
        raise Http404("No such node.")
    return node


def _cards(node: Node, scope: ViewScope) -> list[Accelerator]:
    """The node's cards by slot, each with its newest health event: the id of that event in a subquery, then those
    events in one query (run whatever the cards hold). Two queries, no query per card: four correlated
    subqueries, one per column shown, cost more to compile than the two queries together."""
    last = HealthEvent.objects.filter(accelerator=OuterRef("pk")).order_by("-last_seen_at", "-id")
    cards = list(
        scope.filter(Accelerator.objects.filter(node=node))
        .select_related("model__vendor")
        .annotate(last_event_id=Subquery(last.values("pk")[:1]))
        .order_by("slot_index", "id")
    )
    wanted = sorted({c.last_event_id for c in cards if c.last_event_id is not None}) or [0]
    events = {
        e["pk"]: e
        for e in HealthEvent.objects.filter(pk__in=wanted).values("pk", "kind", "code", "severity", "last_seen_at")
    }
    for card in cards:
        event = events.get(card.last_event_id, {})
        card.last_event_kind = event.get("kind")
        card.last_event_code = event.get("code")
        card.last_event_severity = event.get("severity")
        card.last_event_at = event.get("last_seen_at")
    return cards


def _nics(node: Node, scope: ViewScope) -> list[Nic]:
    """NICs with their ports, each port's planned cable and far end, and what discovery observed on it. Four
    queries, each run whatever the node holds (no prefetch that is skipped when a list is empty)."""
    nics = list(scope.filter(Nic.objects.filter(node=node)).order_by("name"))
    ports_by_nic: dict[int, list[NicPort]] = {}
    ports = (
        scope.filter(NicPort.objects.filter(nic__node=node))
        .select_related("link__b_switch_port__switch")
        .order_by("nic_id", "name")
    )
    for port in ports:
        ports_by_nic.setdefault(port.nic_id, []).append(port)
    observed: dict[int, list[ObservedLink]] = {}
    for obs in ObservedLink.objects.filter(nic_port__nic__node=node).select_related("switch_port__switch"):
        observed.setdefault(obs.nic_port_id, []).append(obs)
    # A far end in a site the user may not see is shown without its name.
    # Only the switches these ports lead to (a join from every switch was a scan of the whole fabric); [0] keeps
    # the query run when there are none, so the page's query count does not depend on the cabling.
    far_ids = {p.link.b_switch_port.switch_id for p in ports if getattr(p, "link", None)}
    far_ids |= {o.switch_port.switch_id for rows in observed.values() for o in rows if o.switch_port_id}
    visible = set(scope.filter(Switch.objects.filter(pk__in=sorted(far_ids) or [0])).values_list("pk", flat=True))
    for nic in nics:
        nic.port_rows = ports_by_nic.get(nic.pk, [])
        for port in nic.port_rows:
            link = getattr(port, "link", None)
            port.planned = link
            port.far_visible = bool(link and link.b_switch_port.switch_id in visible)
            port.observed = [
                {
                    "obs": o,
                    "visible": bool(o.switch_port_id and o.switch_port.switch_id in visible),
                    "matches": bool(link and o.switch_port_id == link.b_switch_port_id),
                }
                for o in observed.get(port.pk, [])
            ]
            port.cabling = _cabling_verdict(link, port.observed)
    return nics


def _cabling_verdict(link: Any, observed: list[dict[str, Any]]) -> str:
    if link is None:
        return "observed only" if observed else "not cabled"
    if not observed:
        return "not observed"
    return "matches plan" if any(o["matches"] for o in observed) else "differs from plan"


def node_context(request: HttpRequest, node: Node) -> dict[str, Any]:
    user = request.user
    scope = ViewScope.of(user)
    links = TicketLink.objects.filter(ticket=OuterRef("pk")).filter(Q(node=node) | Q(accelerator__node=node))
    tickets, more_tickets = _ticket_rows(user, links)
    events, more_events = _capped(
        scope.filter(HealthEvent.objects.filter(node=node))
        .select_related("accelerator")
        .order_by("-last_seen_at", "-id")
    )
    history, more_history = _capped(object_changes(scope, node))
    report = scope.filter(Report.objects.filter(node=node)).defer("payload").order_by("-received_at").first()
    can_change = can(user, "change", node)
    cards = _cards(node, scope)
    # Read once for the software panel and the compliance table (which reads node.installed_software).
    prefetch_related_objects([node], Prefetch("installed_software", InstalledSoftware.objects.order_by("component")))
    return {
        "node": node,
        "cards": cards,
        "failed_cards": [c for c in cards if c.health == "failed" and c.serial],
        "nics": _nics(node, scope),
        "topology": node_topology_matrix(node),
        "software": list(node.installed_software.all()),
        "tickets": tickets,
        "more_tickets": more_tickets,
        "events": events,
        "more_events": more_events,
        "history": change_rows(history, scope),
        "more_history": more_history,
        "history_query": urlencode({"object": object_filter_value(node)}),
        "report": report,
        "firmware_rows": node_compliance(node),
        "holders": holds_for(node_ids=[node.pk]).get(node.pk, []),
        # Rollouts and provisioning that "succeeded" under a dry-run adapter: the node kept its old state.
        "dry_run_notes": node_dry_run_notes(node, user),
        "can_change": can_change,
        "can_override": can_change and may_override(user),
        "may_open_tickets": _may_open_tickets(user, can_change),
        "rollout_url": "/tickets/new/driver_rollout/?"
        + urlencode({"hostnames": node.hostname, "title": f"Driver rollout on {node.hostname}"}),
    }


@login_required
def node_detail_view(request: HttpRequest, hostname: str) -> HttpResponse:
    with scope_lookups_cached():  # the node, its cards, NICs, events and history: one read of the user's grants
        node = _node_or_404(request, hostname)
        return _node_render(request, node)


def _node_render(request: HttpRequest, node: Node, *, status: int = 200, **extra: Any) -> HttpResponse:
    context = node_context(request, node)
    context["scheduler_drift"] = scheduler_drift_open_for_node(node)
    context["repair_links"] = (
        {c.pk: _repair_url(c, node) for c in context["cards"] if c.serial} if context["may_open_tickets"] else {}
    )
    context.update(extra)
    return render(request, "console/node_detail.html", context, status=status)


def _schedulability_change(request: HttpRequest, hostname: str, *, cordon: bool) -> HttpResponse:
    node = _node_or_404(request, hostname)
    reason = request.POST.get("reason", "").strip()
    override = request.POST.get("override_hold") == "1"
    try:
        if cordon:
            node_cordon(node=node, reason=reason, override_hold=override)
        else:
            node_uncordon(node=node, override_hold=override)
    except HeldError as exc:
        return _node_render(request, node, status=409, action_error=exc.message, reason=reason)
    except PermissionDenied as exc:
        message = str(exc) or f"You may not change node {node.hostname}."
        return _node_render(request, node, status=403, action_error=message, reason=reason)
    except ValidationError as exc:
        message = " ".join(exc.messages)
        return _node_render(request, node, status=400, action_error=message, reason=reason)
    messages.success(request, f"{node.hostname} is {'cordoned' if cordon else 'schedulable again'}.")
    return HttpResponseRedirect(reverse("console:node-detail", args=[node.hostname]))


@login_required
@require_POST
def node_cordon_view(request: HttpRequest, hostname: str) -> HttpResponse:
    return _schedulability_change(request, hostname, cordon=True)


@login_required
@require_POST
def node_uncordon_view(request: HttpRequest, hostname: str) -> HttpResponse:
    return _schedulability_change(request, hostname, cordon=False)


# --- accelerator -------------------------------------------------------------------------------------------------


def _card_or_404(request: HttpRequest, serial: str) -> Accelerator:
    qs = Accelerator.objects.select_related(
        "model__vendor", "site", "node__site", "node__cluster", "stock_location__site"
    )
    card = restrict(qs, request.user, "view").filter(serial=serial).first()
    if card is None:
        raise Http404("No such accelerator.")
    return card


@login_required
def accelerator_detail_view(request: HttpRequest, serial: str) -> HttpResponse:
    with scope_lookups_cached():  # one read of the user's grants for the card and every list around it
        return _accelerator_render(request, _card_or_404(request, serial))


def _accelerator_render(request: HttpRequest, card: Accelerator) -> HttpResponse:
    user = request.user
    scope = ViewScope.of(user)
    placements, more_placements = _capped(
        AcceleratorPlacement.objects.filter(accelerator=card)
        .select_related("stock_location__site", "actor")
        .order_by("-started_at", "-id")
    )
    events, more_events = _capped(
        scope.filter(HealthEvent.objects.filter(accelerator=card))
        .select_related("node")
        .order_by("-last_seen_at", "-id")
    )
    tickets, more_tickets = _ticket_rows(user, TicketLink.objects.filter(ticket=OuterRef("pk"), accelerator=card))
    history, more_history = _capped(object_changes(scope, card))
    can_change = can(user, "change", card)
    may_open = _may_open_tickets(user, can_change)
    return render(
        request,
        "console/accelerator_detail.html",
        {
            "card": card,
            "placements": placements,
            "more_placements": more_placements,
            "events": events,
            "more_events": more_events,
            "tickets": tickets,
            "more_tickets": more_tickets,
            "history": change_rows(history, scope),
            "more_history": more_history,
            "history_query": urlencode({"object": object_filter_value(card)}),
            "repair_url": _repair_url(card, card.node) if may_open and card.serial else "",
        },
    )


urlpatterns: list[URLPattern] = [
    path("nodes/<str:hostname>/", node_detail_view, name="node-detail"),
    path("nodes/<str:hostname>/cordon/", node_cordon_view, name="node-cordon"),
    path("nodes/<str:hostname>/uncordon/", node_uncordon_view, name="node-uncordon"),
    path("accelerators/<str:serial>/", accelerator_detail_view, name="accelerator-detail"),
]
