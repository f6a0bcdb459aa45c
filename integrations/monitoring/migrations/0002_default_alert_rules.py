"""The default rule table: dcgm-exporter and node-exporter alerts as health signals. Existing rows are kept.

Alert names are the ones the shipped rules use (deploy/prometheus/gpuops-dcgm.rules.yml) and common variants
(the metric's own name, node-exporter's mixin); operators add or edit rows in the admin. Frozen copy: no app
code is imported.
"""

from django.db import migrations

# (name, alertname, matchers, kind, code, code_label, code_from_value, scope, priority, description)
ROWS = [
    (
        "dcgm-xid",
        "~DCGMXidError|GpuXidError|DCGM_FI_DEV_XID_ERRORS",
        {},
        "xid",
        "",
        "xid",
        True,
        "card",
        10,
        "dcgm-exporter DCGM_FI_DEV_XID_ERRORS: the Xid from the `xid` label, else the alert's value annotation",
    ),
    (
        "dcgm-ecc-dbe",
        "~DCGMDoubleBitEccError|GpuEccDbe|DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        {},
        "ecc_uncorrectable",
        "",
        "",
        False,
        "card",
        10,
        "dcgm-exporter DCGM_FI_DEV_ECC_DBE_VOL_TOTAL: volatile double-bit ECC errors",
    ),
    (
        "dcgm-row-remap-failure",
        "~DCGMRowRemapFailure|GpuRowRemapFailure|DCGM_FI_DEV_ROW_REMAP_FAILURE",
        {},
        "remap_failure",
        "",
        "",
        False,
        "card",
        10,
        "dcgm-exporter DCGM_FI_DEV_ROW_REMAP_FAILURE",
    ),
    (
        "dcgm-nvlink-errors",
        "~DCGMNVLinkErrors|GpuNvlinkErrors|DCGM_FI_DEV_NVLINK_.*",
        {},
        "nvlink",
        "",
        "",
        False,
        "card",
        10,
        "dcgm-exporter NVLink CRC / replay / recovery error counters rising",
    ),
    (
        "dcgm-temperature",
        "~DCGMGpuTemperatureHigh|GpuTemperatureHigh|DCGM_FI_DEV_GPU_TEMP",
        {},
        "temperature",
        "",
        "",
        False,
        "card",
        10,
        "dcgm-exporter DCGM_FI_DEV_GPU_TEMP above the limit",
    ),
    (
        "dcgm-power",
        "~DCGMPowerViolation|GpuPowerViolation|DCGM_FI_DEV_POWER_VIOLATION",
        {},
        "power",
        "",
        "",
        False,
        "card",
        10,
        "dcgm-exporter DCGM_FI_DEV_POWER_VIOLATION rising",
    ),
    (
        "dcgm-thermal-violation",
        "~DCGMThermalViolation|GpuThermalViolation|DCGM_FI_DEV_THERMAL_VIOLATION",
        {},
        "thermal_violation",
        "",
        "",
        False,
        "card",
        10,
        "dcgm-exporter DCGM_FI_DEV_THERMAL_VIOLATION rising",
    ),
    (
        "node-down",
        "~NodeDown|InstanceDown|NodeExporterDown",
        {},
        "node_down",
        "",
        "",
        False,
        "node",
        20,
        "node-exporter target down (up == 0)",
    ),
    (
        "node-disk",
        "~NodeFilesystem.*|NodeDisk.*",
        {},
        "disk",
        "",
        "",
        False,
        "node",
        20,
        "node-exporter filesystem filling up / disk errors (node-mixin alerts)",
    ),
    (
        "node-memory",
        "~NodeMemory.*|NodeOutOfMemory|NodeHighMemory.*",
        {},
        "memory",
        "",
        "",
        False,
        "node",
        20,
        "node-exporter memory pressure / memory errors",
    ),
    (
        "node-unhealthy",
        "~NodeUnhealthy|HostUnhealthy",
        {},
        "node_unhealthy",
        "",
        "",
        False,
        "node",
        50,
        "A monitor says the node is unhealthy (the generic fallback for other monitors)",
    ),
]


def ensure(apps, schema_editor):
    rule = apps.get_model("monitoring", "AlertRule")
    existing = set(rule.objects.values_list("name", flat=True))
    rule.objects.bulk_create(
        [
            rule(
                name=n,
                alertname=a,
                matchers=m,
                kind=k,
                code=c,
                code_label=cl,
                code_from_value=cv,
                scope=s,
                priority=p,
                description=d,
            )
            for n, a, m, k, c, cl, cv, s, p, d in ROWS
            if n not in existing
        ]
    )


def remove(apps, schema_editor):
    apps.get_model("monitoring", "AlertRule").objects.filter(name__in=[r[0] for r in ROWS]).delete()


class Migration(migrations.Migration):
    dependencies = [("monitoring", "0001_initial")]

    operations = [migrations.RunPython(ensure, remove)]
