"""Admin for procurement: requests (with lines, votes, shipments and discrepancies inline), approval rules,
inbound events (read-only, re-run failed ones) and discrepancies (resolve). Actions call services."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from gpuops.context import ChangeSource, change_context

from .inbound import event_enqueue, event_requeue
from .models import (
    ApprovalRule,
    Discrepancy,
    DiscrepancyStatus,
    EventStatus,
    InboundEvent,
    ProcurementRequest,
    RequestApproval,
    RequestLine,
    RequestState,
    Shipment,
    ShipmentItem,
)
from .services import requests as svc
from .services.receiving import discrepancy_resolve


class RequestLineInline(admin.TabularInline):
    model = RequestLine
    extra = 0
    fields = (
        "line_no",
        "server_model",
        "accelerator_model",
        "part_model",
        "quantity",
        "site",
        "unit_price",
        "received_quantity",
        "po_line_ref",
        "po_state",
    )
    readonly_fields = ("received_quantity", "po_line_ref", "po_state")
    autocomplete_fields = ()

    def has_change_permission(self, request: HttpRequest, obj: ProcurementRequest | None = None) -> bool:
        # Lines are editable only while the request is a draft: approvers approve exactly what they saw.
        return obj is None or obj.state == RequestState.DRAFT

    has_add_permission = has_change_permission  # type: ignore[assignment]
    has_delete_permission = has_change_permission


class ApprovalInline(admin.TabularInline):
    model = RequestApproval
    extra = 0
    max_num = 0
    can_delete = False
    fields = ("round", "rule", "approver_repr", "decision", "comment", "at")
    readonly_fields = fields


class ShipmentInline(admin.TabularInline):
    model = Shipment
    extra = 0
    max_num = 0
    can_delete = False
    fields = (
        "shipment_ref",
        "status",
        "carrier",
        "tracking",
        "is_dispatch_known",
        "dispatched_at",
        "delivered_at",
        "site",
    )
    readonly_fields = fields
    show_change_link = True


class DiscrepancyInline(admin.TabularInline):
    model = Discrepancy
    extra = 0
    max_num = 0
    can_delete = False
    fields = ("status", "kind", "serial", "expected_quantity", "actual_quantity", "detail", "resolution")
    readonly_fields = fields
    ordering = ("status", "-created_at")


@admin.register(ProcurementRequest)
class ProcurementRequestAdmin(admin.ModelAdmin):
    list_display = (
        "reference",
        "title",
        "state",
        "po_number",
        "po_state",
        "total",
        "requested_by",
        "open_issues",
        "created_at",
    )
    list_filter = ("state", "po_state", "is_open")
    search_fields = ("title", "po_number", "budget_code", "dedup_key", "=id")
    readonly_fields = (
        "state",
        "is_open",
        "approval_round",
        "approval_chain",
        "submitted_at",
        "approved_at",
        "decided_at",
        "po_number",
        "po_state",
        "po_idempotency_key",
        "po_created_at",
        "po_attempts",
        "po_error",
        "supplier",
        "invoice_number",
        "invoiced_amount",
        "trigger_count",
        "last_triggered_at",
        "notes",
        "correlation_id",
        "dedup_key",
        "ticket_ref",
        "requested_by",
    )
    inlines = (RequestLineInline, ApprovalInline, ShipmentInline, DiscrepancyInline)
    actions = ("submit_selected", "approve_selected", "retry_order_selected")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ProcurementRequest]:
        return super().get_queryset(request).select_related("requested_by").prefetch_related("lines", "discrepancies")

    @admin.display(description="amount")
    def total(self, obj: ProcurementRequest) -> str:
        return f"{obj.total_amount:,.2f} {obj.currency}"

    @admin.display(description="open discrepancies")
    def open_issues(self, obj: ProcurementRequest) -> int:
        return sum(1 for d in obj.discrepancies.all() if d.status == DiscrepancyStatus.OPEN)

    def save_model(self, request: HttpRequest, obj: ProcurementRequest, form, change: bool) -> None:
        if not change:
            obj.requested_by = request.user
        super().save_model(request, obj, form, change)

    def _each(self, request: HttpRequest, queryset: QuerySet[ProcurementRequest], run, verb: str) -> None:
        done = 0
        with change_context(actor=request.user, source=ChangeSource.ADMIN):
            for req in queryset:
                try:
                    run(req)
                    done += 1
                except ValidationError as exc:
                    self.message_user(request, f"{req.reference}: {'; '.join(exc.messages)}", messages.ERROR)
        if done:
            self.message_user(request, f"{verb} {done} request(s).", messages.SUCCESS)

    @admin.action(description="Submit for approval")
    def submit_selected(self, request: HttpRequest, queryset: QuerySet[ProcurementRequest]) -> None:
        self._each(request, queryset, lambda req: svc.request_submit(request=req, actor=request.user), "Submitted")

    @admin.action(description="Approve (my vote)")
    def approve_selected(self, request: HttpRequest, queryset: QuerySet[ProcurementRequest]) -> None:
        self._each(request, queryset, lambda req: svc.request_approve(request=req, approver=request.user), "Approved")

    @admin.action(description="Retry placing the PO")
    def retry_order_selected(self, request: HttpRequest, queryset: QuerySet[ProcurementRequest]) -> None:
        from .tasks import place_order

        for req in queryset.filter(state=RequestState.APPROVED, po_number=""):
            ProcurementRequest.objects.filter(pk=req.pk).update(po_error="")
            place_order.delay(req.pk)
            self.message_user(request, f"{req.reference}: placing the PO again.", messages.INFO)


@admin.register(ApprovalRule)
class ApprovalRuleAdmin(admin.ModelAdmin):
    list_display = ("name", "level", "min_amount", "max_amount", "approvers_required", "group", "is_active")
    list_filter = ("is_active", "group")
    list_editable = ("is_active",)


class ShipmentItemInline(admin.TabularInline):
    model = ShipmentItem
    extra = 0
    max_num = 0
    can_delete = False
    fields = (
        "serial",
        "line",
        "status",
        "is_expected",
        "is_received",
        "expected_quantity",
        "received_quantity",
        "node",
        "accelerator",
        "part_item",
    )
    readonly_fields = fields


@admin.register(Shipment)
class ShipmentAdmin(admin.ModelAdmin):
    list_display = ("shipment_ref", "request", "status", "carrier", "tracking", "is_dispatch_known", "delivered_at")
    list_filter = ("status", "is_dispatch_known")
    search_fields = ("shipment_ref", "tracking", "request__po_number")
    readonly_fields = [f.name for f in Shipment._meta.fields]
    inlines = (ShipmentItemInline,)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Discrepancy)
class DiscrepancyAdmin(admin.ModelAdmin):
    list_display = ("request", "kind", "serial", "status", "detail", "created_at")
    list_filter = ("status", "kind")
    search_fields = ("serial", "request__po_number", "detail")
    readonly_fields = (
        "request",
        "shipment",
        "line",
        "kind",
        "serial",
        "expected_quantity",
        "actual_quantity",
        "detail",
        "subject_key",
        "created_at",
        "resolved_at",
        "resolved_by",
    )
    actions = ("resolve_selected",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Mark resolved (write what was done in each one's resolution field first)")
    def resolve_selected(self, request: HttpRequest, queryset: QuerySet[Discrepancy]) -> None:
        count = 0
        with change_context(actor=request.user, source=ChangeSource.ADMIN):
            for row in queryset.filter(status=DiscrepancyStatus.OPEN):
                try:
                    discrepancy_resolve(discrepancy=row, actor=request.user, resolution=row.resolution)
                    count += 1
                except ValidationError:
                    self.message_user(request, f"{row}: write the resolution first.", messages.WARNING)
        self.message_user(request, f"Resolved {count} discrepancy(ies).", messages.SUCCESS)


@admin.register(InboundEvent)
class InboundEventAdmin(admin.ModelAdmin):
    list_display = (
        "received_at",
        "channel",
        "source",
        "event_id",
        "type",
        "status",
        "waits_for",
        "attempts",
        "request",
    )
    list_filter = ("channel", "status", "type", "source")
    search_fields = ("event_id", "waits_for", "error")
    readonly_fields = [f.name for f in InboundEvent._meta.fields]
    actions = ("rerun_selected",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # events come only through the signed endpoint

    def has_change_permission(self, request: HttpRequest, obj: InboundEvent | None = None) -> bool:
        return False

    @admin.action(description="Re-run failed events")
    def rerun_selected(self, request: HttpRequest, queryset: QuerySet[InboundEvent]) -> None:
        count = 0
        for event in queryset.filter(status=EventStatus.FAILED):
            if event_requeue(event.pk):
                event_enqueue(event)
                count += 1
        self.message_user(request, f"Re-queued {count} event(s).", messages.SUCCESS)
