"""Who may see rollouts and provisioning runs: whoever may see their ticket, plus holders of the global
`rollouts.view_rollout` / `rollouts.view_provisioningrun` permission (ops leads). A run without a ticket (made by
a script) is visible to the global permission only."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Model, Q, QuerySet

from workflows.permissions import can_view, tickets_visible

from .models import ProvisioningRun, Rollout


def _global(user: AbstractBaseUser | None, model: type[Model]) -> bool:
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return user.is_superuser or user.has_perm(f"rollouts.view_{model._meta.model_name}")


def visible(user: AbstractBaseUser | None, model: type[Model]) -> QuerySet:
    """Rollouts (or provisioning runs) the user may see."""
    qs = model.objects.all()
    if _global(user, model):
        return qs
    if user is None or not user.is_authenticated:
        return qs.none()
    return qs.filter(Q(ticket__in=tickets_visible(user)))


def can_see(user: AbstractBaseUser | None, obj: Rollout | ProvisioningRun) -> bool:
    if _global(user, type(obj)):
        return True
    return bool(obj.ticket_id and user is not None and can_view(user, obj.ticket))


__all__ = ["can_see", "visible"]
