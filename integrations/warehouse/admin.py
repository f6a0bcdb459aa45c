"""Admin for the warehouse: minimum stock levels, discrepancies, the ledger and reservations (read-only views of
the CMDB's tables through proxies) and a stock overview page per site."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from cmdb import permissions
from cmdb.models import Site

from .models import LedgerMovement, MinimumStock, SiteStockOverview, SpareReservation, StockDiscrepancy, WmsSyncRun
from .services.stock import stock_lines


class ReadOnlyAdmin(admin.ModelAdmin):
    """The ledger is append-only: rows are written by services, never edited or deleted here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(MinimumStock)
class MinimumStockAdmin(admin.ModelAdmin):
    list_display = ("site", "accelerator_model", "part_model", "minimum", "target", "is_active", "updated_at")
    list_filter = ("site", "is_active")
    list_editable = ("minimum", "target", "is_active")
    list_select_related = ("site", "accelerator_model", "part_model")


@admin.register(StockDiscrepancy)
class StockDiscrepancyAdmin(admin.ModelAdmin):
    list_display = (
        "detected_at",
        "site",
        "kind",
        "location",
        "sku",
        "serial",
        "ledger_quantity",
        "other_quantity",
        "status",
    )
    list_filter = ("status", "kind", "site")
    search_fields = ("serial", "sku", "detail")
    readonly_fields = (
        "site",
        "location",
        "kind",
        "accelerator_model",
        "part_model",
        "sku",
        "serial",
        "ledger_quantity",
        "other_quantity",
        "detail",
        "subject_key",
        "detected_at",
        "last_seen_at",
        "resolved_at",
        "resolved_by",
    )
    actions = ("resolve_selected",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Mark resolved")
    def resolve_selected(self, request: HttpRequest, queryset: QuerySet[StockDiscrepancy]) -> None:
        count = queryset.filter(status="open").update(
            status="resolved", resolved_at=timezone.now(), resolved_by=request.user
        )
        self.message_user(request, f"Resolved {count}.", messages.SUCCESS)


@admin.register(LedgerMovement)
class LedgerMovementAdmin(ReadOnlyAdmin):
    list_display = (
        "at",
        "kind",
        "item",
        "quantity",
        "location",
        "to_location",
        "node",
        "actor",
        "reason",
        "ticket_ref",
    )
    list_filter = ("kind", "location__site")
    search_fields = (
        "accelerator__serial",
        "part_item__serial",
        "part_model__sku",
        "ticket_ref",
        "reason",
        "correlation_id",
    )
    list_select_related = (
        "accelerator",
        "part_item",
        "part_model",
        "location__site",
        "to_location__site",
        "node",
        "actor",
    )
    date_hierarchy = "at"

    @admin.display(description="item")
    def item(self, obj: LedgerMovement) -> str:
        return str(obj.accelerator or obj.part_item or obj.part_model or obj.accelerator_model or "")

    def get_queryset(self, request: HttpRequest) -> QuerySet[LedgerMovement]:
        sites = permissions.restrict(Site.objects.all(), request.user, "view")
        return super().get_queryset(request).filter(location__site__in=sites)


@admin.register(SpareReservation)
class SpareReservationAdmin(ReadOnlyAdmin):
    list_display = ("accelerator", "site", "status", "reserved_for", "reserved_at", "expires_at", "closed_at")
    list_filter = ("status", "site")
    search_fields = ("accelerator__serial", "reserved_for")
    list_select_related = ("accelerator", "site")


@admin.register(WmsSyncRun)
class WmsSyncRunAdmin(ReadOnlyAdmin):
    list_display = ("started_at", "direction", "site", "status", "items", "discrepancies", "last_movement_id")
    list_filter = ("direction", "status")


@admin.register(SiteStockOverview)
class StockOverviewAdmin(ReadOnlyAdmin):
    """Not a list of sites: one page with every site's spares against its installed base."""

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        # The grants are on cmdb.Site (a proxy model's queryset was a 500 for non-superusers).
        with permissions.scope_lookups_cached():  # the menu asks for every admin's permissions: read grants once
            visible = permissions.restrict(Site.objects.all(), request.user, "view")
            code = request.GET.get("site")
            sites = visible.filter(code=code) if code else visible
            lines = stock_lines(site_ids=list(sites.values_list("pk", flat=True)))
            admin_context = self.admin_site.each_context(request)
        context = {
            **admin_context,
            "title": "Stock overview",
            "lines": lines,
            "opts": self.model._meta,
            "sites": visible,
            "selected": code or "",
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/warehouse/stock_overview.html", context)

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.user.is_active and request.user.is_staff
