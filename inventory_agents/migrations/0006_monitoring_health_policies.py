"""Default policy rows for the conditions monitors report (Prometheus / Alertmanager with dcgm-exporter and
node-exporter): NVLink errors, temperature / power / thermal violations, node down, disk, memory, a generic
"node unhealthy". Existing rows are left alone.

The rows are a frozen copy (a migration must not import app code that changes later) of the tail of
cmdb.services.health_policies.DEFAULT_POLICIES.
"""

from django.db import migrations

# (kind, code, severity, action, marks_failed, description), vendor-independent rows.
ROWS = [
    ("nvlink", "", "warning", "monitor", False, "NVLink errors counted by the monitor"),
    ("temperature", "", "warning", "monitor", False, "Card temperature above its limit"),
    ("power", "", "warning", "monitor", False, "Power draw or power violation above its limit"),
    ("thermal_violation", "", "warning", "monitor", False, "The card throttled for thermal reasons"),
    ("node_down", "", "critical", "reboot", False, "The node stopped answering its monitor"),
    ("disk", "", "warning", "monitor", False, "A disk is filling up or failing"),
    ("memory", "", "warning", "monitor", False, "Host memory nearly exhausted or failing"),
    ("node_unhealthy", "", "warning", "monitor", False, "A monitor reports the node unhealthy"),
]


def ensure(apps, schema_editor):
    policy = apps.get_model("cmdb", "HealthPolicy")
    existing = set(policy.objects.filter(vendor__isnull=True).values_list("kind", "code"))
    policy.objects.bulk_create(
        [
            policy(vendor=None, kind=k, code=c, severity=s, action=a, marks_failed=f, description=d)
            for k, c, s, a, f, d in ROWS
            if (k, c) not in existing
        ]
    )


def remove(apps, schema_editor):
    policy = apps.get_model("cmdb", "HealthPolicy")
    for k, c, s, a, f, _d in ROWS:
        policy.objects.filter(vendor__isnull=True, kind=k, code=c, severity=s, action=a, marks_failed=f).delete()


class Migration(migrations.Migration):
    dependencies = [("inventory_agents", "0005_xid_63_94_fail_cards")]

    operations = [migrations.RunPython(ensure, remove)]
