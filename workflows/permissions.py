"""Who may see and move tickets.

Seeing a ticket (`workflows.view_ticket`), checked through cmdb.permissions so tickets follow the same rules as
inventory: the global permission (ops leads), a scope grant on the ticket's site or cluster (a technician of
site A sees site A's tickets), or a direct guardian grant on the ticket, which `ticket_grants_sync` gives its
requester, assignee, assignee group and watchers.

Taking a transition: seeing the ticket and holding `workflows.<transition permission>` globally (through a
group: dc-technicians, ops-leads) or on the ticket, or being its requester where the transition allows it.
System transitions are the engine's alone. Approving: the approval permission, and never one's own ticket.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db.models import QuerySet
from guardian.shortcuts import assign_perm

from cmdb.permissions import can, restrict

from .declarations import Transition
from .models import Ticket

VIEW = "view_ticket"
OPERATE = "operate_ticket"


def _active(user: AbstractBaseUser | None) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active)


def tickets_visible(user: AbstractBaseUser | None, queryset: QuerySet[Ticket] | None = None) -> QuerySet[Ticket]:
    """The tickets `user` may see."""
    return restrict(queryset if queryset is not None else Ticket.objects.all(), user, "view")


def can_view(user: AbstractBaseUser | None, ticket: Ticket) -> bool:
    return _active(user) and can(user, "view", ticket)


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
    if transition.is_system or not can_view(user, ticket):
        return False
    if transition.allow_requester and ticket.requester_id and ticket.requester_id == user.pk:
        return True
    return has_ticket_perm(user, transition.permission or "", ticket)


def can_operate(user: AbstractBaseUser | None, ticket: Ticket) -> bool:
    """Pause, resume, retry automated steps."""
    return can_view(user, ticket) and has_ticket_perm(user, OPERATE, ticket)


def can_change(user: AbstractBaseUser | None, ticket: Ticket) -> bool:
    """Edit title, plans, assignment."""
    if not can_view(user, ticket):
        return False
    return (ticket.requester_id is not None and ticket.requester_id == user.pk) or has_ticket_perm(
        user, "change_ticket", ticket)


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
            _, was_created = Permission.objects.get_or_create(content_type=ct, codename=codename,
                                                              defaults={"name": name[:255]})
            created += was_created
    return created


def group_permissions_set(group: Group, codenames: list[str]) -> None:
    """Give a group these workflows permissions (global, i.e. for every ticket it can see)."""
    ct = ContentType.objects.get_for_model(Ticket)
    group.permissions.add(*Permission.objects.filter(content_type=ct, codename__in=codenames))
