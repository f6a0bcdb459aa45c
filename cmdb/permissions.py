"""Object permissions: django-guardian grants, scoped by Site, Cluster and Tenant.

Three ways to be allowed to act on a CMDB object, checked in this order:
1. superuser, or the global model permission (`cmdb.change_node` on the user or a group): every row;
2. a scope grant: `view_scope` / `change_scope` on a Site, Cluster or Tenant (guardian object permission)
   covers every object under it (a technician of site A edits site A's racks and nodes, sees nothing of B);
3. a direct guardian grant on the object itself (`cmdb.change_node` for one node).

`change_scope` implies `view_scope`. Catalog models (vendors, models, driver packages, tags, health
policies) are readable by every authenticated user and writable only with the global permission.
All grants go through `grant_scope` so there is one way in.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.apps import apps
from django.contrib.auth.models import AbstractBaseUser, Group
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.db.models import Q, QuerySet
from django.db.models.functions import Cast
from guardian.models import GroupObjectPermission, UserObjectPermission
from guardian.shortcuts import assign_perm, remove_perm

SCOPE_MODELS = ("site", "cluster", "tenant")

# model label -> {scope: ORM path to that scope's id}. A path of "pk" means the object is the scope itself.
SCOPE_PATHS: dict[str, dict[str, str]] = {
    "cmdb.site": {"site": "pk"},
    "cmdb.room": {"site": "site_id"},
    "cmdb.rack": {"site": "room__site_id"},
    "cmdb.cluster": {"site": "site_id", "cluster": "pk"},
    "cmdb.tenant": {"tenant": "pk"},
    "cmdb.node": {"site": "site_id", "cluster": "cluster_id", "tenant": "tenant_id"},
    "cmdb.component": {"site": "node__site_id", "cluster": "node__cluster_id", "tenant": "node__tenant_id"},
    "cmdb.nic": {"site": "node__site_id", "cluster": "node__cluster_id", "tenant": "node__tenant_id"},
    "cmdb.nicport": {
        "site": "nic__node__site_id",
        "cluster": "nic__node__cluster_id",
        "tenant": "nic__node__tenant_id",
    },
    "cmdb.accelerator": {"site": "site_id", "cluster": "node__cluster_id", "tenant": "node__tenant_id"},
    "cmdb.acceleratorplacement": {"site": "accelerator__site_id"},
    "cmdb.installedsoftware": {"site": "node__site_id", "cluster": "node__cluster_id", "tenant": "node__tenant_id"},
    "cmdb.nodefirmware": {"site": "node__site_id", "cluster": "node__cluster_id", "tenant": "node__tenant_id"},
    "cmdb.firmwarecomponent": {"site": "node__site_id", "cluster": "node__cluster_id", "tenant": "node__tenant_id"},
    "cmdb.healthevent": {"site": "node__site_id", "cluster": "node__cluster_id", "tenant": "node__tenant_id"},
    "cmdb.nodeallocation": {"site": "node__site_id", "cluster": "node__cluster_id", "tenant": "node__tenant_id"},
    "cmdb.nodestatespan": {"site": "node__site_id", "cluster": "node__cluster_id", "tenant": "node__tenant_id"},
    "cmdb.cardhours": {"site": "site_id", "cluster": "cluster_id", "tenant": "tenant_id"},
    "cmdb.fabric": {"site": "site_id"},
    "cmdb.switch": {"site": "site_id"},
    "cmdb.switchport": {"site": "switch__site_id"},
    "cmdb.link": {"site": "fabric__site_id"},
    "cmdb.stocklocation": {"site": "site_id"},
    "cmdb.partitem": {"site": "stock_location__site_id"},
    "cmdb.rackunit": {"site": "rack__room__site_id"},
    "cmdb.maintenancewindow": {"site": "site_id", "cluster": "cluster_id"},
}

CATALOG_MODELS = {
    "cmdb.vendor",
    "cmdb.acceleratormodel",
    "cmdb.servermodel",
    "cmdb.partmodel",
    "cmdb.tag",
    "cmdb.driverpackage",
    "cmdb.healthpolicy",
    "cmdb.firmwarebaseline",
}


def _label(model: type[models.Model]) -> str:
    return model._meta.label_lower


def register_scope(model: type[models.Model], paths: dict[str, str]) -> None:
    """Let another app's model be scoped the same way (e.g. a ticket scoped by its node's site)."""
    SCOPE_PATHS[_label(model)] = paths


# Scope ids memoised for the duration of `scope_lookups_cached()` (None outside it: every call asks guardian).
_scope_memo: ContextVar[dict[tuple[Any, str, str], list[int]] | None] = ContextVar("scope_memo", default=None)


@contextmanager
def scope_lookups_cached() -> Iterator[None]:
    """Within the block, each user's scope grants are read once (a page restricting ten querysets asks guardian
    six queries, not sixty). A grant or group membership written inside the block empties the memo
    (`scope_lookups_forget`), so a write is never checked against grants it has just changed."""
    token = _scope_memo.set({})
    try:
        yield
    finally:
        _scope_memo.reset(token)


def scope_lookups_forget(**kwargs: Any) -> None:
    """Empty the memo of `scope_lookups_cached` (connected to guardian grant and group-membership writes)."""
    memo = _scope_memo.get()
    if memo:
        memo.clear()


def user_scope_ids(user: AbstractBaseUser, scope: str, action: str = "view") -> list[int]:
    """The ids of the Sites, Clusters or Tenants (`scope`) whose grants let `user` view (or change) what is under
    them: a selector for pages that filter many querysets with one read of the grants. Inside
    `scope_lookups_cached()` the first call reads every scope grant of the user (one query) for the calls after."""
    memo = _scope_memo.get()
    wanted = "view" if action == "view" else "change"
    if memo is None:
        return _scope_grants(user, [scope])[scope, wanted]
    key = (user.pk, scope, wanted)
    if key not in memo:
        for (name, act), ids in _scope_grants(user, list(SCOPE_MODELS)).items():
            memo[user.pk, name, act] = ids
    return list(memo[key])


def _scope_grants(user: AbstractBaseUser, scopes: list[str]) -> dict[tuple[str, str], list[int]]:
    """(scope, "view" / "change") -> ids, for each of `scopes`: the user's own grants and their groups', in one
    query. `change_scope` implies `view_scope`."""
    out: dict[tuple[str, str], set[int]] = {(s, a): set() for s in scopes for a in ("view", "change")}
    if user is None or user.pk is None:
        return {k: [] for k in out}
    cts = ContentType.objects.get_for_models(*(apps.get_model("cmdb", s) for s in scopes))  # cached per process
    names = {ct.pk: model._meta.model_name for model, ct in cts.items()}
    grant = {"content_type_id__in": sorted(names), "permission__codename__in": ["view_scope", "change_scope"]}
    fields = ("content_type_id", "object_pk", "permission__codename")
    own = UserObjectPermission.objects.filter(user_id=user.pk, **grant).values_list(*fields)
    via_groups = GroupObjectPermission.objects.filter(group__user=user.pk, **grant).values_list(*fields)
    for ct_id, object_pk, codename in own.union(via_groups, all=True):
        scope = names[ct_id]
        out[scope, "view"].add(int(object_pk))
        if codename == "change_scope":
            out[scope, "change"].add(int(object_pk))
    return {k: sorted(v) for k, v in out.items()}


def _codename(model: type[models.Model], action: str) -> str:
    return f"{model._meta.app_label}.{action}_{model._meta.model_name}"


def has_global(user: AbstractBaseUser, model: type[models.Model], action: str) -> bool:
    if not user.is_active:
        return False
    if user.is_superuser:
        return True
    # ModelBackend only: a guardian object grant must not read as a global one.
    return user.has_perm(_codename(model, action))


def restrict(queryset: QuerySet, user: AbstractBaseUser, action: str = "view") -> QuerySet:
    """The rows of `queryset` that `user` may `action` (view / change / delete)."""
    model = queryset.model
    label = _label(model)
    if user is None or not user.is_authenticated or not user.is_active:
        return queryset.none()
    if model._meta.proxy and label not in SCOPE_PATHS:
        # A proxy (the stock overview's Site) is scoped as its concrete model; guardian refuses the proxy's
        # content type for the concrete model's grants.
        concrete = model._meta.concrete_model
        return queryset.filter(pk__in=restrict(concrete._default_manager.all(), user, action).values("pk"))
    if has_global(user, model, action):
        return queryset
    if label in CATALOG_MODELS:
        return queryset if action == "view" else queryset.none()
    condition = Q(pk__in=[])
    for scope, path in SCOPE_PATHS.get(label, {}).items():
        ids = user_scope_ids(user, scope, "view" if action == "view" else "change")
        if ids:
            condition |= Q(**{f"{path}__in" if path != "pk" else "pk__in": ids})
    return queryset.filter(condition | _direct_grants_q(user, model, action))


def _direct_grants_q(user: AbstractBaseUser, model: type[models.Model], action: str) -> Q:
    """Rows granted to `user` (or a group of theirs) one by one: guardian's object grants as a filter on the
    grant tables alone. guardian's get_objects_for_user compares every row's id cast to text with the grants,
    a scan of the whole table (100,000 cards) in every restricted query of a scoped user."""
    ct = ContentType.objects.get_for_model(model)
    grant = {"permission__content_type": ct, "permission__codename": f"{action}_{model._meta.model_name}"}
    # guardian keeps object ids as text: cast them to the model's key type (integers, or UUIDs for reports).
    pk = model._meta.pk
    key = pk.target_field if pk.is_relation else pk  # a one-to-one primary key (AgentState) has its target's type
    as_id = Cast("object_pk", models.BigIntegerField() if isinstance(key, models.IntegerField) else type(key)())
    by_user = UserObjectPermission.objects.filter(user_id=user.pk, **grant).values(oid=as_id)
    by_group = GroupObjectPermission.objects.filter(group__user=user.pk, **grant).values(oid=as_id)
    return Q(pk__in=by_user) | Q(pk__in=by_group)


def scope_q(model: type[models.Model], user: AbstractBaseUser, action: str = "view") -> Q:
    """Only the scope-grant part of `restrict` (no global permission, no direct grant) as a filter on `model`:
    for rules such as "a ticket is visible to those who may see its site", where a grant on the ticket alone
    must not reach into another site."""
    condition = Q(pk__in=[])
    for scope, path in SCOPE_PATHS.get(_label(model), {}).items():
        ids = user_scope_ids(user, scope, "view" if action == "view" else "change")
        if ids:
            condition |= Q(**{f"{path}__in" if path != "pk" else "pk__in": ids})
    return condition


def in_scopes(user: AbstractBaseUser, action: str, obj: models.Model) -> bool:
    """Only the scope-grant part of `can`: whether a Site/Cluster/Tenant grant of `user` covers `obj`."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    wanted = "view" if action == "view" else "change"
    for scope, path in SCOPE_PATHS.get(_label(type(obj)), {}).items():
        target = _resolve(obj, path)
        if target is not None and target in user_scope_ids(user, scope, wanted):
            return True
    return False


def has_any_scope(user: AbstractBaseUser, action: str = "view") -> bool:
    """Whether the user holds any scope grant (used to show the admin index to technicians)."""
    return any(user_scope_ids(user, scope, action) for scope in SCOPE_MODELS)


def _resolve(obj: Any, path: str) -> Any:
    if path == "pk":
        return obj.pk
    value = obj
    parts = path.split("__")
    for i, part in enumerate(parts):
        if value is None:
            return None
        if i == len(parts) - 1:
            return getattr(value, part, None)
        value = getattr(value, part, None)
    return value


def can(user: AbstractBaseUser, action: str, obj: models.Model) -> bool:
    """Whether `user` may `action` this object (for saved objects) or write it where it points (unsaved).

    For an unsaved object, or one about to be moved, the scopes are read from its current attributes, so a
    technician of site A cannot create a node in site B or move one there.
    """
    model = type(obj)
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    if has_global(user, model, action if obj.pk else "add"):
        return True
    label = _label(model)
    if label in CATALOG_MODELS:
        return action == "view"
    wanted = "view" if action == "view" else "change"
    for scope, path in SCOPE_PATHS.get(label, {}).items():
        target = _resolve(obj, path)
        if target is not None and target in user_scope_ids(user, scope, wanted):
            return True
    if obj.pk:
        return user.has_perm(_codename(model, action), obj)
    return False


def grant_scope(*, scope_obj: models.Model, perms: list[str], users=(), groups=()) -> None:
    """Grant `view_scope` and/or `change_scope` on a Site, Cluster or Tenant to users and groups."""
    if _label(type(scope_obj)) not in {f"cmdb.{s}" for s in SCOPE_MODELS}:
        raise ValueError("Scope grants apply to a Site, Cluster or Tenant.")
    for perm in perms:
        if perm not in ("view_scope", "change_scope"):
            raise ValueError(f"Unknown scope permission {perm!r}.")
        for user in users:
            assign_perm(perm, user, scope_obj)
        for group in groups:
            assign_perm(perm, group, scope_obj)


def revoke_scope(*, scope_obj: models.Model, perms: list[str], users=(), groups: tuple[Group, ...] = ()) -> None:
    for perm in perms:
        for user in users:
            remove_perm(perm, user, scope_obj)
        for group in groups:
            remove_perm(perm, group, scope_obj)


# --- writes by workflow steps --------------------------------------------------------------------------------------

# (correlation id, node ids) -> the node ids the change with that correlation id is about (linked to its ticket,
# locked or run by it), or None when the correlation id is no change the provider knows. Registered by the
# workflows app at start-up: cmdb cannot read tickets.
WorkflowScope = Any
_workflow_scopes: list[WorkflowScope] = []


def register_workflow_scope(provider: WorkflowScope) -> None:
    if provider not in _workflow_scopes:
        _workflow_scopes.append(provider)


def workflow_may_change(correlation_id: str, node_ids: list[int]) -> set[int]:
    """The nodes among `node_ids` a workflow step running under `correlation_id` may change: the ones linked to
    its change. A correlation id no provider knows (no ticket) is not restricted."""
    known = False
    allowed: set[int] = set()
    for provider in list(_workflow_scopes):
        scope = provider(correlation_id, node_ids)
        if scope is not None:
            known = True
            allowed |= set(scope)
    return allowed if known else set(node_ids)
