"""Django admin for every CMDB model: scoped by guardian grants, with change history on each object."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import path

from . import models as m
from .admin_base import ChangeRecordInline, ScopedAdmin
from .holds import HeldError, holds_blocking, may_override
from .services import imports
from .services.directory import directory_mapping_roles_record
from .services.nodes import node_schedulability_set, nodes_set_status


# --- locations ----------------------------------------------------------------------------------------------
@admin.register(m.Site)
class SiteAdmin(ScopedAdmin):
    list_display = ("code", "name", "region", "timezone")
    search_fields = ("code", "name", "region")


@admin.register(m.Room)
class RoomAdmin(ScopedAdmin):
    list_display = ("name", "site")
    list_filter = ("site",)
    search_fields = ("name",)


@admin.register(m.Rack)
class RackAdmin(ScopedAdmin):
    list_display = ("name", "room", "row", "u_height", "power_budget_kw", "cooling", "status")
    list_filter = ("room__site", "status", "cooling")
    search_fields = ("name", "row")
    list_select_related = ("room__site",)


# --- catalog ------------------------------------------------------------------------------------------------
@admin.register(m.Vendor)
class VendorAdmin(ScopedAdmin):
    list_display = ("slug", "name", "makes_accelerators")
    search_fields = ("slug", "name")


@admin.register(m.AcceleratorModel)
class AcceleratorModelAdmin(ScopedAdmin):
    list_display = ("name", "vendor", "memory_gib", "interconnect", "tdp_w", "form_factor")
    list_filter = ("vendor", "interconnect", "form_factor")
    search_fields = ("name",)


@admin.register(m.ServerModel)
class ServerModelAdmin(ScopedAdmin):
    list_display = ("name", "vendor", "u_height", "power_draw_kw", "accelerator_model", "accelerator_slots")
    list_filter = ("vendor",)
    search_fields = ("name",)


@admin.register(m.PartModel)
class PartModelAdmin(ScopedAdmin):
    list_display = ("sku", "name", "kind", "vendor", "is_serialised")
    list_filter = ("kind", "vendor")
    search_fields = ("sku", "name")


@admin.register(m.Tag)
class TagAdmin(admin.ModelAdmin):
    list_display = ("slug", "color")
    search_fields = ("slug",)


# --- org ----------------------------------------------------------------------------------------------------
@admin.register(m.Cluster)
class ClusterAdmin(ScopedAdmin):
    list_display = ("name", "kind", "site", "capacity_floor_percent")
    list_filter = ("kind", "site")
    search_fields = ("name",)


@admin.register(m.Tenant)
class TenantAdmin(ScopedAdmin):
    list_display = ("slug", "name", "kind")
    list_filter = ("kind",)
    search_fields = ("slug", "name")


@admin.register(m.MaintenanceWindow)
class MaintenanceWindowAdmin(ScopedAdmin):
    """Maintenance windows and freezes: when change tickets may start at a site or cluster (cmdb.services.windows)."""

    list_display = ("__str__", "kind", "site", "cluster", "name", "is_active")
    list_filter = ("kind", "site", "is_active")
    search_fields = ("name", "site__code", "cluster__name")
    list_select_related = ("site", "cluster")
    fields = (
        "site",
        "cluster",
        "kind",
        "name",
        "weekday",
        "start_time",
        "end_time",
        "timezone",
        "starts_at",
        "ends_at",
        "is_active",
    )


# --- nodes --------------------------------------------------------------------------------------------------
class CsvImportForm(forms.Form):
    file = forms.FileField(help_text="UTF-8 CSV with a header row. Nothing is imported if any row is bad.")


class CsvAdminMixin:
    """Adds 'Import CSV' (all-or-nothing, per-row errors) and an 'Export CSV' action."""

    csv_import = None
    csv_export = None
    csv_columns: list[str] = []

    def get_urls(self):
        name = f"{self.model._meta.app_label}_{self.model._meta.model_name}_import_csv"
        return [
            path("import-csv/", self.admin_site.admin_view(self.import_csv_view), name=name),
            *super().get_urls(),
        ]

    def import_csv_view(self, request):
        if not self.has_add_permission(request):
            messages.error(request, "You may not import here.")
            return redirect("..")
        form = CsvImportForm(request.POST or None, request.FILES or None)
        errors = []
        if request.method == "POST" and form.is_valid():
            result = type(self).csv_import(form.cleaned_data["file"].read(), actor=request.user)
            if result.ok:
                messages.success(request, f"Imported: {result.created} created, {result.updated} updated.")
                return redirect("..")
            errors = result.errors
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "form": form,
            "errors": errors,
            "columns": self.csv_columns,
            "title": f"Import {self.model._meta.verbose_name_plural} from CSV",
        }
        return render(request, "admin/cmdb/import_csv.html", context)

    @admin.action(description="Export selected as CSV")
    def export_csv(self, request, queryset):
        response = HttpResponse(type(self).csv_export(queryset), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="{self.model._meta.model_name}s.csv"'
        return response


class ComponentInline(admin.TabularInline):
    model = m.Component
    extra = 0
    fields = ("kind", "slot", "vendor_name", "model_name", "serial", "capacity", "firmware")


class NicInline(admin.TabularInline):
    model = m.Nic
    extra = 0
    fields = ("name", "kind", "model_name", "serial", "pci_bus_id", "firmware", "rail", "is_missing")
    show_change_link = True


class AcceleratorInline(admin.TabularInline):
    model = m.Accelerator
    fk_name = "node"
    extra = 0
    fields = ("slot_index", "serial", "model", "uuid", "pci_bus_id", "health", "lifecycle", "firmware_version")
    readonly_fields = fields
    can_delete = False
    show_change_link = True
    ordering = ("slot_index",)

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # cards are placed through the card itself, so the placement history is written


class InstalledSoftwareInline(admin.TabularInline):
    model = m.InstalledSoftware
    extra = 0
    fields = ("component", "version", "package")


def _status_action(status: str):
    def action(modeladmin, request, queryset):
        # Per row: view-only staff and rows outside the user's change scopes are refused, nothing written.
        if not modeladmin.rows_changeable(request, queryset):
            modeladmin.message_user(
                request, "You may not change every selected node; nothing was changed.", messages.ERROR
            )
            return
        try:
            changed = nodes_set_status(
                node_ids=queryset.values_list("pk", flat=True),
                status=status,
                reason=f"admin bulk action by {request.user}",
                actor=request.user,
            )
        except (HeldError, PermissionDenied) as exc:  # nothing written: the service refuses the whole batch
            modeladmin.message_user(request, str(exc), level=messages.ERROR)
            return
        modeladmin.message_user(request, f"{changed} node(s) marked {status}.")

    action.__name__ = f"mark_{status}"
    return admin.action(
        description=f"Mark selected nodes {m.NodeStatus(status).label.lower()}", permissions=["change"]
    )(action)


_NODE_SERVICE_FIELDS = ("status", "is_cordoned", "cordon_reason")
_NODE_LOCATION_FIELDS = ("site", "rack", "position", "face")


class NodeAdminForm(forms.ModelForm):
    """Refuses (as a form error) a change of status, cordon or rack position on a node held by an open ticket;
    a user with cmdb.override_hold may tick `override_hold` to force it (the ticket is told and paused)."""

    override_hold = forms.BooleanField(
        required=False,
        label="Override the ticket's hold",
        help_text="Force this change on a node an open ticket holds. The ticket records it and is paused.",
    )

    class Meta:
        model = m.Node
        fields = "__all__"  # noqa: DJ007  (the admin's fieldsets decide what is shown, as for the default form)

    def clean(self):
        cleaned = super().clean()
        node = self.instance
        touched = [f for f in (*_NODE_SERVICE_FIELDS, *_NODE_LOCATION_FIELDS) if f in self.changed_data]
        if node.pk and touched:
            held = holds_blocking([node.pk])
            if held and not cleaned.get("override_hold"):
                holder = held[node.pk]
                raise forms.ValidationError(
                    f"{node} is held by {holder.ticket_ref} ({holder.kind}): its {', '.join(touched)} cannot be "
                    f"changed here until {holder.ticket_ref} finishes.",
                    code="held",
                )
        return cleaned


@admin.register(m.Node)
class NodeAdmin(CsvAdminMixin, ScopedAdmin):
    form = NodeAdminForm
    csv_import = staticmethod(imports.nodes_import_csv)
    csv_export = staticmethod(imports.nodes_export_csv)
    csv_columns = imports.NODE_COLUMNS
    change_list_template = "admin/cmdb/csv_change_list.html"
    list_display = (
        "hostname",
        "serial",
        "site",
        "rack",
        "position",
        "server_model",
        "status",
        "health",
        "is_cordoned",
        "cluster",
        "tenant",
        "last_seen_at",
    )
    list_filter = (
        "site",
        "status",
        "health",
        "is_cordoned",
        "role",
        "server_model__vendor",
        "server_model",
        "cluster",
        "tenant",
        "is_stale",
        "tags",
    )
    search_fields = ("hostname", "serial", "asset_tag", "bmc_address", "po_number")
    list_select_related = ("site", "rack__room__site", "server_model", "cluster", "tenant")
    autocomplete_fields = ()
    filter_horizontal = ("tags",)
    inlines = [AcceleratorInline, NicInline, ComponentInline, InstalledSoftwareInline]
    actions = ["export_csv", *[_status_action(s) for s in ("draining", "maintenance", "active", "failed")]]
    readonly_fields = ("health", "last_seen_at", "is_stale", "version")

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        if not (obj is not None and may_override(request.user)):
            form.base_fields.pop("override_hold", None)  # only for users who may force a hold
        return form

    def save_model(self, request, obj, form, change) -> None:
        # Status and cordon go through cmdb.services.nodes (permission, holds, record, scheduler): the generic
        # save writes the other fields with their stored values, the services then apply what the form asked.
        asked = {f: form.cleaned_data[f] for f in _NODE_SERVICE_FIELDS if change and f in form.changed_data}
        for name in asked:
            setattr(obj, name, form.initial.get(name, getattr(obj, name)))
        super().save_model(request, obj, form, change)
        if not asked:
            return
        override = bool(form.cleaned_data.get("override_hold"))
        if "status" in asked:
            nodes_set_status(
                node_ids=[obj.pk],
                status=asked["status"],
                reason=f"admin edit by {request.user}",
                override_hold=override,
            )
        if {"is_cordoned", "cordon_reason"} & set(asked):
            node_schedulability_set(
                node=obj,
                is_cordoned=form.cleaned_data["is_cordoned"],
                reason=form.cleaned_data.get("cordon_reason", ""),
                override_hold=override,
            )
        obj.refresh_from_db()


@admin.register(m.Component)
class ComponentAdmin(ScopedAdmin):
    list_display = ("node", "kind", "slot", "model_name", "serial", "capacity")
    list_filter = ("kind", "node__site")
    search_fields = ("node__hostname", "serial", "model_name")
    list_select_related = ("node",)


class NicPortInline(admin.TabularInline):
    model = m.NicPort
    extra = 0


@admin.register(m.Nic)
class NicAdmin(ScopedAdmin):
    list_display = ("node", "name", "kind", "model_name", "rail", "node_guid", "is_missing")
    list_filter = ("kind", "node__site")
    search_fields = ("node__hostname", "name", "serial", "node_guid", "ports__mac", "ports__guid")
    list_select_related = ("node",)
    inlines = [NicPortInline]


@admin.register(m.NicPort)
class NicPortAdmin(ScopedAdmin):
    list_display = ("nic", "name", "mac", "guid", "speed_mbps", "link_state")
    search_fields = ("mac", "guid", "nic__node__hostname")
    list_select_related = ("nic__node",)


# --- accelerators -------------------------------------------------------------------------------------------
class PlacementInline(admin.TabularInline):
    model = m.AcceleratorPlacement
    extra = 0
    max_num = 0
    can_delete = False
    fields = ("started_at", "ended_at", "kind", "node_hostname", "slot_index", "stock_location", "source", "note")
    readonly_fields = fields
    verbose_name_plural = "placement history"


@admin.register(m.Accelerator)
class AcceleratorAdmin(CsvAdminMixin, ScopedAdmin):
    csv_import = staticmethod(imports.accelerators_import_csv)
    csv_export = staticmethod(imports.accelerators_export_csv)
    csv_columns = imports.ACCELERATOR_COLUMNS
    change_list_template = "admin/cmdb/csv_change_list.html"
    list_display = (
        "serial",
        "model",
        "node",
        "slot_index",
        "site",
        "health",
        "lifecycle",
        "is_missing",
        "firmware_version",
        "last_seen_at",
    )
    list_filter = ("site", "health", "lifecycle", "model__vendor", "model", "is_missing")
    search_fields = ("serial", "uuid", "node__hostname", "pci_bus_id", "po_number")
    list_select_related = ("model", "node", "site")
    inlines = [PlacementInline]
    actions = ["export_csv"]
    readonly_fields = ("health_changed_at", "last_seen_at", "version")


@admin.register(m.AcceleratorPlacement)
class AcceleratorPlacementAdmin(ScopedAdmin):
    list_display = ("serial", "kind", "node_hostname", "slot_index", "stock_location", "started_at", "ended_at")
    list_filter = ("kind",)
    search_fields = ("serial", "node_hostname")
    history_inline = False

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


# --- network ------------------------------------------------------------------------------------------------
@admin.register(m.Fabric)
class FabricAdmin(ScopedAdmin):
    list_display = ("name", "kind", "purpose", "site", "is_rail_optimized", "rail_count", "scalable_unit_size")
    list_filter = ("kind", "purpose", "site")
    search_fields = ("name",)


class SwitchPortInline(admin.TabularInline):
    model = m.SwitchPort
    extra = 0
    fields = ("name", "description", "speed_mbps", "admin_state", "oper_state", "mac", "guid")


@admin.register(m.Switch)
class SwitchAdmin(ScopedAdmin):
    list_display = ("name", "vendor", "model_name", "role", "fabric", "rail", "site", "rack", "mgmt_ip", "status")
    list_filter = ("site", "role", "vendor", "fabric", "status")
    search_fields = ("name", "serial", "mgmt_ip")
    list_select_related = ("vendor", "fabric", "site", "rack__room__site")
    inlines = [SwitchPortInline]
    filter_horizontal = ("tags",)


@admin.register(m.SwitchPort)
class SwitchPortAdmin(ScopedAdmin):
    list_display = ("switch", "name", "description", "speed_mbps", "admin_state", "oper_state")
    list_filter = ("switch__site", "oper_state")
    search_fields = ("switch__name", "name", "description", "mac", "guid")
    list_select_related = ("switch",)


@admin.register(m.Link)
class LinkAdmin(ScopedAdmin):
    list_display = ("id", "fabric", "a_nic_port", "a_switch_port", "b_switch_port", "cable_type", "status")
    list_filter = ("fabric", "status", "cable_type")
    search_fields = ("cable_serial", "a_nic_port__nic__node__hostname", "b_switch_port__switch__name")
    list_select_related = ("fabric", "a_nic_port__nic__node", "a_switch_port__switch", "b_switch_port__switch")
    raw_id_fields = ("a_nic_port", "a_switch_port", "b_switch_port")


# --- software -----------------------------------------------------------------------------------------------
@admin.register(m.DriverPackage)
class DriverPackageAdmin(ScopedAdmin):
    list_display = ("component", "version", "vendor", "requires_reboot", "released_at")
    list_filter = ("component", "vendor", "requires_reboot")
    search_fields = ("version",)
    filter_horizontal = ("supported_models",)


@admin.register(m.FirmwareBaseline)
class FirmwareBaselineAdmin(ScopedAdmin):
    """Approved firmware / driver versions per model; each save is recorded (History)."""

    list_display = ("component", "model", "rule", "versions", "note", "updated_at")
    list_filter = ("component", "rule")
    search_fields = ("model", "note")


@admin.register(m.InstalledSoftware)
class InstalledSoftwareAdmin(ScopedAdmin):
    list_display = ("node", "component", "version", "package")
    list_filter = ("component", "version")
    search_fields = ("node__hostname", "version")
    list_select_related = ("node", "package")


# --- stock and health ---------------------------------------------------------------------------------------
@admin.register(m.StockLocation)
class StockLocationAdmin(ScopedAdmin):
    list_display = ("name", "site", "kind", "parent")
    list_filter = ("site", "kind")
    search_fields = ("name",)


@admin.register(m.PartItem)
class PartItemAdmin(ScopedAdmin):
    list_display = ("serial", "part_model", "status", "stock_location", "node")
    list_filter = ("status", "part_model__kind")
    search_fields = ("serial",)


@admin.register(m.HealthPolicy)
class HealthPolicyAdmin(ScopedAdmin):
    list_display = ("kind", "code", "vendor", "severity", "action", "marks_failed", "description")
    list_filter = ("kind", "severity", "action", "vendor")
    history_inline = False


@admin.register(m.HealthEvent)
class HealthEventAdmin(ScopedAdmin):
    list_display = ("last_seen_at", "node", "accelerator", "kind", "code", "severity", "action", "count", "resolved_at")
    list_filter = ("severity", "kind", "action", "node__site")
    search_fields = ("node__hostname", "accelerator__serial", "code", "message")
    list_select_related = ("node", "accelerator")
    history_inline = False


@admin.register(m.ChangeRecord)
class ChangeRecordAdmin(admin.ModelAdmin):
    """The global change history: filter by source, model, actor; search by correlation id or object."""

    list_display = ("at", "action", "content_type", "object_repr", "actor_repr", "source", "correlation_id")
    list_filter = ("source", "action", "content_type")
    search_fields = ("object_repr", "correlation_id", "actor_repr", "reason")
    date_hierarchy = "at"
    readonly_fields = [f.name for f in m.ChangeRecord._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(m.DirectoryGroupMapping)
class DirectoryGroupMappingAdmin(admin.ModelAdmin):
    """Directory group -> roles and scopes (docs/operations.md#sign-on). Global permissions only: a mapping
    grants rights anywhere, so no scope grant lets anyone edit one."""

    list_display = ("directory_group", "roles", "scope_perm", "site", "cluster", "tenant", "description")
    list_filter = ("scope_perm",)
    search_fields = ("directory_group", "description")
    filter_horizontal = ("groups",)
    list_select_related = ("site", "cluster", "tenant")

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("groups")

    def get_inlines(self, request, obj):
        return [ChangeRecordInline] if obj is not None else []

    def save_related(self, request, form, formsets, change) -> None:
        before = list(form.instance.groups.values_list("name", flat=True)) if change else []
        super().save_related(request, form, formsets, change)
        after = list(form.instance.groups.values_list("name", flat=True))
        directory_mapping_roles_record(form.instance, before, after)

    @admin.display(description="roles")
    def roles(self, obj: m.DirectoryGroupMapping) -> str:
        return ", ".join(g.name for g in obj.groups.all()) or "-"


@admin.register(m.DirectoryGrant)
class DirectoryGrantAdmin(admin.ModelAdmin):
    """What sign-on granted each user from a mapping (read-only; the next login of the user recomputes it)."""

    list_display = ("user", "kind", "group", "scope_perm", "site", "cluster", "tenant", "directory_group", "granted_at")
    list_filter = ("kind", "scope_perm")
    search_fields = ("user__username", "directory_group")
    list_select_related = ("user", "group", "site", "cluster", "tenant")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        # Deleting the record would leave the grant in place as if it had been given by hand.
        return False


@admin.register(m.DirectoryAccount)
class DirectoryAccountAdmin(admin.ModelAdmin):
    """Who signs on through a directory, when they last did, and whom the directory disabled (read-only)."""

    list_display = ("user", "source", "last_sign_on_at", "synced_at", "disabled_at", "disabled_reason")
    list_filter = ("source",)
    search_fields = ("user__username",)
    list_select_related = ("user",)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
