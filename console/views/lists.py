"""Console pages: the inventory lists - nodes, accelerators, switches, links and spare stock.

Each list is the user's scoped rows (cmdb.permissions.restrict) narrowed by the API's own filter set, so
`/nodes/?site=sh1&health__in=degraded,failed` means what `/api/cmdb/nodes/?...` means. Columns, sort, pages
and the CSV export are the shared machinery of console.listing. Rows link to the object pages.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse, QueryDict
from django.urls import URLPattern, path
from django.utils.http import urlencode

from cmdb import filtersets as f
from cmdb import models as m
from cmdb.permissions import restrict
from integrations.warehouse.services.stock import StockLine, stock_lines

from ..listing import (
    DASH,
    Cell,
    Column,
    FilterField,
    ListError,
    ListSpec,
    ago,
    flag,
    list_page,
    number,
    text,
)

# --- tones: a healthy row is quiet; only what needs attention gets colour --------------------------------------

HEALTH_TONES = {"degraded": "waiting", "failed": "rejected", "unknown": "new"}
NODE_STATUS_TONES = {
    "draining": "waiting",
    "maintenance": "waiting",
    "failed": "rejected",
    "rma": "rejected",
    "provisioning": "active",
    "burn_in": "active",
    "decommissioned": "cancelled",
}
LIFECYCLE_TONES = {"in_stock": "active", "in_transit": "new", "failed": "rejected", "rma": "waiting"}
SWITCH_STATUS_TONES = {"planned": "new", "maintenance": "waiting", "failed": "rejected", "decommissioned": "cancelled"}
LINK_STATUS_TONES = {"planned": "new", "mismatch": "rejected"}


def state(value: str, label: str, tones: dict[str, str]) -> Cell:
    """A state as plain text when it is the usual one, a badge when it needs a look."""
    tone = tones.get(value, "")
    return Cell(label, tone=tone, csv=value)


def choices_of(filterset_class: type, name: str) -> list[tuple[str, str]]:
    return list(filterset_class.base_filters[name].extra["choices"])


def node_href(hostname: str) -> str:
    return f"/nodes/{hostname}/"


# --- nodes -------------------------------------------------------------------------------------------------------


def _rack_u(node: m.Node) -> Cell:
    if node.rack is None:
        return DASH
    where = f"{node.rack.name} U{node.position}" if node.position else node.rack.name
    return Cell(where, href=f"/racks/{node.rack_id}/")


def _cards(node: Any) -> Cell:
    total, healthy = node.cards_total, node.cards_ok
    if not total:
        return DASH
    return Cell(
        f"{total}/{healthy}",
        tone="" if healthy == total else "waiting",
        title=f"{total} card(s), {healthy} healthy",
    )


def _site(obj: Any) -> Cell:
    site = obj.site
    return text(site.code, href=f"/sites/{site.code}/") if site else DASH


NODE_COLUMNS = [
    Column("hostname", "Hostname", lambda n: text(n.hostname, href=node_href(n.hostname)), ("hostname",)),
    Column("site", "Site", _site, ("site__code",)),
    Column("rack", "Rack / U", _rack_u, ("rack__name", "position")),
    Column("model", "Model", lambda n: text(n.server_model.name), ("server_model__name",)),
    Column("status", "Status", lambda n: state(n.status, n.get_status_display(), NODE_STATUS_TONES), ("status",)),
    Column("health", "Health", lambda n: state(n.health, n.get_health_display(), HEALTH_TONES), ("health",)),
    Column("cordon", "Cordon", lambda n: flag(n.is_cordoned, "cordoned", title=n.cordon_reason), ("is_cordoned",)),
    Column(
        "cluster",
        "Cluster",
        lambda n: text(n.cluster.name, href=f"/clusters/{n.cluster.name}/") if n.cluster else DASH,
        ("cluster__name",),
    ),
    Column(
        "tenant",
        "Tenant",
        lambda n: text(n.tenant.slug, href=f"/tenants/{n.tenant.slug}/") if n.tenant else DASH,
        ("tenant__slug",),
    ),
    Column("cards", "Cards (count/healthy)", _cards, ("cards_total", "cards_ok"), numeric=True),
    Column("last_seen", "Last seen", lambda n: ago(n.last_seen_at, stale=n.is_stale), ("last_seen_at",)),
    # Optional columns (?cols=...).
    Column("serial", "Serial", lambda n: text(n.serial, mono=True), ("serial",)),
    Column("asset_tag", "Asset tag", lambda n: text(n.asset_tag), ("asset_tag",)),
    Column("role", "Role", lambda n: text(n.get_role_display()), ("role",)),
    Column(
        "accelerator_model",
        "Accelerator model",
        lambda n: text(n.server_model.accelerator_model.name if n.server_model.accelerator_model else ""),
        ("server_model__accelerator_model__name",),
    ),
    Column("stale", "Stale", lambda n: flag(n.is_stale, "stale"), ("is_stale",)),
    Column("cordon_reason", "Cordon reason", lambda n: text(n.cordon_reason), ("cordon_reason",)),
    Column("bmc_address", "BMC", lambda n: text(n.bmc_address, mono=True), ("bmc_address",)),
    Column("os", "OS", lambda n: text(n.os_name), ("os_name",)),
    Column("kernel", "Kernel", lambda n: text(n.kernel, mono=True), ("kernel",)),
    Column("po_number", "PO", lambda n: text(n.po_number), ("po_number",)),
    Column("warranty_end", "Warranty end", lambda n: text(n.warranty_end), ("warranty_end",)),
    Column("updated", "Updated", lambda n: ago(n.updated_at), ("updated_at",)),
]


def _node_rows(user: AbstractBaseUser) -> QuerySet:
    return restrict(m.Node.objects.all(), user, "view")


def _card_count(**where: Any) -> Coalesce:
    """A node's card count as a correlated subquery: evaluated for the page's rows only (a GROUP BY join counted
    every card of the fleet before the LIMIT, and made the page's COUNT join them too)."""
    cards = m.Accelerator.objects.filter(node=OuterRef("pk"), **where).order_by().values("node")
    return Coalesce(Subquery(cards.annotate(n=Count("pk")).values("n")[:1]), 0)


def _node_decorate(qs: QuerySet) -> QuerySet:
    # Sorting by the card count still counts every node's cards (one index lookup per node).
    return qs.select_related("site", "rack", "cluster", "tenant", "server_model__accelerator_model").annotate(
        cards_total=_card_count(), cards_ok=_card_count(health="ok")
    )


NODES = ListSpec(
    name="node-list",
    title="Nodes",
    noun="nodes",
    singular="node",
    columns=NODE_COLUMNS,
    default_cols=(
        "hostname",
        "site",
        "rack",
        "model",
        "status",
        "health",
        "cordon",
        "cluster",
        "tenant",
        "cards",
        "last_seen",
    ),
    default_sort="hostname",
    rows=_node_rows,
    filterset_class=f.NodeFilterSet,
    decorate=_node_decorate,
    filter_fields=(
        FilterField("q", "Search", placeholder="host, serial, asset tag, PO"),
        FilterField("site", "Site", placeholder="code"),
        FilterField("status", "Status", "choice", choices_of(f.NodeFilterSet, "status")),
        FilterField("health", "Health", "choice", choices_of(f.NodeFilterSet, "health")),
        FilterField("is_cordoned", "Cordoned", "bool"),
        FilterField("cluster", "Cluster", placeholder="name"),
        FilterField("tenant", "Tenant", placeholder="slug"),
        FilterField("model", "Model", placeholder="server model"),
        FilterField("warranty_ends_within", "Warranty ends within", placeholder="days"),
        FilterField("warranty_expired", "Warranty expired", "bool"),
    ),
)


# --- accelerators ------------------------------------------------------------------------------------------------


def _card_node(card: m.Accelerator) -> Cell:
    return text(card.node.hostname, href=node_href(card.node.hostname)) if card.node else DASH


ACCELERATOR_COLUMNS = [
    Column(
        "serial",
        "Serial",
        lambda c: text(c.serial, href=f"/accelerators/{c.serial}/", mono=True) if c.serial else Cell("(no serial)"),
        ("serial",),
    ),
    Column("model", "Model", lambda c: text(c.model.name), ("model__name",)),
    Column("site", "Site", _site, ("site__code",)),
    Column("node", "Node", _card_node, ("node__hostname",)),
    Column("slot", "Slot", lambda c: number(c.slot_index), ("slot_index",), numeric=True),
    Column(
        "lifecycle",
        "Lifecycle",
        lambda c: state(c.lifecycle, c.get_lifecycle_display(), LIFECYCLE_TONES),
        ("lifecycle",),
    ),
    Column(
        "health",
        "Health",
        lambda c: Cell(
            c.get_health_display(), tone=HEALTH_TONES.get(c.health, ""), title=c.health_detail, csv=c.health
        ),
        ("health",),
    ),
    Column("driver", "Driver", lambda c: text(c.driver_version, mono=True), ("driver_version",)),
    Column("firmware", "Firmware", lambda c: text(c.firmware_version, mono=True), ("firmware_version",)),
    Column("last_seen", "Last seen", lambda c: ago(c.last_seen_at), ("last_seen_at",)),
    # Optional columns.
    Column("vendor", "Vendor", lambda c: text(c.model.vendor.slug), ("model__vendor__slug",)),
    Column("uuid", "UUID", lambda c: text(c.uuid, mono=True), ("uuid",)),
    Column("pci_bus_id", "PCI bus", lambda c: text(c.pci_bus_id, mono=True), ("pci_bus_id",)),
    Column(
        "rack",
        "Rack",
        lambda c: text(c.node.rack.name, href=f"/racks/{c.node.rack_id}/") if c.node and c.node.rack else DASH,
        ("node__rack__name",),
    ),
    Column(
        "cluster",
        "Cluster",
        lambda c: text(c.node.cluster.name) if c.node and c.node.cluster else DASH,
        ("node__cluster__name",),
    ),
    Column(
        "tenant",
        "Tenant",
        lambda c: text(c.node.tenant.slug) if c.node and c.node.tenant else DASH,
        ("node__tenant__slug",),
    ),
    Column(
        "stock_location",
        "Stock location",
        lambda c: text(c.stock_location.name) if c.stock_location else DASH,
        ("stock_location__name",),
    ),
    Column("missing", "Missing", lambda c: flag(c.is_missing, "missing", tone="rejected"), ("is_missing",)),
    Column("health_changed", "Health changed", lambda c: ago(c.health_changed_at), ("health_changed_at",)),
    Column("po_number", "PO", lambda c: text(c.po_number), ("po_number",)),
    Column("warranty_end", "Warranty end", lambda c: text(c.warranty_end), ("warranty_end",)),
]

ACCELERATORS = ListSpec(
    name="accelerator-list",
    title="Accelerators",
    noun="accelerators",
    singular="accelerator",
    columns=ACCELERATOR_COLUMNS,
    default_cols=("serial", "model", "site", "node", "slot", "lifecycle", "health", "driver", "firmware", "last_seen"),
    default_sort="serial",
    rows=lambda user: restrict(m.Accelerator.objects.all(), user, "view"),
    filterset_class=f.AcceleratorFilterSet,
    decorate=lambda qs: qs.select_related(
        "model__vendor", "site", "node__rack", "node__cluster", "node__tenant", "stock_location"
    ),
    filter_fields=(
        FilterField("q", "Search", placeholder="serial, UUID, PCI bus, host"),
        FilterField("site", "Site", placeholder="code"),
        FilterField("node", "Node", placeholder="hostname"),
        FilterField("model", "Model", placeholder="e.g. H100-SXM5-80GB"),
        FilterField("vendor", "Vendor", placeholder="slug"),
        FilterField("lifecycle", "Lifecycle", "choice", choices_of(f.AcceleratorFilterSet, "lifecycle")),
        FilterField("health", "Health", "choice", choices_of(f.AcceleratorFilterSet, "health")),
        FilterField("is_missing", "Missing", "bool"),
        FilterField("warranty_ends_within", "Warranty ends within", placeholder="days"),
        FilterField("warranty_expired", "Warranty expired", "bool"),
    ),
)


# --- switches ----------------------------------------------------------------------------------------------------


def _switch_href(name: str) -> str:
    return f"/switches/{name}/"


def _switch_rack(sw: m.Switch) -> Cell:
    if sw.rack is None:
        return DASH
    return Cell(f"{sw.rack.name} U{sw.position}" if sw.position else sw.rack.name, href=f"/racks/{sw.rack_id}/")


SWITCH_COLUMNS = [
    Column("name", "Name", lambda s: text(s.name, href=_switch_href(s.name)), ("name",)),
    Column("site", "Site", _site, ("site__code",)),
    Column("rack", "Rack / U", _switch_rack, ("rack__name", "position")),
    Column(
        "fabric",
        "Fabric",
        lambda s: text(s.fabric.name, href=f"/fabrics/{s.fabric_id}/") if s.fabric else DASH,
        ("fabric__name",),
    ),
    Column("role", "Role", lambda s: text(s.get_role_display()), ("role",)),
    Column("status", "Status", lambda s: state(s.status, s.get_status_display(), SWITCH_STATUS_TONES), ("status",)),
    Column("rail", "Rail", lambda s: number(s.rail), ("rail",), numeric=True),
    Column("scalable_unit", "SU", lambda s: number(s.scalable_unit), ("scalable_unit",), numeric=True),
    Column("vendor", "Vendor", lambda s: text(s.vendor.slug), ("vendor__slug",)),
    Column("model", "Model", lambda s: text(s.model_name), ("model_name",)),
    Column("os_version", "OS version", lambda s: text(s.os_version, mono=True), ("os_version",)),
    Column("mgmt_ip", "Mgmt IP", lambda s: text(s.mgmt_ip, mono=True), ("mgmt_ip",)),
    # Optional columns.
    Column("serial", "Serial", lambda s: text(s.serial, mono=True), ("serial",)),
    Column("ports", "Ports", lambda s: number(s.port_count), ("port_count",), numeric=True),
    Column("platform", "Platform", lambda s: text(s.platform), ("platform",)),
    Column("updated", "Updated", lambda s: ago(s.updated_at), ("updated_at",)),
]

SWITCHES = ListSpec(
    name="switch-list",
    title="Switches",
    noun="switches",
    singular="switch",
    columns=SWITCH_COLUMNS,
    default_cols=(
        "name",
        "site",
        "rack",
        "fabric",
        "role",
        "status",
        "rail",
        "scalable_unit",
        "vendor",
        "model",
        "os_version",
        "mgmt_ip",
    ),
    default_sort="name",
    rows=lambda user: restrict(m.Switch.objects.all(), user, "view"),
    filterset_class=f.SwitchFilterSet,
    decorate=lambda qs: qs.select_related("site", "rack", "fabric", "vendor").annotate(port_count=Count("ports")),
    filter_fields=(
        FilterField("q", "Search", placeholder="name, serial, model, OS"),
        FilterField("site", "Site", placeholder="code"),
        FilterField("fabric", "Fabric", placeholder="name"),
        FilterField("role", "Role", "choice", choices_of(f.SwitchFilterSet, "role")),
        FilterField("status", "Status", "choice", choices_of(f.SwitchFilterSet, "status")),
        FilterField("rail", "Rail", placeholder="0-7"),
    ),
)


# --- links -------------------------------------------------------------------------------------------------------


def _link_a(link: m.Link) -> Cell:
    if link.a_nic_port is not None:
        port = link.a_nic_port
        host = port.nic.node.hostname
        return Cell(f"{host} {port.nic.name}/{port.name}", href=node_href(host), mono=True)
    if link.a_switch_port is not None:
        port = link.a_switch_port
        return Cell(f"{port.switch.name} {port.name}", href=_switch_href(port.switch.name), mono=True)
    return DASH


def _link_b(link: m.Link) -> Cell:
    port = link.b_switch_port
    return Cell(f"{port.switch.name} {port.name}", href=_switch_href(port.switch.name), mono=True)


LINK_COLUMNS = [
    Column("a", "Side A", _link_a, ("a_nic_port__nic__node__hostname", "a_switch_port__switch__name")),
    Column("b", "Side B", _link_b, ("b_switch_port__switch__name", "b_switch_port__name")),
    Column(
        "fabric",
        "Fabric",
        lambda lk: text(lk.fabric.name, href=f"/fabrics/{lk.fabric_id}/"),
        ("fabric__name",),
    ),
    Column("rail", "Rail", lambda lk: number(lk.b_switch_port.switch.rail), ("b_switch_port__switch__rail",)),
    Column("status", "Status", lambda lk: state(lk.status, lk.get_status_display(), LINK_STATUS_TONES), ("status",)),
    Column("cable_type", "Cable", lambda lk: text(lk.get_cable_type_display()), ("cable_type",)),
    Column("length", "Length (m)", lambda lk: number(lk.length_m), ("length_m",), numeric=True),
    Column("cable_serial", "Cable serial", lambda lk: text(lk.cable_serial, mono=True), ("cable_serial",)),
    Column("id", "Id", lambda lk: number(lk.pk), ("id",), numeric=True),
    Column("updated", "Updated", lambda lk: ago(lk.updated_at), ("updated_at",)),
]

LINKS = ListSpec(
    name="link-list",
    title="Links",
    noun="links",
    singular="link",
    columns=LINK_COLUMNS,
    default_cols=("a", "b", "fabric", "rail", "status", "cable_type", "length", "cable_serial"),
    default_sort="a",
    rows=lambda user: restrict(m.Link.objects.all(), user, "view"),
    filterset_class=f.LinkFilterSet,
    decorate=lambda qs: qs.select_related(
        "fabric", "a_nic_port__nic__node", "a_switch_port__switch", "b_switch_port__switch"
    ),
    filter_fields=(
        FilterField("q", "Search", placeholder="cable serial"),
        FilterField("site", "Site", placeholder="code"),
        FilterField("fabric", "Fabric", placeholder="name"),
        FilterField("node", "Node", placeholder="hostname"),
        FilterField("switch", "Switch", placeholder="either end"),
        FilterField("rail", "Rail", placeholder="0-7"),
        FilterField("status", "Status", "choice", choices_of(f.LinkFilterSet, "status")),
        FilterField("cable_type", "Cable", "choice", choices_of(f.LinkFilterSet, "cable_type")),
    ),
)


# --- spare stock -------------------------------------------------------------------------------------------------


class StockFilterForm(forms.Form):
    """The stock overview's filters: the API overview's (?site=<code>, ?below_minimum=true), plus kind/model."""

    site = forms.CharField(required=False, max_length=100)
    kind = forms.ChoiceField(required=False, choices=[("", "any"), ("accelerator", "Cards"), ("part", "Parts")])
    model = forms.CharField(required=False, max_length=200)
    below_minimum = forms.NullBooleanField(required=False)

    def clean_below_minimum(self) -> bool | None:
        raw = (self.data.get("below_minimum") or "").strip().lower()
        if raw in ("", "unknown"):
            return None
        if raw in ("true", "1", "yes"):
            return True
        if raw in ("false", "0", "no"):
            return False
        raise forms.ValidationError("Either true or false.")


def _stock_rows(user: AbstractBaseUser) -> QuerySet:
    return restrict(m.Site.objects.all(), user, "view")


def _stock_select(sites: QuerySet, params: QueryDict) -> list[StockLine]:
    form = StockFilterForm(data=params)
    if not form.is_valid():
        raise ListError({k: [str(e) for e in v] for k, v in form.errors.items()})
    data = form.cleaned_data
    if codes := [c.strip() for c in data["site"].split(",") if c.strip()]:
        sites = sites.filter(code__in=codes)
    lines = stock_lines(site_ids=list(sites.values_list("pk", flat=True)))
    if data["kind"]:
        lines = [ln for ln in lines if ln.kind == data["kind"]]
    if data["model"]:
        lines = [ln for ln in lines if ln.model_name == data["model"]]
    if data["below_minimum"] is not None:
        lines = [ln for ln in lines if ln.is_below_minimum == data["below_minimum"]]
    return lines


_STOCK_SORT = {
    "site": lambda ln: (ln.site_code, ln.kind, ln.model_name),
    "kind": lambda ln: (ln.kind, ln.site_code, ln.model_name),
    "model": lambda ln: (ln.model_name, ln.site_code),
    "installed": lambda ln: ln.installed or 0,
    "on_hand": lambda ln: ln.on_hand,
    "reserved": lambda ln: ln.reserved,
    "free": lambda ln: ln.free,
    "minimum": lambda ln: ln.minimum if ln.minimum is not None else -1,
    "state": lambda ln: (not ln.is_below_minimum, ln.site_code),
    "ratio": lambda ln: ln.spare_ratio_percent if ln.spare_ratio_percent is not None else -1,
}


def _stock_sort(lines: list[StockLine], key: str, descending: bool) -> list[StockLine]:
    return sorted(lines, key=_STOCK_SORT[key], reverse=descending)


def _in_stock_href(line: StockLine) -> str:
    if line.kind != "accelerator":
        return ""
    return "/accelerators/?" + urlencode({"site": line.site_code, "model": line.model_name, "lifecycle": "in_stock"})


def _stock_state(line: StockLine) -> Cell:
    if line.minimum is None:
        return DASH
    if line.is_below_minimum:
        return Cell("below minimum", tone="rejected", csv="below minimum")
    return Cell("ok", muted=True)


STOCK_COLUMNS = [
    Column("site", "Site", lambda ln: Cell(ln.site_code, href=f"/sites/{ln.site_code}/")),
    Column("kind", "Kind", lambda ln: Cell("card" if ln.kind == "accelerator" else "part", csv=ln.kind)),
    Column("model", "Model", lambda ln: Cell(ln.model_name)),
    Column("installed", "Installed", lambda ln: number(ln.installed), numeric=True),
    Column(
        "on_hand",
        "Spares on hand",
        lambda ln: Cell(f"{ln.on_hand:,}", href=_in_stock_href(ln), csv=str(ln.on_hand)),
        numeric=True,
    ),
    Column("reserved", "Reserved", lambda ln: number(ln.reserved), numeric=True),
    Column("free", "Free", lambda ln: number(ln.free), numeric=True),
    Column("minimum", "Minimum", lambda ln: number(ln.minimum), numeric=True),
    Column("state", "Against minimum", _stock_state),
    Column(
        "ratio",
        "Spares per 100 installed",
        lambda ln: DASH if ln.spare_ratio_percent is None else Cell(f"{ln.spare_ratio_percent:g}"),
        numeric=True,
    ),
]

STOCK = ListSpec(
    name="stock-list",
    title="Spare stock",
    noun="stock lines",
    singular="stock line",
    columns=STOCK_COLUMNS,
    default_cols=("site", "kind", "model", "installed", "on_hand", "reserved", "free", "minimum", "state", "ratio"),
    default_sort="site",
    rows=_stock_rows,
    select=_stock_select,
    sort_rows=_stock_sort,
    filter_fields=(
        FilterField("site", "Site", placeholder="code"),
        FilterField("kind", "Kind", "choice", [("accelerator", "Cards"), ("part", "Parts")]),
        FilterField("model", "Model", placeholder="model or SKU"),
        FilterField("below_minimum", "Below minimum", "bool"),
    ),
    notes=lambda user: [
        "Spares on hand are the cards in stock at the site (from the stock ledger, which every move writes); "
        "free = on hand - reserved for a repair. A number links to the cards it counts."
    ],
)


# --- views -------------------------------------------------------------------------------------------------------


def _view(spec: ListSpec):
    @login_required
    def view(request: HttpRequest) -> HttpResponse:
        return list_page(request, spec)

    view.__name__ = spec.name.replace("-", "_")
    view.__doc__ = f"{spec.title}: filters as the API's, ?sort=, ?cols=, ?page=, ?format=csv (every row)."
    return view


LISTS = (NODES, ACCELERATORS, SWITCHES, LINKS, STOCK)

urlpatterns: list[URLPattern] = [
    path("nodes/", _view(NODES), name="node-list"),
    path("accelerators/", _view(ACCELERATORS), name="accelerator-list"),
    path("switches/", _view(SWITCHES), name="switch-list"),
    path("links/", _view(LINKS), name="link-list"),
    path("stock/", _view(STOCK), name="stock-list"),
]
