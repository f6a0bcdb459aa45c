"""Admin for tickets and runs: read-mostly (the engine owns state), for support and forensics."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from .models import (
    Approval,
    ProcurementNeed,
    RootCauseCategory,
    StepEffect,
    StepLogLine,
    StepRun,
    Ticket,
    TicketLink,
    TimelineEntry,
)


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class TicketLinkInline(ReadOnlyInline):
    model = TicketLink
    fields = ["role", "object_repr", "node", "accelerator", "rack", "switch", "link"]


class StepRunInline(ReadOnlyInline):
    model = StepRun
    fields = ["step", "sequence", "status", "attempts", "started_at", "ended_at", "error"]
    show_change_link = True


class TimelineInline(ReadOnlyInline):
    model = TimelineEntry
    fields = ["at", "kind", "actor_repr", "message", "body"]


@admin.register(Ticket)
class TicketAdmin(admin.ModelAdmin):
    """State, data and approvals change only through the engine (UI, API); the admin edits text fields."""

    list_display = [
        "id",
        "type",
        "title",
        "state",
        "priority",
        "assignee_group",
        "site",
        "is_open",
        "is_paused",
        "created_at",
    ]
    list_filter = ["type", "state", "is_open", "is_paused", "priority", "site"]
    search_fields = ["title", "correlation_id", "dedup_key"]
    readonly_fields = [
        "type",
        "state",
        "is_open",
        "is_paused",
        "correlation_id",
        "dedup_key",
        "data",
        "approval_round",
        "requester",
        "created_at",
        "updated_at",
        "closed_at",
    ]
    raw_id_fields = ["assignee", "watchers"]
    inlines = [TicketLinkInline, StepRunInline, TimelineInline]


@admin.register(StepRun)
class StepRunAdmin(admin.ModelAdmin):
    list_display = ["id", "ticket", "step", "sequence", "status", "attempts", "started_at", "ended_at"]
    list_filter = ["status", "step"]
    readonly_fields = [f.name for f in StepRun._meta.fields]

    class LogInline(ReadOnlyInline):
        model = StepLogLine
        fields = ["at", "level", "message"]

    class EffectInline(ReadOnlyInline):
        model = StepEffect
        fields = ["key", "name", "result", "at"]

    inlines = [LogInline, EffectInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(ProcurementNeed)
class ProcurementNeedAdmin(admin.ModelAdmin):
    list_display = ["id", "ticket", "site", "accelerator_model", "quantity", "status", "created_at", "closed_at"]
    list_filter = ["status", "site"]


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    list_display = ["ticket", "round", "approver_repr", "decision", "at"]
    readonly_fields = [f.name for f in Approval._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(RootCauseCategory)
class RootCauseCategoryAdmin(admin.ModelAdmin):
    """Root-cause categories named by postmortems and repair verdicts (data: add, rename, retire)."""

    list_display = ["slug", "name", "is_active", "position"]
    list_editable = ["is_active", "position"]
    search_fields = ["slug", "name"]

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # retire it (is_active) instead: postmortems and repairs keep naming it
