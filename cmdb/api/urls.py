"""The CMDB API, mounted at /api/cmdb/ (see gpuops/api_urls.py)."""

from __future__ import annotations

from django.urls import include, path, re_path

from gpuops.api.django_errors import api_not_found
from gpuops.api.routers import BulkRouter

from .views import inventory as v
from .views.auth import TokenView
from .views.compliance import ComplianceComponentsView, ComplianceCsvView, ComplianceSummaryView
from .views.lifecycle import (
    CardHoursCsvView,
    CardHoursView,
    IdleCardsView,
    RmaTurnaroundView,
    WarrantyReportView,
)
from .views.summary import FleetSummaryView

app_name = "cmdb-api"

router = BulkRouter()
router.register("sites", v.SiteViewSet)
router.register("rooms", v.RoomViewSet)
router.register("racks", v.RackViewSet)
router.register("clusters", v.ClusterViewSet)
router.register("tenants", v.TenantViewSet)
router.register("vendors", v.VendorViewSet)
router.register("accelerator-models", v.AcceleratorModelViewSet)
router.register("server-models", v.ServerModelViewSet)
router.register("part-models", v.PartModelViewSet)
router.register("tags", v.TagViewSet)
router.register("driver-packages", v.DriverPackageViewSet)
router.register("health-policies", v.HealthPolicyViewSet)
router.register("nodes", v.NodeViewSet)
router.register("components", v.ComponentViewSet)
router.register("nics", v.NicViewSet)
router.register("nic-ports", v.NicPortViewSet)
router.register("installed-software", v.InstalledSoftwareViewSet)
router.register("health-events", v.HealthEventViewSet)
router.register("accelerators", v.AcceleratorViewSet)
router.register("accelerator-placements", v.AcceleratorPlacementViewSet)
router.register("stock-locations", v.StockLocationViewSet)
router.register("part-items", v.PartItemViewSet)
router.register("fabrics", v.FabricViewSet)
router.register("switches", v.SwitchViewSet)
router.register("switch-ports", v.SwitchPortViewSet)
router.register("links", v.LinkViewSet)
router.register("changes", v.ChangeRecordViewSet)
router.register("firmware-baselines", v.FirmwareBaselineViewSet)


urlpatterns = [
    path("summary/", FleetSummaryView.as_view(), name="summary"),
    path("reports/card-hours/", CardHoursView.as_view(), name="report-card-hours"),
    path("reports/card-hours.csv", CardHoursCsvView.as_view(), name="report-card-hours-csv"),
    path("reports/warranty/", WarrantyReportView.as_view(), name="report-warranty"),
    path("reports/idle-cards/", IdleCardsView.as_view(), name="report-idle-cards"),
    path("reports/rma-turnaround/", RmaTurnaroundView.as_view(), name="report-rma-turnaround"),
    path("auth/token/", TokenView.as_view(), name="auth-token"),
    path("compliance/", ComplianceSummaryView.as_view(), name="compliance"),
    path("compliance/components/", ComplianceComponentsView.as_view(), name="compliance-components"),
    path("compliance/export.csv", ComplianceCsvView.as_view(), name="compliance-csv"),
    path("", include(router.urls)),
    re_path(r"^.*$", api_not_found),
]
