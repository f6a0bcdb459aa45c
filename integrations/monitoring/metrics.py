"""Monitoring's fleet gauges for /metrics: received alerts still firing, matched or not."""

from __future__ import annotations

from django.db.models import Count

from gpuops.metrics import GaugeData

from .models import AlertStatus, ReceivedAlert


def monitoring_fleet_gauges() -> list[GaugeData]:
    unmatched = GaugeData("gpuops_alerts_unmatched", "Firing alerts no node or card of the CMDB matched", [])
    firing = GaugeData("gpuops_alerts_firing", "Received alerts still firing, by matched", ["matched"])
    counts = dict(
        ReceivedAlert.objects.filter(status=AlertStatus.FIRING)
        .values_list("is_matched")
        .annotate(n=Count("id"))
        .order_by()
    )
    unmatched.add([], counts.get(False, 0))
    for matched in (True, False):
        firing.add([str(matched).lower()], counts.get(matched, 0))
    return [unmatched, firing]
