"""Directory groups -> gpuops roles and scopes, applied at every sign-on (LDAP and OIDC alike).

`directory_grants_apply` is the one writer of grants that come from the directory. It reads the
`DirectoryGroupMapping` rows that match the user's directory groups, grants what they give (Django group
memberships, and scope grants through `cmdb.permissions.grant_scope`) and takes back what earlier logins granted
from rows the user no longer matches. Each grant it makes is recorded as a `DirectoryGrant`; a grant the user
already held by hand is left unrecorded, so it is never taken back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models.functions import Lower
from django.utils import timezone
from guardian.shortcuts import get_user_perms

from ..models import Cluster, DirectoryAccount, DirectoryGrant, DirectoryGrantKind, DirectoryGroupMapping, Site, Tenant
from ..permissions import grant_scope, revoke_scope

security_log = logging.getLogger("gpuops.security")

# (kind, group id, scope perm, site id, cluster id, tenant id): one grant, in the shape DirectoryGrant stores it.
GrantKey = tuple[str, int | None, str, int | None, int | None, int | None]


@dataclass
class DirectoryGrantsResult:
    """What one sign-on changed (for logs and tests)."""

    granted: list[str] = field(default_factory=list)
    revoked: list[str] = field(default_factory=list)
    kept_by_hand: list[str] = field(default_factory=list)


def _key(row: DirectoryGrant) -> GrantKey:
    return (row.kind, row.group_id, row.scope_perm, row.site_id, row.cluster_id, row.tenant_id)


def _wanted(directory_groups: Iterable[str]) -> dict[GrantKey, str]:
    """Every grant the matching mapping rows give, with the directory group that gives it."""
    names = {name.strip().lower() for name in directory_groups if name and name.strip()}
    wanted: dict[GrantKey, str] = {}
    if not names:
        return wanted
    rows = (
        DirectoryGroupMapping.objects.annotate(name_lower=Lower("directory_group"))
        .filter(name_lower__in=names)
        .prefetch_related("groups")
        .order_by("id")
    )
    for row in rows:
        for group in row.groups.all():
            wanted.setdefault((DirectoryGrantKind.GROUP, group.pk, "", None, None, None), row.directory_group)
        if row.scope_perm:
            key = (DirectoryGrantKind.SCOPE, None, row.scope_perm, row.site_id, row.cluster_id, row.tenant_id)
            wanted.setdefault(key, row.directory_group)
    return wanted


def _scope_obj(key: GrantKey) -> Site | Cluster | Tenant:
    _, _, _, site_id, cluster_id, tenant_id = key
    if site_id:
        return Site.objects.get(pk=site_id)
    if cluster_id:
        return Cluster.objects.get(pk=cluster_id)
    return Tenant.objects.get(pk=tenant_id)


def _describe(key: GrantKey) -> str:
    kind, group_id, perm, site_id, cluster_id, tenant_id = key
    if kind == DirectoryGrantKind.GROUP:
        return f"group:{group_id}"
    where = f"site:{site_id}" if site_id else f"cluster:{cluster_id}" if cluster_id else f"tenant:{tenant_id}"
    return f"{perm}@{where}"


def _forget_permission_caches(user: AbstractBaseUser) -> None:
    # ModelBackend and guardian memoise permissions on the user object; the caller goes on using this one.
    for attr in ("_perm_cache", "_user_perm_cache", "_group_perm_cache", "_guardian_perms_cache"):
        if hasattr(user, attr):
            delattr(user, attr)


@transaction.atomic
def directory_grants_apply(
    user: AbstractBaseUser, directory_groups: Iterable[str], *, source: str, sync: bool = False
) -> DirectoryGrantsResult:
    """Bring the user's directory-given grants in line with `directory_groups` (their groups in the directory now).

    Adds each group membership and scope grant that a matching `DirectoryGroupMapping` gives and the user lacks;
    removes each one an earlier sign-on recorded (`DirectoryGrant`) that no matching row gives any more. Grants
    given by hand are never touched: one the user already held is not recorded, so it is not taken back later.
    `source` ("ldap", "oidc") is recorded on the user's DirectoryAccount with the time (`sync`: a directory_sync run,
    not a sign-on). Runs in one transaction, the user row locked so two concurrent
    sign-ons of one person do not both grant.
    """
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    wanted = _wanted(directory_groups)
    have = {_key(row): row for row in DirectoryGrant.objects.filter(user=user)}
    result = DirectoryGrantsResult()

    for key, row in have.items():
        if key in wanted:
            continue
        if row.kind == DirectoryGrantKind.GROUP:
            user.groups.remove(row.group_id)
        else:
            revoke_scope(scope_obj=_scope_obj(key), perms=[row.scope_perm], users=[user])
        row.delete()
        result.revoked.append(_describe(key))

    missing = [key for key in wanted if key not in have]
    member_of = set(user.groups.values_list("pk", flat=True)) if missing else set()
    for key in missing:
        directory_group = wanted[key]
        kind, group_id, perm = key[0], key[1], key[2]
        if kind == DirectoryGrantKind.GROUP:
            if group_id in member_of:
                result.kept_by_hand.append(_describe(key))
                continue
            user.groups.add(group_id)
        else:
            scope_obj = _scope_obj(key)
            if perm in get_user_perms(user, scope_obj):
                result.kept_by_hand.append(_describe(key))
                continue
            grant_scope(scope_obj=scope_obj, perms=[perm], users=[user])
        DirectoryGrant.objects.create(
            user=user,
            kind=kind,
            group_id=group_id,
            scope_perm=perm,
            site_id=key[3],
            cluster_id=key[4],
            tenant_id=key[5],
            directory_group=directory_group,
        )
        result.granted.append(_describe(key))

    now = timezone.now()
    if sync:
        DirectoryAccount.objects.filter(user=user).update(synced_at=now)
    elif not DirectoryAccount.objects.filter(user=user).update(source=source, last_sign_on_at=now):
        DirectoryAccount.objects.create(user=user, source=source, last_sign_on_at=now)  # the user row is locked
    _forget_permission_caches(user)
    if result.granted or result.revoked:
        security_log.info(
            "directory sign-on (%s) of %s: granted %s, revoked %s",
            source,
            user.get_username(),
            result.granted or "-",
            result.revoked or "-",
        )
    return result


@transaction.atomic
def directory_account_disable(user: AbstractBaseUser, *, reason: str) -> bool:
    """The directory disabled or removed this user: deactivate them (their sessions and API tokens stop working) and
    take back every grant the directory gave. Grants given by hand stay for when they come back. Returns whether
    anything changed; a user already deactivated by hand is left as it is."""
    user = get_user_model().objects.select_for_update().get(pk=user.pk)
    if not user.is_active:
        return False
    directory_grants_apply(user, [], source="sync", sync=True)
    user.is_active = False
    user.save(update_fields=["is_active"])
    DirectoryAccount.objects.filter(user=user).update(disabled_at=timezone.now(), disabled_reason=reason[:200])
    security_log.warning("directory account %s deactivated: %s", user.get_username(), reason)
    return True


@transaction.atomic
def directory_account_may_sign_on(user: AbstractBaseUser) -> bool:
    """Whether a user the directory has just vouched for may sign on: an active user may; one the directory had
    disabled (directory_account_disable) is active again; one deactivated by hand in gpuops stays out."""
    if user.is_active:
        return True
    account = DirectoryAccount.objects.select_for_update().filter(user=user, disabled_at__isnull=False).first()
    if account is None:
        return False
    user.is_active = True
    user.save(update_fields=["is_active"])
    account.disabled_at, account.disabled_reason = None, ""
    account.save(update_fields=["disabled_at", "disabled_reason"])
    security_log.info("directory account %s active again: the directory accepted it", user.get_username())
    return True


def directory_mapping_roles_record(mapping: DirectoryGroupMapping, before: list[str], after: list[str]) -> None:
    """Record a change of a mapping's roles (its Django groups, a many-to-many the row's own history cannot see)
    in its change history, as `{"groups": [before, after]}` under the current change context."""
    if sorted(before) == sorted(after):
        return
    from ..models import ChangeAction
    from . import changelog

    changelog.record_build(
        obj=mapping, action=ChangeAction.UPDATE, changes={"groups": [sorted(before), sorted(after)]}
    ).save()
