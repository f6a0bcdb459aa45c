"""django-filter filter sets of the CMDB API: the filters ops use, with `__in` lists, `?q=` and `?ordering=`.

Conventions (the same on every endpoint):
- a related object is matched by id or by its natural key: `?site=wh1` or `?site=3`, `?model=H100-SXM5-80GB`,
  `?vendor=nvidia`, `?node=wh1-h100-0001`; `null` matches "none" (`?rack=null`);
- `<filter>__in=a,b,c` takes a comma-separated list (any of);
- `?q=` is a case-insensitive substring search over the endpoint's identifying text fields;
- `?ordering=field` / `?ordering=-field` from the listed choices;
- to-many filters (tags, installed drivers) use subqueries, so rows never repeat.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

import django_filters as df
from django import forms
from django.core.exceptions import FieldDoesNotExist
from django.db.models import Q, QuerySet
from django.utils import timezone
from django_filters.constants import EMPTY_VALUES
from django_filters.fields import IsoDateTimeField
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from gpuops.api.fields import MAX_ID

from . import models as m
from .models.software import PACKAGE_COMPONENT_CHOICES

#: `?q=` through a foreign key (a card's node hostname) looks the related rows up first when at most this many match
RELATED_SEARCH_CAP = 500


@extend_schema_field(OpenApiTypes.STR)
class RefFilter(df.CharFilter):
    """A related object by id or natural key (`many=True`: a comma-separated list); `null` for none."""

    def __init__(self, paths: str | tuple[str, ...], key: str, *, many: bool = False, **kwargs: Any) -> None:
        self.paths = (paths,) if isinstance(paths, str) else paths
        self.key = key
        self.many = many
        super().__init__(field_name=self.paths[0], **kwargs)

    def filter(self, qs: QuerySet, value: Any) -> QuerySet:
        if value in EMPTY_VALUES:
            return qs
        tokens = [t.strip() for t in (value.split(",") if self.many else [value]) if t.strip()]
        if not tokens:
            return qs
        ids = [int(t) for t in tokens if t.isdigit() and int(t) <= MAX_ID]
        keys = [t for t in tokens if t.lower() != "null"]
        condition = Q()
        for path in self.paths:
            if any(t.lower() == "null" for t in tokens):
                condition |= Q(**{f"{path}__isnull": True})
            if ids:
                condition |= Q(**{f"{path}__in": ids})
            if keys:
                condition |= Q(**{f"{path}__{self.key}__in": keys})
        return qs.filter(condition)


def ref(paths: str | tuple[str, ...], key: str, what: str) -> tuple[RefFilter, RefFilter]:
    """The pair `<name>` / `<name>__in` of filters on a related object."""
    return (
        RefFilter(paths, key, label=f"{what}: id or {key}"),
        RefFilter(paths, key, many=True, label=f"{what}: comma-separated ids or {key}s"),
    )


class ChoiceInFilter(df.BaseInFilter, df.ChoiceFilter):
    pass


class CharInFilter(df.BaseInFilter, df.CharFilter):
    pass


class IntFilter(df.NumberFilter):
    """An integer (ids, rails, slots): the form refuses decimals and values beyond 64 bits."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", -MAX_ID)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)


class NumberInFilter(df.BaseInFilter, IntFilter):
    pass


class UtcIsoDateTimeField(IsoDateTimeField):
    """ISO 8601 datetimes, converted to UTC: PostgreSQL refuses offsets beyond +-15:59, which the ISO parser
    accepts (e.g. `-20:10`), so the query never carries the client's offset."""

    def to_python(self, value: Any) -> Any:
        parsed = super().to_python(value)
        if parsed is None or parsed.tzinfo is None:
            return parsed
        try:
            return parsed.astimezone(dt.UTC)
        except OverflowError as exc:
            raise forms.ValidationError("Date and time out of range.") from exc


class DateTimeFilter(df.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


def choice(field: str, choices: Any) -> tuple[df.ChoiceFilter, ChoiceInFilter]:
    return (
        df.ChoiceFilter(field_name=field, choices=choices),
        ChoiceInFilter(field_name=field, choices=choices, lookup_expr="in", label=f"{field}: comma-separated"),
    )


def text(field: str) -> tuple[df.CharFilter, CharInFilter]:
    return (
        df.CharFilter(field_name=field),
        CharInFilter(field_name=field, lookup_expr="in", label=f"{field}: comma-separated"),
    )


def number(field: str) -> tuple[IntFilter, NumberInFilter]:
    return (
        IntFilter(field_name=field),
        NumberInFilter(field_name=field, lookup_expr="in", label=f"{field}: comma-separated"),
    )


def _split_driver(token: str) -> Q:
    component, _, version = token.partition(":")
    condition = Q(component=component.strip())
    if version.strip():
        condition &= Q(version=version.strip())
    return condition


def nodes_with_driver(value: str) -> QuerySet:
    """Ids of nodes with any of the `component[:version]` tokens installed (subquery)."""
    condition = Q(pk__in=[])
    for token in (t for t in value.split(",") if t.strip()):
        condition |= _split_driver(token)
    return m.InstalledSoftware.objects.filter(condition).values("node_id")


def nodes_with_version(value: str) -> QuerySet:
    versions = [v.strip() for v in value.split(",") if v.strip()]
    return m.InstalledSoftware.objects.filter(version__in=versions).values("node_id")


def tagged(through: Any, owner: str, value: str) -> QuerySet:
    slugs = [t.strip() for t in value.split(",") if t.strip()]
    return through.objects.filter(tag__slug__in=slugs).values(f"{owner}_id")


class CmdbFilterSet(df.FilterSet):
    """Base: `id`/`id__in`, free text `q` over `search_fields`."""

    search_fields: ClassVar[tuple[str, ...]] = ()

    id, id__in = number("id")
    q = df.CharFilter(method="search", label="Free text: case-insensitive substring of the identifying fields.")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        value = value.strip()
        if not value or not self.search_fields:
            return queryset
        condition = Q()
        for field in self.search_fields:
            relation, _, column = field.rpartition("__")
            related = self._related_matches(queryset.model, relation, column, value) if relation else None
            if related is not None:
                condition |= Q(**{f"{relation}__in": related})
            else:
                condition |= Q(**{f"{field}__icontains": value})
        return queryset.filter(condition)

    @staticmethod
    def _related_matches(model: Any, relation: str, column: str, value: str) -> list[int] | None:
        """The ids of the related rows a search field through a foreign key matches, looked up first.

        Why: `node__hostname LIKE ...` ORed with the card's own columns makes PostgreSQL join every card to its
        node before filtering; a list of node ids beside the other branches lets each branch use its index.
        None (search through the join) when the relation is not one foreign key or matches too many rows.
        """
        try:
            field = model._meta.get_field(relation)
        except FieldDoesNotExist:
            return None
        if not field.many_to_one:
            return None
        ids = list(
            field.related_model._default_manager.filter(**{f"{column}__icontains": value}).values_list("pk", flat=True)[
                : RELATED_SEARCH_CAP + 1
            ]
        )
        return ids if len(ids) <= RELATED_SEARCH_CAP else None


class TrackedFilterSet(CmdbFilterSet):
    """Tracked models: changed-since filters (`updated_at__gte`) for incremental sync."""

    updated_at__gte = DateTimeFilter(field_name="updated_at", lookup_expr="gte")
    updated_at__lte = DateTimeFilter(field_name="updated_at", lookup_expr="lte")


# --- locations and organisation --------------------------------------------------------------------------------


class SiteFilterSet(TrackedFilterSet):
    search_fields = ("code", "name", "region")
    code, code__in = text("code")
    region, region__in = text("region")
    ordering = df.OrderingFilter(fields=("id", "code", "name", "region"))

    class Meta:
        model = m.Site
        fields: list[str] = []


class RoomFilterSet(TrackedFilterSet):
    search_fields = ("name",)
    site, site__in = ref("site", "code", "Site")
    name, name__in = text("name")
    ordering = df.OrderingFilter(fields=("id", "name", ("site__code", "site")))

    class Meta:
        model = m.Room
        fields: list[str] = []


class RackFilterSet(TrackedFilterSet):
    search_fields = ("name", "row")
    site, site__in = ref("room__site", "code", "Site")
    room, room__in = ref("room", "name", "Room")
    name, name__in = text("name")
    row, row__in = text("row")
    status, status__in = choice("status", m.RackStatus.choices)
    cooling, cooling__in = choice("cooling", m.RackCooling.choices)
    ordering = df.OrderingFilter(fields=("id", "name", "row", "status", ("room__site__code", "site")))

    class Meta:
        model = m.Rack
        fields: list[str] = []


class ClusterFilterSet(TrackedFilterSet):
    search_fields = ("name",)
    site, site__in = ref("site", "code", "Site")
    name, name__in = text("name")
    kind, kind__in = choice("kind", m.ClusterKind.choices)
    ordering = df.OrderingFilter(fields=("id", "name", "kind"))

    class Meta:
        model = m.Cluster
        fields: list[str] = []


class TenantFilterSet(TrackedFilterSet):
    search_fields = ("slug", "name")
    slug, slug__in = text("slug")
    kind, kind__in = choice("kind", m.TenantKind.choices)
    ordering = df.OrderingFilter(fields=("id", "slug", "name"))

    class Meta:
        model = m.Tenant
        fields: list[str] = []


# --- catalog -----------------------------------------------------------------------------------------------------


class VendorFilterSet(TrackedFilterSet):
    search_fields = ("slug", "name")
    slug, slug__in = text("slug")
    makes_accelerators = df.BooleanFilter()
    ordering = df.OrderingFilter(fields=("id", "slug", "name"))

    class Meta:
        model = m.Vendor
        fields: list[str] = []


class AcceleratorModelFilterSet(TrackedFilterSet):
    search_fields = ("name",)
    vendor, vendor__in = ref("vendor", "slug", "Vendor")
    name, name__in = text("name")
    interconnect, interconnect__in = choice("interconnect", m.Interconnect.choices)
    form_factor, form_factor__in = choice("form_factor", m.FormFactor.choices)
    ordering = df.OrderingFilter(fields=("id", "name", "memory_gib", ("vendor__slug", "vendor")))

    class Meta:
        model = m.AcceleratorModel
        fields: list[str] = []


class ServerModelFilterSet(TrackedFilterSet):
    search_fields = ("name",)
    vendor, vendor__in = ref("vendor", "slug", "Vendor")
    accelerator_model, accelerator_model__in = ref("accelerator_model", "name", "Accelerator model")
    name, name__in = text("name")
    ordering = df.OrderingFilter(fields=("id", "name", ("vendor__slug", "vendor")))

    class Meta:
        model = m.ServerModel
        fields: list[str] = []


class PartModelFilterSet(TrackedFilterSet):
    search_fields = ("sku", "name")
    vendor, vendor__in = ref("vendor", "slug", "Vendor")
    sku, sku__in = text("sku")
    kind, kind__in = choice("kind", m.PartKind.choices)
    ordering = df.OrderingFilter(fields=("id", "sku", "name", "kind"))

    class Meta:
        model = m.PartModel
        fields: list[str] = []


class TagFilterSet(CmdbFilterSet):
    search_fields = ("slug",)
    slug, slug__in = text("slug")
    ordering = df.OrderingFilter(fields=("id", "slug"))

    class Meta:
        model = m.Tag
        fields: list[str] = []


class FirmwareBaselineFilterSet(TrackedFilterSet):
    search_fields = ("model", "note")
    component, component__in = text("component")
    model, model__in = text("model")
    rule, rule__in = choice("rule", m.BaselineRule.choices)
    ordering = df.OrderingFilter(fields=("id", "component", "model"))

    class Meta:
        model = m.FirmwareBaseline
        fields: list[str] = []


class DriverPackageFilterSet(TrackedFilterSet):
    search_fields = ("version", "notes")
    vendor, vendor__in = ref("vendor", "slug", "Vendor")
    component, component__in = choice("component", PACKAGE_COMPONENT_CHOICES)
    version, version__in = text("version")
    supports = df.CharFilter(
        method="filter_supports",
        label="Compatibility matrix: packages supporting these accelerator models (comma-separated ids or names).",
    )
    requires_reboot = df.BooleanFilter()
    ordering = df.OrderingFilter(fields=("id", "component", "version", "released_at"))

    class Meta:
        model = m.DriverPackage
        fields: list[str] = []

    def filter_supports(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        tokens = [t.strip() for t in value.split(",") if t.strip()]
        through = m.DriverPackage.supported_models.through
        matches = through.objects.filter(
            Q(acceleratormodel_id__in=[int(t) for t in tokens if t.isdigit() and int(t) <= MAX_ID])
            | Q(acceleratormodel__name__in=tokens)
        )
        return queryset.filter(pk__in=matches.values("driverpackage_id"))


class HealthPolicyFilterSet(CmdbFilterSet):
    search_fields = ("kind", "code", "description")
    vendor, vendor__in = ref("vendor", "slug", "Vendor")
    kind, kind__in = text("kind")
    code, code__in = text("code")
    severity, severity__in = choice("severity", m.Severity.choices)
    action, action__in = choice("action", m.HealthAction.choices)
    marks_failed = df.BooleanFilter()
    ordering = df.OrderingFilter(fields=("id", "kind", "code", "severity"))

    class Meta:
        model = m.HealthPolicy
        fields: list[str] = []


# --- nodes and components --------------------------------------------------------------------------------------


class WarrantyFilters(df.FilterSet):
    """Purchase and warranty dates (nodes and cards): ranges, the ones ending within N days, the expired."""

    purchase_date__gte = df.DateFilter(field_name="purchase_date", lookup_expr="gte")
    purchase_date__lte = df.DateFilter(field_name="purchase_date", lookup_expr="lte")
    warranty_end__gte = df.DateFilter(field_name="warranty_end", lookup_expr="gte")
    warranty_end__lte = df.DateFilter(field_name="warranty_end", lookup_expr="lte")
    warranty_end__isnull = df.BooleanFilter(field_name="warranty_end", lookup_expr="isnull")
    warranty_ends_within = df.NumberFilter(
        method="filter_warranty_ends_within",
        label="Warranty ends between today and this many days from today (inclusive).",
        min_value=0,
        max_value=3650,
        decimal_places=0,
    )
    warranty_expired = df.BooleanFilter(
        method="filter_warranty_expired", label="true: the warranty ended before today; false: it has not."
    )

    def filter_warranty_ends_within(self, queryset: QuerySet, name: str, value: Any) -> QuerySet:
        if value is None:
            return queryset
        today = timezone.localdate()
        return queryset.filter(warranty_end__gte=today, warranty_end__lte=today + dt.timedelta(days=int(value)))

    def filter_warranty_expired(self, queryset: QuerySet, name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        expired = Q(warranty_end__lt=timezone.localdate())
        return queryset.filter(expired) if value else queryset.exclude(expired)


class NodeFilterSet(WarrantyFilters, TrackedFilterSet):
    search_fields = ("hostname", "serial", "asset_tag", "po_number")
    site, site__in = ref("site", "code", "Site")
    room, room__in = ref("rack__room", "name", "Room")
    rack, rack__in = ref("rack", "name", "Rack")
    cluster, cluster__in = ref("cluster", "name", "Cluster")
    tenant, tenant__in = ref("tenant", "slug", "Tenant")
    model, model__in = ref("server_model", "name", "Server model")
    accelerator_model, accelerator_model__in = ref("server_model__accelerator_model", "name", "Accelerator model")
    # Server vendor (supermicro) or accelerator vendor (nvidia): either finds the node.
    vendor, vendor__in = ref(("server_model__vendor", "server_model__accelerator_model__vendor"), "slug", "Vendor")
    status, status__in = choice("status", m.NodeStatus.choices)
    health, health__in = choice("health", m.Health.choices)
    role, role__in = choice("role", m.NodeRole.choices)
    hostname, hostname__in = text("hostname")
    serial, serial__in = text("serial")
    asset_tag, asset_tag__in = text("asset_tag")
    po_number = df.CharFilter()
    bmc_address = df.CharFilter()
    is_cordoned = df.BooleanFilter()
    is_stale = df.BooleanFilter()
    last_seen_at__gte = DateTimeFilter(field_name="last_seen_at", lookup_expr="gte")
    last_seen_at__lte = DateTimeFilter(field_name="last_seen_at", lookup_expr="lte")
    tag = df.CharFilter(method="filter_tag", label="Tag slugs, comma-separated (any of).")
    driver = df.CharFilter(
        method="filter_driver",
        label="Installed component[:version], comma-separated (any of), e.g. nvidia-driver:550.127.05.",
    )
    installed_version = df.CharFilter(
        method="filter_installed_version", label="Any installed component at this version (comma-separated)."
    )
    ordering = df.OrderingFilter(
        fields=(
            "id",
            "hostname",
            "serial",
            "status",
            "health",
            "role",
            "position",
            "last_seen_at",
            "updated_at",
            ("site__code", "site"),
            ("rack__name", "rack"),
            ("cluster__name", "cluster"),
        )
    )

    class Meta:
        model = m.Node
        fields: list[str] = []

    def filter_tag(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(pk__in=tagged(m.Node.tags.through, "node", value))

    def filter_driver(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(pk__in=nodes_with_driver(value))

    def filter_installed_version(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(pk__in=nodes_with_version(value))


class _NodeChildFilterSet(TrackedFilterSet):
    """Objects inside a node: filter by the node and by where the node is."""

    node, node__in = ref("node", "hostname", "Node")
    site, site__in = ref("node__site", "code", "Site")
    cluster, cluster__in = ref("node__cluster", "name", "Cluster")


class ComponentFilterSet(_NodeChildFilterSet):
    search_fields = ("slot", "model_name", "serial", "vendor_name")
    kind, kind__in = choice("kind", m.ComponentKind.choices)
    serial, serial__in = text("serial")
    ordering = df.OrderingFilter(fields=("id", "kind", "slot", ("node__hostname", "node")))

    class Meta:
        model = m.Component
        fields: list[str] = []


class NicFilterSet(_NodeChildFilterSet):
    search_fields = ("name", "model_name", "serial", "node_guid", "pci_bus_id")
    kind, kind__in = choice("kind", m.NicKind.choices)
    name, name__in = text("name")
    serial, serial__in = text("serial")
    rail, rail__in = number("rail")
    is_missing = df.BooleanFilter()
    ordering = df.OrderingFilter(fields=("id", "name", "rail", ("node__hostname", "node")))

    class Meta:
        model = m.Nic
        fields: list[str] = []


class NicPortFilterSet(TrackedFilterSet):
    search_fields = ("name", "mac", "guid")
    node, node__in = ref("nic__node", "hostname", "Node")
    site, site__in = ref("nic__node__site", "code", "Site")
    nic, nic__in = number("nic")
    mac, mac__in = text("mac")
    guid, guid__in = text("guid")
    link_state, link_state__in = choice("link_state", m.LinkState.choices)
    ordering = df.OrderingFilter(fields=("id", "name", "mac", "guid"))

    class Meta:
        model = m.NicPort
        fields: list[str] = []


class InstalledSoftwareFilterSet(_NodeChildFilterSet):
    search_fields = ("version",)
    component, component__in = choice("component", m.DriverComponent.choices)
    version, version__in = text("version")
    package, package__in = number("package")
    driver = df.CharFilter(method="filter_driver", label="component[:version], comma-separated (any of).")
    ordering = df.OrderingFilter(fields=("id", "component", "version", ("node__hostname", "node")))

    class Meta:
        model = m.InstalledSoftware
        fields: list[str] = []

    def filter_driver(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        condition = Q(pk__in=[])
        for token in (t for t in value.split(",") if t.strip()):
            condition |= _split_driver(token)
        return queryset.filter(condition)


# --- accelerators ----------------------------------------------------------------------------------------------


class AcceleratorFilterSet(WarrantyFilters, TrackedFilterSet):
    search_fields = ("serial", "uuid", "pci_bus_id", "node__hostname")
    site, site__in = ref("site", "code", "Site")
    room, room__in = ref("node__rack__room", "name", "Room")
    rack, rack__in = ref("node__rack", "name", "Rack")
    node, node__in = ref("node", "hostname", "Node")
    cluster, cluster__in = ref("node__cluster", "name", "Cluster")
    tenant, tenant__in = ref("node__tenant", "slug", "Tenant")
    vendor, vendor__in = ref("model__vendor", "slug", "Vendor")
    model, model__in = ref("model", "name", "Accelerator model")
    stock_location, stock_location__in = ref("stock_location", "name", "Stock location")
    health, health__in = choice("health", m.Health.choices)
    lifecycle, lifecycle__in = choice("lifecycle", m.AcceleratorLifecycle.choices)
    serial, serial__in = text("serial")
    uuid, uuid__in = text("uuid")
    slot_index, slot_index__in = number("slot_index")
    pci_bus_id = df.CharFilter()
    driver_version, driver_version__in = text("driver_version")
    firmware_version, firmware_version__in = text("firmware_version")
    po_number = df.CharFilter()
    is_missing = df.BooleanFilter()
    tag = df.CharFilter(method="filter_tag", label="Tag slugs of the card's node, comma-separated (any of).")
    driver = df.CharFilter(
        method="filter_driver", label="Installed on the card's node: component[:version], comma-separated (any of)."
    )
    installed_version = df.CharFilter(
        method="filter_installed_version", label="Any component at this version installed on the card's node."
    )
    ordering = df.OrderingFilter(
        fields=(
            "id",
            "serial",
            "health",
            "lifecycle",
            "slot_index",
            "updated_at",
            "health_changed_at",
            ("node__hostname", "node"),
            ("site__code", "site"),
            ("model__name", "model"),
        )
    )

    class Meta:
        model = m.Accelerator
        fields: list[str] = []

    def filter_tag(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(node_id__in=tagged(m.Node.tags.through, "node", value))

    def filter_driver(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(node_id__in=nodes_with_driver(value))

    def filter_installed_version(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(node_id__in=nodes_with_version(value))


class AcceleratorPlacementFilterSet(CmdbFilterSet):
    search_fields = ("serial", "node_hostname", "note")
    accelerator, accelerator__in = ref("accelerator", "serial", "Accelerator")
    node, node__in = ref("node", "hostname", "Node")
    kind, kind__in = choice("kind", m.PlacementKind.choices)
    serial = df.CharFilter()
    source = df.CharFilter()
    correlation_id = df.CharFilter()
    is_open = df.BooleanFilter(field_name="ended_at", lookup_expr="isnull", label="Only current placements.")
    started_at__gte = DateTimeFilter(field_name="started_at", lookup_expr="gte")
    ordering = df.OrderingFilter(fields=("id", "started_at", "ended_at"))

    class Meta:
        model = m.AcceleratorPlacement
        fields: list[str] = []


class HealthEventFilterSet(CmdbFilterSet):
    search_fields = ("message", "dedup_key", "code")
    node, node__in = ref("node", "hostname", "Node")
    site, site__in = ref("node__site", "code", "Site")
    accelerator, accelerator__in = ref("accelerator", "serial", "Accelerator")
    kind, kind__in = text("kind")
    code, code__in = text("code")
    severity, severity__in = choice("severity", m.Severity.choices)
    action, action__in = choice("action", m.HealthAction.choices)
    is_open = df.BooleanFilter(field_name="resolved_at", lookup_expr="isnull", label="Only unresolved events.")
    last_seen_at__gte = DateTimeFilter(field_name="last_seen_at", lookup_expr="gte")
    last_seen_at__lte = DateTimeFilter(field_name="last_seen_at", lookup_expr="lte")
    ordering = df.OrderingFilter(fields=("id", "last_seen_at", "first_seen_at", "severity", "count"))

    class Meta:
        model = m.HealthEvent
        fields: list[str] = []


# --- stock -------------------------------------------------------------------------------------------------------


class StockLocationFilterSet(TrackedFilterSet):
    search_fields = ("name",)
    site, site__in = ref("site", "code", "Site")
    parent, parent__in = ref("parent", "name", "Parent location")
    name, name__in = text("name")
    kind, kind__in = choice("kind", m.StockLocationKind.choices)
    ordering = df.OrderingFilter(fields=("id", "name", ("site__code", "site")))

    class Meta:
        model = m.StockLocation
        fields: list[str] = []


class PartItemFilterSet(TrackedFilterSet):
    search_fields = ("serial",)
    site, site__in = ref("stock_location__site", "code", "Site")
    part_model, part_model__in = ref("part_model", "sku", "Part model")
    stock_location, stock_location__in = ref("stock_location", "name", "Stock location")
    node, node__in = ref("node", "hostname", "Node")
    status, status__in = choice("status", m.PartItemStatus.choices)
    serial, serial__in = text("serial")
    ordering = df.OrderingFilter(fields=("id", "serial", "status"))

    class Meta:
        model = m.PartItem
        fields: list[str] = []


# --- network -----------------------------------------------------------------------------------------------------


class FabricFilterSet(TrackedFilterSet):
    search_fields = ("name",)
    site, site__in = ref("site", "code", "Site")
    name, name__in = text("name")
    kind, kind__in = choice("kind", m.FabricKind.choices)
    purpose, purpose__in = choice("purpose", m.FabricPurpose.choices)
    ordering = df.OrderingFilter(fields=("id", "name", "kind", "purpose"))

    class Meta:
        model = m.Fabric
        fields: list[str] = []


class SwitchFilterSet(TrackedFilterSet):
    search_fields = ("name", "serial", "model_name", "os_version")
    site, site__in = ref("site", "code", "Site")
    rack, rack__in = ref("rack", "name", "Rack")
    fabric, fabric__in = ref("fabric", "name", "Fabric")
    vendor, vendor__in = ref("vendor", "slug", "Vendor")
    role, role__in = choice("role", m.SwitchRole.choices)
    status, status__in = choice("status", m.SwitchStatus.choices)
    name, name__in = text("name")
    serial, serial__in = text("serial")
    rail, rail__in = number("rail")
    scalable_unit, scalable_unit__in = number("scalable_unit")
    mgmt_ip = df.CharFilter()
    tag = df.CharFilter(method="filter_tag", label="Tag slugs, comma-separated (any of).")
    ordering = df.OrderingFilter(fields=("id", "name", "role", "status", "rail", "scalable_unit"))

    class Meta:
        model = m.Switch
        fields: list[str] = []

    def filter_tag(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(pk__in=tagged(m.Switch.tags.through, "switch", value))


class SwitchPortFilterSet(TrackedFilterSet):
    search_fields = ("name", "description", "guid", "mac")
    switch, switch__in = ref("switch", "name", "Switch")
    site, site__in = ref("switch__site", "code", "Site")
    fabric, fabric__in = ref("switch__fabric", "name", "Fabric")
    name, name__in = text("name")
    guid, guid__in = text("guid")
    admin_state, admin_state__in = choice("admin_state", m.LinkState.choices)
    oper_state, oper_state__in = choice("oper_state", m.LinkState.choices)
    ordering = df.OrderingFilter(fields=("id", "name", ("switch__name", "switch")))

    class Meta:
        model = m.SwitchPort
        fields: list[str] = []


class LinkFilterSet(TrackedFilterSet):
    search_fields = ("cable_serial",)
    fabric, fabric__in = ref("fabric", "name", "Fabric")
    site, site__in = ref("fabric__site", "code", "Site")
    node, node__in = ref("a_nic_port__nic__node", "hostname", "Node (side A)")
    # Either end: a leaf shows up whether it is side A (spine uplinks) or side B (node cables).
    switch, switch__in = ref(("a_switch_port__switch", "b_switch_port__switch"), "name", "Switch (either side)")
    rail, rail__in = number("b_switch_port__switch__rail")
    status, status__in = choice("status", m.LinkStatus.choices)
    cable_type, cable_type__in = choice("cable_type", m.CableType.choices)
    cable_serial = df.CharFilter()
    ordering = df.OrderingFilter(fields=("id", "status", "cable_type"))

    class Meta:
        model = m.Link
        fields: list[str] = []


# --- history -----------------------------------------------------------------------------------------------------


@extend_schema_field(OpenApiTypes.STR)
class ModelLabelFilter(df.CharFilter):
    """`cmdb.node` or `node` (comma-separated for several)."""

    def filter(self, qs: QuerySet, value: Any) -> QuerySet:
        if value in EMPTY_VALUES:
            return qs
        condition = Q(pk__in=[])
        for token in (t.strip().lower() for t in value.split(",") if t.strip()):
            app, _, model = token.rpartition(".")
            condition |= Q(content_type__model=model, **({"content_type__app_label": app} if app else {}))
        return qs.filter(condition)


class ChangeRecordFilterSet(CmdbFilterSet):
    search_fields = ("object_repr", "reason", "actor_repr")
    model = ModelLabelFilter(label="Model of the changed object: 'cmdb.node' or 'node' (comma-separated).")
    object_id, object_id__in = number("object_id")
    action, action__in = choice("action", m.ChangeAction.choices)
    source, source__in = text("source")
    actor, actor__in = ref("actor", "username", "Actor")
    correlation_id, correlation_id__in = text("correlation_id")
    at__gte = DateTimeFilter(field_name="at", lookup_expr="gte")
    at__lte = DateTimeFilter(field_name="at", lookup_expr="lte")
    ordering = df.OrderingFilter(fields=("id", "at"))

    class Meta:
        model = m.ChangeRecord
        fields: list[str] = []
