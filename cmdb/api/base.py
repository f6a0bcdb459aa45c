"""The CMDB's API bases: the gpuops.api bases wired to cmdb.permissions and the CMDB writers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Model, QuerySet
from rest_framework.request import Request

from gpuops.api.exceptions import RowPermissionDenied
from gpuops.api.fields import RefField
from gpuops.api.serializers import BaseModelSerializer
from gpuops.api.viewsets import BaseModelViewSet, ReadOnlyModelViewSet

from .. import permissions
from .writers import writer_for


def _visible(queryset: QuerySet, request: Any) -> QuerySet:
    return permissions.restrict(queryset, request.user, "view")


class CmdbRefField(RefField):
    """A reference to a CMDB object: only objects the user may see can be referenced."""

    scope_queryset = staticmethod(_visible)


class CmdbSerializer(BaseModelSerializer):
    serializer_related_field = CmdbRefField


def _label(model: type[Model]) -> str:
    return model._meta.label_lower


class CmdbViewSet(BaseModelViewSet):
    """A CMDB model endpoint. Subclasses declare queryset, serializer_class, filterset_class, select_related."""

    @property
    def writer_class(self):  # type: ignore[override]
        return writer_for(self.queryset.model)

    def restrict_queryset(self, queryset: QuerySet, action: str) -> QuerySet:
        return permissions.restrict(queryset, self.request.user, action)

    def may_write_any(self, request: Request, action: str) -> bool:
        user = request.user
        model = self.queryset.model
        if permissions.has_global(user, model, action):
            return True
        if _label(model) in permissions.CATALOG_MODELS:
            return False
        # Scope grants (change_scope on a site/cluster/tenant) allow writes below them; the object-level check
        # and the post-write check decide per object.
        if permissions.has_any_scope(user, "change"):
            return True
        if action == "add":
            return False
        # Direct guardian grants on single objects (e.g. change_node on one node).
        return permissions.restrict(model._default_manager.all(), user, action).exists()

    def may_write(self, request: Request, obj: Model, action: str) -> bool:
        return permissions.can(request.user, action, obj)

    def check_written(self, objs: Sequence[Model], action: str, *, bulk: bool) -> None:
        # NetBox's perform_create idea: re-read what was written through the user's grants, inside the
        # transaction, so a write that lands outside them (a node moved to another site) rolls back.
        model = self.queryset.model
        if permissions.has_global(self.request.user, model, action):
            return
        pks = [o.pk for o in objs]
        allowed = set(
            permissions.restrict(model._default_manager.filter(pk__in=pks), self.request.user, action).values_list(
                "pk", flat=True
            )
        )
        for idx, pk in enumerate(pks):
            if pk not in allowed:
                raise RowPermissionDenied(
                    "You may not write this object where it now points (outside your grants).",
                    row=idx if bulk else None,
                )


class CmdbReadOnlyViewSet(ReadOnlyModelViewSet):
    """A read-only CMDB endpoint (histories), restricted like the others."""

    def restrict_queryset(self, queryset: QuerySet, action: str) -> QuerySet:
        return permissions.restrict(queryset, self.request.user, action)
