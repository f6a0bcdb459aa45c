"""Reads for rollouts: which nodes a selector means, and the plain facts the planner needs about them.

Every read is a handful of set-based queries (values lists over a subquery of the selection), never a query
per node, so planning the whole 12,500-node fleet costs the same number of queries as planning ten nodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet

from cmdb.models import (
    Accelerator,
    AcceleratorLifecycle,
    AcceleratorModel,
    Cluster,
    DriverPackage,
    Node,
    NodeStatus,
)
from cmdb.selectors import component_versions

from .access import visible
from .locks import node_lock_holders
from .models import FINAL_STATUSES, IN_FLIGHT_NODE_STATES, TERMINAL_NODE_STATES, NodeRun, NodeRunState, Rollout
from .planning import CANARY_TAG, ClusterFacts, NodeFacts, PackageFacts

# Nodes that count towards a cluster's capacity: meant to serve, whether or not they can right now. Nodes being
# built (planned .. burn_in) or gone (rma, decommissioned) do not.
IN_SERVICE_STATUSES = (NodeStatus.ACTIVE, NodeStatus.DRAINING, NodeStatus.MAINTENANCE, NodeStatus.FAILED)


def _split(value: Any) -> tuple[str, ...]:
    """A list, or a comma/whitespace separated string, as a tuple of non-empty stripped strings."""
    if value is None:
        return ()
    items = value if isinstance(value, list | tuple) else str(value).replace(",", " ").split()
    return tuple(dict.fromkeys(str(i).strip() for i in items if str(i).strip()))


@dataclass(frozen=True)
class NodeSelector:
    """Which nodes a rollout is for. Criteria combine with AND; values within one criterion with OR.

    `accelerator_models` matches a node by the model of any card in it (or its server model's card model).
    `hostnames` is an explicit list; names that match no node are reported as refused, not silently dropped.
    """

    clusters: tuple[str, ...] = ()
    sites: tuple[str, ...] = ()
    accelerator_models: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    hostnames: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeSelector:
        return cls(**{name: _split(data.get(name)) for name in cls.__dataclass_fields__})

    def as_dict(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in asdict(self).items() if v}

    @property
    def is_empty(self) -> bool:
        return not any(asdict(self).values())

    def describe(self) -> str:
        parts = [f"{k.replace('_', ' ')}: {', '.join(v)}" for k, v in self.as_dict().items()]
        return "; ".join(parts) or "nothing"

    def problems(self) -> list[str]:
        """Names that do not exist (a typo in a cluster name must not silently select nothing)."""
        out = []
        for name, model, field in (("clusters", Cluster, "name"), ("accelerator_models", AcceleratorModel, "name")):
            wanted = set(getattr(self, name))
            if wanted:
                known = set(model.objects.filter(**{f"{field}__in": wanted}).values_list(field, flat=True))
                out += [f"no {name.rstrip('s').replace('_', ' ')} named {n!r}" for n in sorted(wanted - known)]
        if self.sites:
            from cmdb.models import Site

            known = set(Site.objects.filter(code__in=self.sites).values_list("code", flat=True))
            out += [f"no site {s!r}" for s in sorted(set(self.sites) - known)]
        return out


def nodes_select(selector: NodeSelector) -> QuerySet[Node]:
    """The nodes the selector means (no permission filter: callers restrict to what the user may change)."""
    qs = Node.objects.all()
    if selector.clusters:
        qs = qs.filter(cluster__name__in=selector.clusters)
    if selector.sites:
        qs = qs.filter(site__code__in=selector.sites)
    if selector.accelerator_models:
        with_cards = Accelerator.objects.filter(model__name__in=selector.accelerator_models, node__isnull=False).values(
            "node_id"
        )
        qs = qs.filter(Q(pk__in=with_cards) | Q(server_model__accelerator_model__name__in=selector.accelerator_models))
    if selector.tags:
        qs = qs.filter(pk__in=Node.tags.through.objects.filter(tag__slug__in=selector.tags).values("node_id"))
    if selector.hostnames:
        qs = qs.filter(hostname__in=selector.hostnames)
    return qs


def package_facts(package: DriverPackage) -> PackageFacts:
    supported = list(package.supported_models.values_list("id", flat=True))
    names = dict(AcceleratorModel.objects.values_list("id", "name"))
    return PackageFacts(
        component=package.component,
        version=package.version,
        supported_model_ids=frozenset(supported),
        model_names=names,
    )


def open_ticket_holders(node_ids: Iterable[int] | QuerySet, *, exclude_ticket_id: int | None = None) -> dict[int, str]:
    """{node id: "REP-12"} for nodes that are the subject of another open ticket (a repair in progress is a change
    on that node even when it took no lock)."""
    from workflows.models import LinkRole, TicketLink

    ids = node_ids if isinstance(node_ids, QuerySet) else list(node_ids)
    qs = TicketLink.objects.filter(node_id__in=ids, role=LinkRole.SUBJECT, ticket__is_open=True)
    if exclude_ticket_id:
        qs = qs.exclude(ticket_id=exclude_ticket_id)
    out: dict[int, str] = {}
    for link in qs.select_related("ticket").order_by("ticket_id"):
        out.setdefault(link.node_id, link.ticket.reference)
    return out


def cluster_facts(cluster_ids: Iterable[int]) -> list[ClusterFacts]:
    """Live capacity of the clusters: in-service and schedulable node counts (one aggregate query)."""
    ids = [c for c in set(cluster_ids) if c is not None]
    if not ids:
        return []
    counts = (
        Node.objects.filter(cluster_id__in=ids)
        .values("cluster_id")
        .annotate(
            in_service=Count("id", filter=Q(status__in=IN_SERVICE_STATUSES)),
            available=Count("id", filter=Q(status=NodeStatus.ACTIVE, is_cordoned=False)),
        )
    )
    by_id = {row["cluster_id"]: row for row in counts}
    return [
        ClusterFacts(
            id=c.pk,
            name=c.name,
            in_service=by_id.get(c.pk, {}).get("in_service", 0),
            available=by_id.get(c.pk, {}).get("available", 0),
            floor_percent=c.capacity_floor_percent,
        )
        for c in Cluster.objects.filter(pk__in=ids)
    ]


def node_facts(
    nodes: QuerySet[Node], package: DriverPackage, *, own_lock_key: str = "", own_ticket_id: int | None = None
) -> tuple[list[NodeFacts], list[ClusterFacts]]:
    """Facts about the selected nodes and their clusters, in a fixed number of queries.

    `own_lock_key` / `own_ticket_id`: the rollout being (re)planned, whose own locks and ticket are no conflict.
    """
    rows = list(
        nodes.values_list(
            "id",
            "hostname",
            "cluster_id",
            "rack_id",
            "status",
            "health",
            "is_cordoned",
            "server_model__accelerator_model_id",
        )
    )
    selection = nodes.values("pk")
    card_models: dict[int, set[int]] = defaultdict(set)
    # order_by(): the model's default ordering would add its column to the DISTINCT (one row per card, not per model).
    for node_id, model_id in (
        Accelerator.objects.filter(node_id__in=selection, lifecycle=AcceleratorLifecycle.INSTALLED)
        .values_list("node_id", "model_id")
        .order_by()
        .distinct()
    ):
        card_models[node_id].add(model_id)
    versions = component_versions(selection, package.component)
    locks = node_lock_holders(selection, exclude_key=own_lock_key)
    tickets = open_ticket_holders(selection, exclude_ticket_id=own_ticket_id)
    canary = set(
        Node.tags.through.objects.filter(node_id__in=selection, tag__slug=CANARY_TAG).values_list("node_id", flat=True)
    )
    facts = []
    for node_id, hostname, cluster_id, rack_id, status, health, cordoned, server_card_model in rows:
        models = card_models.get(node_id) or ({server_card_model} if server_card_model else set())
        holder = locks.get(node_id) or tickets.get(node_id, "")
        facts.append(
            NodeFacts(
                id=node_id,
                hostname=hostname,
                cluster_id=cluster_id,
                rack_id=rack_id,
                accelerator_model_ids=tuple(sorted(models)),
                installed_version=versions.get(node_id),
                status=status,
                health=health,
                is_cordoned=cordoned,
                locked_by=holder,
                tags=frozenset({CANARY_TAG}) if node_id in canary else frozenset(),
            )
        )
    return facts, cluster_facts(r[2] for r in rows)


@dataclass(frozen=True)
class RolloutInFlight:
    """A rollout not finished yet, with its node runs counted by outcome."""

    rollout: Rollout
    total: int
    succeeded: int
    failed: int
    in_flight: int
    pending: int

    @property
    def done(self) -> int:
        return self.total - self.in_flight - self.pending


def rollouts_in_flight(user: Any, *, limit: int = 20) -> tuple[list[RolloutInFlight], int]:
    """Unfinished rollouts `user` may see, newest first (at most `limit`), and how many there are: three
    queries (count, rows, node runs grouped by rollout and state), whatever the number of nodes."""
    qs = visible(user, Rollout).exclude(status__in=FINAL_STATUSES)
    total = qs.count()
    rollouts = list(qs.select_related("ticket", "package").order_by("-created_at", "-id")[:limit])
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    for rollout_id, state, n in (
        NodeRun.objects.filter(rollout__in=[r.pk for r in rollouts])
        .order_by()
        .values_list("rollout_id", "state")
        .annotate(n=Count("id"))
    ):
        counts[rollout_id][state] = n
    out = []
    for r in rollouts:
        c = counts.get(r.pk, {})
        out.append(
            RolloutInFlight(
                rollout=r,
                total=sum(c.values()),
                succeeded=c.get(NodeRunState.SUCCEEDED, 0),
                failed=c.get(NodeRunState.FAILED, 0) + c.get(NodeRunState.CANCELLED, 0),
                in_flight=sum(c.get(s, 0) for s in IN_FLIGHT_NODE_STATES),
                pending=sum(
                    n for s, n in c.items() if s not in IN_FLIGHT_NODE_STATES and s not in TERMINAL_NODE_STATES
                ),
            )
        )
    return out, total


# --- dry runs: what "succeeded" without changing anything -----------------------------------------------------

DRY_RUN_NOTE = "dry run - nothing changed"
DRY_RUN_NOTES_SHOWN = 5


@dataclass(frozen=True)
class DryRunNote:
    """One piece of work that reported success while a dry-run adapter only logged it."""

    text: str  # starts with DRY_RUN_NOTE
    href: str  # the ticket (or the rollout), "" when the user may not see it
    at: Any  # datetime or None


def node_dry_run_notes(node: Node, user: Any = None) -> list[DryRunNote]:
    """Driver rollouts and provisioning of `node` that ran dry (newest first, at most DRY_RUN_NOTES_SHOWN each):
    the node page says "dry run - nothing changed" so a "succeeded" run is not read as an installed driver or a
    configured switch port. The caller has checked that `user` may see the node; a ticket the user may not see
    is named without its link. Two queries, plus one visibility check per note shown (at most 10)."""
    from .access import can_see
    from .models import NodeRun, NodeRunState, ProvisioningRun

    notes: list[DryRunNote] = []
    runs = (
        NodeRun.objects.filter(node_id=node.pk, is_dry_run=True, state=NodeRunState.SUCCEEDED)
        .select_related("rollout__package", "rollout__ticket")
        .order_by("-finished_at", "-pk")[:DRY_RUN_NOTES_SHOWN]
    )
    for run in runs:
        rollout = run.rollout
        where = rollout.ticket.reference if rollout.ticket_id else rollout.label
        notes.append(
            DryRunNote(
                text=f"{DRY_RUN_NOTE}: {where} reported {rollout.component} {run.target_version} as done, but the "
                f"executor only logged its commands; the node keeps {run.previous_version or 'its old version'}.",
                href=_dry_run_href(user, rollout, can_see),
                at=run.finished_at,
            )
        )
    provisioning = (
        ProvisioningRun.objects.filter(node_id=node.pk)
        .filter(Q(options__driver_dry_run=True) | Q(options__switch_config_dry_run=True))
        .select_related("ticket")
        .order_by("-pk")[:DRY_RUN_NOTES_SHOWN]
    )
    for prun in provisioning:
        notes.extend(
            DryRunNote(text=text, href=_dry_run_href(user, prun, can_see), at=None)
            for text in provisioning_dry_run_texts(prun)
        )
    return notes


def provisioning_dry_run_texts(run: Any) -> list[str]:
    """What a provisioning run only pretended to do (driver install, switch port pushes)."""
    where = run.ticket.reference if run.ticket_id else f"provisioning of {run.hostname}"
    texts = []
    if run.options.get("switch_config_dry_run"):
        texts.append(
            f"{DRY_RUN_NOTE}: {where} showed the switch port changes but pushed none "
            "(GPUOPS_SWITCH_CONFIG_DRY_RUN is set)."
        )
    if run.options.get("driver_dry_run"):
        texts.append(f"{DRY_RUN_NOTE}: {where} installed no driver baseline (the executor is the dry-run executor).")
    return texts


def _dry_run_href(user: Any, obj: Any, can_see: Any) -> str:
    if user is None or not can_see(user, obj):
        return ""
    return obj.ticket.get_absolute_url() if obj.ticket_id else ""


def ticket_dry_run_notes(ticket: Any) -> list[str]:
    """For the ticket page: "dry run - nothing changed" lines of the ticket's rollout or provisioning run
    (empty for any other ticket, or when everything ran for real). One or two queries."""
    from .models import NodeRun, NodeRunState, ProvisioningRun, Rollout
    from .progress import DRY_RUN_NOTE as ROLLOUT_NOTE

    if ticket.type == "driver_rollout":
        rollout = Rollout.objects.filter(ticket_id=ticket.pk).only("pk").first()
        if rollout is None:
            return []
        dry = NodeRun.objects.filter(rollout=rollout, is_dry_run=True, state=NodeRunState.SUCCEEDED).count()
        return [f"{ROLLOUT_NOTE} ({dry} node run{'s' if dry != 1 else ''} only logged)."] if dry else []
    if ticket.type == "provisioning":
        run = ProvisioningRun.objects.filter(ticket_id=ticket.pk).select_related("ticket").first()
        return provisioning_dry_run_texts(run) if run is not None else []
    return []


__all__ = [
    "DRY_RUN_NOTE",
    "IN_SERVICE_STATUSES",
    "DryRunNote",
    "NodeSelector",
    "RolloutInFlight",
    "cluster_facts",
    "node_dry_run_notes",
    "node_facts",
    "nodes_select",
    "open_ticket_holders",
    "package_facts",
    "provisioning_dry_run_texts",
    "rollouts_in_flight",
    "ticket_dry_run_notes",
]
