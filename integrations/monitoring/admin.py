"""Admin: alert sources (the token is shown once, when added or re-keyed), the editable rule table, and the
received alerts (read-only: they are what the monitors said)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import AlertRule, AlertSource, ReceivedAlert
from .services.sources import alert_source_add, alert_source_rekey


class AlertSourceAddForm(forms.ModelForm):
    class Meta:
        model = AlertSource
        fields = ["name", "kind", "description"]


@admin.register(AlertSource)
class AlertSourceAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "token_prefix", "is_active", "created_at", "last_used_at")
    list_filter = ("kind", "is_active")
    search_fields = ("name",)
    readonly_fields = ("token_prefix", "created_at", "last_used_at")
    fields = ("name", "kind", "description", "is_active", "token_prefix", "created_at", "last_used_at")
    actions = ["rekey"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = AlertSourceAddForm
            kwargs["fields"] = ["name", "kind", "description"]
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        return ["name", "kind", "description"] if obj is None else super().get_fields(request, obj)

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: AlertSource, form, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        try:
            issued = alert_source_add(name=obj.name, kind=obj.kind, description=obj.description)
        except ValidationError as exc:
            messages.error(request, "; ".join(exc.messages))
            return
        obj.pk = issued.source.pk
        obj.token_hash, obj.token_prefix = issued.source.token_hash, issued.source.token_prefix
        messages.warning(request, f"Token of {obj.name} (shown once, only its hash is kept): {issued.token}")

    @admin.action(description="Re-key: issue a new token (the old one stops working)")
    def rekey(self, request: HttpRequest, queryset: QuerySet[AlertSource]) -> None:
        for source in queryset:
            issued = alert_source_rekey(source=source)
            messages.warning(request, f"New token of {source.name} (shown once): {issued.token}")


@admin.register(AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "alertname",
        "kind",
        "code",
        "code_label",
        "code_from_value",
        "scope",
        "priority",
        "is_active",
    )
    list_editable = ("priority", "is_active")
    list_filter = ("kind", "scope", "is_active")
    search_fields = ("name", "alertname", "kind")


@admin.register(ReceivedAlert)
class ReceivedAlertAdmin(admin.ModelAdmin):
    list_display = ("received_at", "alertname", "status", "is_matched", "node", "accelerator", "unmatched_reason")
    list_filter = ("status", "is_matched", "source")
    search_fields = ("alertname", "fingerprint", "node__hostname", "accelerator__serial")
    list_select_related = ("node", "accelerator", "source")
    raw_id_fields = ("node", "accelerator", "health_event", "rule")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
