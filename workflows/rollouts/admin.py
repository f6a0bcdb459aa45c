"""Admin for the rollouts app: read-only views of rollouts and provisioning runs (they change through their
tickets), and node locks with one action, releasing a lock an abandoned change left behind."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from .models import NodeLock, ProvisioningRun, Rollout


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Rollout)
class RolloutAdmin(ReadOnlyAdmin):
    list_display = ("id", "ticket", "component", "target_version", "status", "created_at", "finished_at")
    list_filter = ("status", "component")
    list_select_related = ("ticket",)
    search_fields = ("target_version", "ticket__title")


@admin.register(ProvisioningRun)
class ProvisioningRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "hostname", "ticket", "status", "current_step", "rack", "position", "created_at")
    list_filter = ("status",)
    list_select_related = ("ticket", "rack")
    search_fields = ("hostname",)


@admin.action(description="Release the selected locks")
def release_locks(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[NodeLock]) -> None:
    count = queryset.filter(released_at__isnull=True).update(released_at=timezone.now())
    modeladmin.message_user(request, f"{count} lock(s) released.", messages.SUCCESS)


@admin.register(NodeLock)
class NodeLockAdmin(admin.ModelAdmin):
    """Locks are taken and released by the changes that hold them; releasing one here is for a change that died
    without releasing (a deleted ticket). Needs `rollouts.change_nodelock`."""

    list_display = ("node", "owner_label", "owner_key", "reason", "acquired_at", "released_at")
    list_filter = (("released_at", admin.EmptyFieldListFilter),)
    list_select_related = ("node",)
    search_fields = ("node__hostname", "owner_label", "owner_key")
    readonly_fields = ("node", "owner_key", "owner_label", "ticket", "reason", "acquired_at", "released_at")
    actions = [release_locks]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
