"""Sign-on from the company directory: which directory group gives which role and which scope.

A `DirectoryGroupMapping` row is data an admin edits: "members of the directory group `dc-sh1` join the Django
group dc-technicians and get change_scope on site sh1". The LDAP and OIDC sign-on paths hand the user's
directory groups to one service (`cmdb.services.directory.directory_grants_apply`) at every login, which adds
what the matching rows give and takes back what rows the user no longer matches gave. `DirectoryGrant` records
each grant that service made, so a grant given by hand is never taken back.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q

from .base import TrackedModel
from .locations import Site
from .org import Cluster, Tenant


class ScopePerm(models.TextChoices):
    VIEW = "view_scope", "view_scope (see)"
    CHANGE = "change_scope", "change_scope (see and change)"


class DirectoryGroupMapping(TrackedModel):
    """One rule: members of `directory_group` get `groups` and, optionally, `scope_perm` on one site, cluster or
    tenant. Several rows may name the same directory group (one per scope it grants)."""

    directory_group = models.CharField(
        max_length=200,
        db_index=True,
        help_text="The group's name in the directory (LDAP cn, or the OIDC groups claim value), matched "
        "case-insensitively.",
    )
    groups = models.ManyToManyField(Group, blank=True, related_name="directory_mappings", help_text="Roles.")
    scope_perm = models.CharField(max_length=16, choices=ScopePerm.choices, blank=True)
    site = models.ForeignKey(Site, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["directory_group", "id"]
        constraints = [
            # A scope grant names exactly one site, cluster or tenant; without a permission it names none.
            models.CheckConstraint(
                name="directorygroupmapping_one_scope",
                condition=(
                    Q(scope_perm="", site__isnull=True, cluster__isnull=True, tenant__isnull=True)
                    | (
                        ~Q(scope_perm="")
                        & (
                            Q(site__isnull=False, cluster__isnull=True, tenant__isnull=True)
                            | Q(site__isnull=True, cluster__isnull=False, tenant__isnull=True)
                            | Q(site__isnull=True, cluster__isnull=True, tenant__isnull=False)
                        )
                    )
                ),
            ),
        ]

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        scopes = [f for f in ("site", "cluster", "tenant") if getattr(self, f"{f}_id")]
        if self.scope_perm and len(scopes) != 1:
            raise ValidationError({"scope_perm": "A scope permission needs exactly one site, cluster or tenant."})
        if not self.scope_perm and scopes:
            raise ValidationError({"scope_perm": "Choose view_scope or change_scope for the chosen scope."})

    @property
    def scope_obj(self) -> models.Model | None:
        return self.site or self.cluster or self.tenant

    def __str__(self) -> str:
        scope = self.scope_obj
        where = f" {self.scope_perm} on {scope._meta.model_name} {scope}" if scope else ""
        return f"{self.directory_group}{where}"


class DirectoryGrantKind(models.TextChoices):
    GROUP = "group", "Django group membership"
    SCOPE = "scope", "Scope grant"


class DirectoryGrant(models.Model):
    """A grant the sign-on service made from a mapping (a group membership or a scope grant of one user).

    Only grants recorded here are ever taken back by a later login; a grant the user already had by hand is not
    recorded, so it survives the user leaving the directory group.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="directory_grants")
    kind = models.CharField(max_length=8, choices=DirectoryGrantKind.choices)
    group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    scope_perm = models.CharField(max_length=16, choices=ScopePerm.choices, blank=True)
    site = models.ForeignKey(Site, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    # The directory group that gave it when it was first granted (for the admin; matching uses the rules).
    directory_group = models.CharField(max_length=200, blank=True)
    granted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user_id", "id"]

    def __str__(self) -> str:
        if self.kind == DirectoryGrantKind.GROUP:
            return f"{self.user} in {self.group}"
        return f"{self.user} {self.scope_perm} on {self.site or self.cluster or self.tenant}"


class DirectoryAccount(models.Model):
    """A user who signs on through a directory: where from, when last, and whether the directory disabled them.

    `directory_sync` (LDAP) reads these to find the accounts to check between sign-ons; `disabled_at` marks a user the
    directory disabled (so a later good sign-on may bring them back), as opposed to one deactivated by hand.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="directory_account")
    source = models.CharField(max_length=16, help_text="ldap or oidc")
    last_sign_on_at = models.DateTimeField(null=True, blank=True)
    synced_at = models.DateTimeField(null=True, blank=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["user_id"]

    def __str__(self) -> str:
        return f"{self.user} ({self.source})"
