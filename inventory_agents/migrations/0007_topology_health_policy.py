"""The default policy row for topology departures (a node whose topology departs from its server model's).

A frozen copy of the row in cmdb.services.health_policies.DEFAULT_POLICIES; an existing row is left alone.
"""

from django.db import migrations

ROW = (
    "topology",
    "departure",
    "critical",
    "drain_repair",
    True,
    "Topology departs from the server model (fewer NVLinks, a GPU-NIC path moved to SYS): drain and repair",
)


def ensure(apps, schema_editor):
    policy = apps.get_model("cmdb", "HealthPolicy")
    kind, code, severity, action, fails, description = ROW
    if not policy.objects.filter(vendor__isnull=True, kind=kind, code=code).exists():
        policy.objects.create(
            vendor=None,
            kind=kind,
            code=code,
            severity=severity,
            action=action,
            marks_failed=fails,
            description=description,
        )


def remove(apps, schema_editor):
    apps.get_model("cmdb", "HealthPolicy").objects.filter(vendor__isnull=True, kind=ROW[0], code=ROW[1]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("inventory_agents", "0006_monitoring_health_policies"),
        ("cmdb", "0006_node_topology"),
    ]

    operations = [migrations.RunPython(ensure, remove)]
