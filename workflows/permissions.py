"""Who may see and move tickets.

Tickets follow the inventory's scopes (cmdb.permissions): groups give roles, scopes give where.

Seeing a ticket (and commenting): the global `workflows.view_ticket` (ops leads, approvers), a scope grant on
the ticket's site or cluster, or a global view of nodes. A direct guardian grant on the ticket - which
`ticket_grants_sync` gives its requester, assignee, assignee group and watchers - counts only for tickets on
no site (procurement): the dc-technicians group is every repair's assignee and must not show site B to a
technician of site A.

Taking a transition, operating automation, editing: seeing the ticket, change rights where it is (a
`change_scope` grant there or the global permission), and `workflows.<transition permission>` globally or on
the ticket (or being its requester where the transition allows it). System transitions are the engine's
alone. Approving: the approval permission, and never one's own ticket.

Opening a ticket: change rights on every object it will touch (`ticket_objects_check`), unless one holds the
global `workflows.change_ticket` (ops leads: a global role that may move any ticket anyway).
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.db.models import Q, QuerySet
from guardian.shortcuts import assign_perm

from cmdb.permissions import can, has_global, in_scopes, restrict, scope_q

from .declarations import Transition
from .models import Ticket, TicketLink

VIEW = "view_ticket"
OPERATE = "operate_ticket"


def _active(user: AbstractBaseUser | None) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active)


def _unscoped(ticket: Ticket) -> bool:
    return ticket.site_id is None and ticket.cluster_id is None


def _sees_every_node(user: AbstractBaseUser, action: str = "view") -> bool:
    """A global node permission reaches every ticket's objects, so a direct grant on a ticket may count."""
    from cmdb.models import Node

    return has_global(user, Node, action)


def tickets_visible(user: AbstractBaseUser | None, queryset: QuerySet[Ticket] | None = None) -> QuerySet[Ticket]:
    """The tickets `user` may see.

    A ticket on a site or cluster is visible through the global permission or a scope grant there only: a
    grant on the ticket (its assignee group, say dc-technicians) must not show a site-A technician site B's
    work. Tickets on no site (procurement) keep their direct grants."""
    qs = queryset if queryset is not None else Ticket.objects.all()
    if not _active(user):
        return qs.none()
    if has_global(user, Ticket, "view"):
        return qs
    if _sees_every_node(user):
        return restrict(qs, user, "view")
    return restrict(qs, user, "view").filter(
        scope_q(Ticket, user, "view") | Q(site_id__isnull=True, cluster_id__isnull=True)
    )


def can_view(user: AbstractBaseUser | None, ticket: Ticket) -> bool:
    if not _active(user):
        return False
    if has_global(user, Ticket, "view") or in_scopes(user, "view", ticket):
        return True
    return (_unscoped(ticket) or _sees_every_node(user)) and can(user, "view", ticket)


def can_act(user: AbstractBaseUser | None, ticket: Ticket) -> bool:
    """Whether `user` may move the ticket at all (transitions, automation, edits): change rights where it is.
    Seeing a ticket (a view-only scope) is enough to comment, not to drain a node through it."""
    if not can_view(user, ticket):
        return False
    return (
        has_global(user, Ticket, "change")
        or in_scopes(user, "change", ticket)
        or _unscoped(ticket)
        or _sees_every_node(user, "change")
    )


def has_ticket_perm(user: AbstractBaseUser | None, codename: str, ticket: Ticket) -> bool:
    """`workflows.<codename>` globally (user or group) or on this ticket (guardian)."""
    if not _active(user):
        return False
    if user.is_superuser:
        return True
    perm = f"workflows.{codename}"
    return user.has_perm(perm) or user.has_perm(perm, ticket)


def can_take(user: AbstractBaseUser | None, ticket: Ticket, transition: Transition) -> bool:
    """Whether a person may take `transition` on `ticket` (its state and guards are the engine's business)."""
    if transition.is_system or not can_act(user, ticket):
        return False
    if transition.allow_requester and ticket.requester_id and ticket.requester_id == user.pk:
        return True
    return has_ticket_perm(user, transition.permission or "", ticket)


def can_operate(user: AbstractBaseUser | None, ticket: Ticket) -> bool:
    """Pause, resume, retry automated steps."""
    return can_act(user, ticket) and has_ticket_perm(user, OPERATE, ticket)


def can_change(user: AbstractBaseUser | None, ticket: Ticket) -> bool:
    """Edit title, plans, assignment."""
    if not can_act(user, ticket):
        return False
    return (ticket.requester_id is not None and ticket.requester_id == user.pk) or has_ticket_perm(
        user, "change_ticket", ticket
    )


def _ticket_objects(ticket: Ticket) -> list[models.Model]:
    from cmdb.models import Fabric

    objs: list[models.Model] = []
    for link in ticket.links.select_related(*TicketLink.OBJECT_FIELDS):
        obj = next((getattr(link, f) for f in link.OBJECT_FIELDS if getattr(link, f"{f}_id")), None)
        if obj is not None:
            objs.append(obj)
    if fabric_id := (ticket.data or {}).get("fabric_id"):
        objs.extend(Fabric.objects.filter(pk=fabric_id))
    return objs


def ticket_objects_check(actor: AbstractBaseUser | None, ticket: Ticket) -> list[str]:
    """Opening a ticket needs change rights on every object it will touch (its nodes, cards, switches, cables,
    fabric): a ticket's steps drain nodes and reserve spares, so opening one is a write there. The system
    (actor None) opens tickets from health events. Returns one reason per refused object (empty: allowed)."""
    if actor is None:
        return []
    if has_global(actor, Ticket, "change"):
        return []  # ops leads: a global ticket role by design (they may take any transition on any ticket anyway)
    from cmdb.models import Accelerator, Health

    refused = []
    for obj in _ticket_objects(ticket):
        if can(actor, "change", obj):
            continue
        kind = obj._meta.verbose_name
        if isinstance(obj, Accelerator) and obj.health == Health.OK:
            refused.append(
                f"Card {obj.serial} is healthy: a repair would drain its node, which needs change "
                f"rights there, and you have none."
            )
        else:
            refused.append(f"You may not open a ticket on {kind} {obj}: it needs change rights there.")
    return refused


def ticket_grants_sync(ticket: Ticket) -> None:
    """Give `view_ticket` on this ticket to its requester, assignee, assignee group and watchers.

    The one place tickets are granted. Grants are only added: someone who was assigned once keeps seeing the
    ticket they worked on.
    """
    for user in [ticket.requester, ticket.assignee, *ticket.watchers.all()]:
        if user is not None:
            assign_perm(VIEW, user, ticket)
    if ticket.assignee_group is not None:
        assign_perm(VIEW, ticket.assignee_group, ticket)


def transition_permissions_ensure() -> int:
    """Create the Permission rows every registered workflow checks (Ralph creates one per transition).
    Runs after migrate; returns how many were created."""
    from .registry import workflows

    ct = ContentType.objects.get_for_model(Ticket)
    created = 0
    for wf in workflows():
        for codename, name in wf.permissions():
            _, was_created = Permission.objects.get_or_create(
                content_type=ct, codename=codename, defaults={"name": name[:255]}
            )
            created += was_created
    return created


def group_permissions_set(group: Group, codenames: list[str]) -> None:
    """Give a group these workflows permissions (global, i.e. for every ticket it can see)."""
    ct = ContentType.objects.get_for_model(Ticket)
    group.permissions.add(*Permission.objects.filter(content_type=ct, codename__in=codenames))
