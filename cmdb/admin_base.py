"""Admin building blocks shared by every CMDB admin: scoped permissions and the read-only change history."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import get_fields_from_path
from django.contrib.contenttypes.admin import GenericTabularInline
from django.core.exceptions import PermissionDenied
from django.db import transaction

from gpuops.context import ChangeSource, change_context

from . import permissions
from .models.history import ChangeRecord


class ChangeRecordInline(GenericTabularInline):
    """The object's change history, newest first, read-only."""

    model = ChangeRecord
    ct_field = "content_type"
    ct_fk_field = "object_id"
    extra = 0
    max_num = 0
    can_delete = False
    fields = ("at", "action", "actor_repr", "source", "correlation_id", "changes")
    readonly_fields = fields
    ordering = ("-at", "-id")
    verbose_name = "change"
    verbose_name_plural = "change history"

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_view_permission(self, request, obj=None) -> bool:
        return True


class ScopedRelatedFieldListFilter(admin.RelatedFieldListFilter):
    """A related-field list filter offering only the objects the user may see (the stock one lists every
    site's rack, cluster and tenant names)."""

    def field_choices(self, field, request, model_admin):
        related = field.related_model
        qs = related._default_manager.all()
        if related._meta.label_lower in permissions.SCOPE_PATHS:
            qs = permissions.restrict(qs, request.user, "view")
        if ordering := self.field_admin_ordering(field, request, model_admin):
            qs = qs.order_by(*ordering)
        return [(obj.pk, str(obj)) for obj in qs]


class ScopedAdmin(admin.ModelAdmin):
    """A ModelAdmin that sees and edits only what the user's guardian grants cover (see cmdb.permissions).

    Each view reads the user's scope grants once (scope_lookups_cached): a changelist asks for them in every
    permission check, filter and action, dozens of times a page."""

    history_inline = True
    list_per_page = 100

    def get_inlines(self, request, obj):
        inlines = list(super().get_inlines(request, obj))
        if obj is not None and self.history_inline:
            inlines.append(ChangeRecordInline)
        return inlines

    def get_queryset(self, request):
        return permissions.restrict(super().get_queryset(request), request.user, "view")

    def get_list_filter(self, request):
        # Every filter on a scoped relation (site, room__site, rack, cluster, tenant, fabric...) lists only
        # what the user may see.
        scoped = []
        for entry in super().get_list_filter(request):
            if isinstance(entry, str):
                field = get_fields_from_path(self.model, entry)[-1]
                related = getattr(field, "related_model", None)
                if related is not None and related._meta.label_lower in permissions.SCOPE_PATHS:
                    entry = (entry, ScopedRelatedFieldListFilter)
            scoped.append(entry)
        return scoped

    def rows_changeable(self, request, queryset) -> bool:
        """Whether the user may change every selected row (admin actions write them all or none)."""
        if not self.has_change_permission(request):
            return False
        return all(permissions.can(request.user, "change", obj) for obj in queryset)

    def has_module_permission(self, request) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None) -> bool:
        if obj is not None:
            return permissions.can(request.user, "view", obj)
        return permissions.has_global(request.user, self.model, "view") or permissions.has_any_scope(request.user)

    def has_change_permission(self, request, obj=None) -> bool:
        if obj is not None:
            return permissions.can(request.user, "change", obj)
        return permissions.has_global(request.user, self.model, "change") or (
            self.model._meta.label_lower not in permissions.CATALOG_MODELS
            and permissions.has_any_scope(request.user, "change")
        )

    def has_add_permission(self, request) -> bool:
        return permissions.has_global(request.user, self.model, "add") or (
            self.model._meta.label_lower not in permissions.CATALOG_MODELS
            and permissions.has_any_scope(request.user, "change")
        )

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None:
            return permissions.has_global(request.user, self.model, "delete") or permissions.can(
                request.user, "change", obj
            )
        return permissions.has_global(request.user, self.model, "delete")

    def save_model(self, request, obj, form, change) -> None:
        # Re-check where the object now points (a technician of site A must not move a node into site B).
        with transaction.atomic():
            if not permissions.can(request.user, "change" if change else "add", obj):
                raise PermissionDenied("You may not write this object where it now points.")
            super().save_model(request, obj, form, change)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        # Only offer locations the user can see.
        related = db_field.related_model
        if related is not None and related._meta.label_lower in permissions.SCOPE_PATHS:
            kwargs["queryset"] = permissions.restrict(related._default_manager.all(), request.user, "view")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def changeform_view(self, request, *args, **kwargs):
        with change_context(source=ChangeSource.ADMIN, actor=request.user), permissions.scope_lookups_cached():
            return super().changeform_view(request, *args, **kwargs)

    def delete_view(self, request, *args, **kwargs):
        with change_context(source=ChangeSource.ADMIN, actor=request.user), permissions.scope_lookups_cached():
            return super().delete_view(request, *args, **kwargs)

    def history_view(self, request, *args, **kwargs):
        with permissions.scope_lookups_cached():
            return super().history_view(request, *args, **kwargs)

    def changelist_view(self, request, *args, **kwargs):
        with change_context(source=ChangeSource.ADMIN, actor=request.user), permissions.scope_lookups_cached():
            return super().changelist_view(request, *args, **kwargs)
