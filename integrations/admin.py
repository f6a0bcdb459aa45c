"""Admin for outbound webhooks: subscriptions, and the delivery log with its dead letters and "redeliver"."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import WebhookDelivery, WebhookSubscription
from .webhooks.services import deliveries_redeliver


class DeliveryInline(admin.TabularInline):
    model = WebhookDelivery
    fields = ("event_id", "event", "state", "attempts", "response_code", "next_attempt_at", "delivered_at")
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True
    ordering = ("-id",)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The latest few only: a busy subscription has thousands (the full log is the deliveries list).
        ids = list(super().get_queryset(request).order_by("-id").values_list("pk", flat=True)[:20])
        return super().get_queryset(request).filter(pk__in=ids)


@admin.register(WebhookSubscription)
class WebhookSubscriptionAdmin(admin.ModelAdmin):
    list_display = ("name", "url", "is_active", "object_types", "events", "created_at")
    list_filter = ("is_active",)
    search_fields = ("name", "url")
    filter_horizontal = ("sites",)
    inlines = [DeliveryInline]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    """The delivery log. Dead rows are the dead letters: filter by state, fix the receiver, then redeliver."""

    list_display = (
        "event_id",
        "subscription",
        "event",
        "object_type",
        "state",
        "attempts",
        "response_code",
        "created_at",
    )
    list_filter = ("state", "subscription", "object_type")
    search_fields = ("event_id",)
    list_select_related = ("subscription",)
    actions = ["redeliver"]
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.action(description="Redeliver the selected deliveries", permissions=["redeliver"])
    def redeliver(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = deliveries_redeliver(list(queryset.values_list("pk", flat=True)))
        self.message_user(request, f"{count} deliveries queued again.", messages.SUCCESS)

    def has_redeliver_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("integrations.change_webhookdelivery")


__all__ = ["WebhookDeliveryAdmin", "WebhookSubscriptionAdmin"]
