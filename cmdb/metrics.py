"""The CMDB's fleet gauges for /metrics: grouped counts, a handful of queries whatever the fleet size.

Groups are counted by ids (no joins on the big tables) and the few names (sites, models, vendors) are read
separately, so the 100,000-card fleet costs one GROUP BY over the accelerator table.
"""

from __future__ import annotations

from django.db.models import Count

from gpuops.metrics import GaugeData

from .compliance import compliance_by_site, compliance_outdated_nodes, compliance_scope
from .models import Accelerator, AcceleratorLifecycle, AcceleratorModel, HealthEvent, Node, Site


def cmdb_fleet_gauges() -> list[GaugeData]:
    sites = dict(Site.objects.values_list("pk", "code"))
    models = {
        pk: (name, vendor) for pk, name, vendor in AcceleratorModel.objects.values_list("pk", "name", "vendor__slug")
    }

    cards = GaugeData(
        "gpuops_accelerators",
        "Accelerators by vendor, model, health, lifecycle and site",
        ["vendor", "model", "health", "lifecycle", "site"],
    )
    spares = GaugeData("gpuops_spares", "Spare accelerators in stock, by site and model", ["site", "model"])
    rows = Accelerator.objects.values_list("model_id", "health", "lifecycle", "site_id").annotate(n=Count("id"))
    spare_counts: dict[tuple[str, str], int] = {}
    for model_id, health, lifecycle, site_id, n in rows.order_by():
        name, vendor = models.get(model_id, ("?", "?"))
        site = sites.get(site_id, "")
        cards.add([vendor, name, health, lifecycle, site], n)
        if lifecycle == AcceleratorLifecycle.IN_STOCK:
            spare_counts[(site, name)] = spare_counts.get((site, name), 0) + n
    for (site, name), n in sorted(spare_counts.items()):
        spares.add([site, name], n)

    nodes = GaugeData(
        "gpuops_nodes",
        "Nodes by site, status, health, cordon and staleness",
        ["site", "status", "health", "cordoned", "stale"],
    )
    stale = GaugeData("gpuops_nodes_stale", "Nodes whose agent stopped reporting, by site", ["site"])
    stale_counts: dict[str, int] = {code: 0 for code in sites.values()}
    node_rows = Node.objects.values_list("site_id", "status", "health", "is_cordoned", "is_stale").annotate(
        n=Count("id")
    )
    for site_id, status, health, cordoned, is_stale, n in node_rows.order_by():
        site = sites.get(site_id, "")
        nodes.add([site, status, health, str(cordoned).lower(), str(is_stale).lower()], n)
        if is_stale:
            stale_counts[site] = stale_counts.get(site, 0) + n
    for site, n in sorted(stale_counts.items()):
        stale.add([site], n)

    events = GaugeData(
        "gpuops_health_events_open", "Open health events by kind, severity and source", ["kind", "severity", "source"]
    )
    event_rows = HealthEvent.objects.filter(resolved_at__isnull=True).values_list("kind", "severity", "source")
    for kind, severity, source, n in event_rows.annotate(n=Count("id")).order_by():
        events.add([kind, severity, source], n)
    return [cards, spares, nodes, stale, events]


def compliance_fleet_gauges() -> list[GaugeData]:
    """Firmware components and driver packages by site, component and compliance status (cmdb.compliance),
    and the nodes with at least one outdated component by site."""
    scope = compliance_scope(user=None)
    components = GaugeData(
        "gpuops_firmware_components",
        "Firmware components and driver packages by site, component and compliance status",
        ["site", "component", "status"],
    )
    for key, n in sorted(compliance_by_site(scope).items()):
        components.add(key, n)
    outdated = GaugeData("gpuops_nodes_firmware_outdated", "Nodes with at least one outdated component", [])
    outdated.add([], compliance_outdated_nodes(scope))
    return [components, outdated]
