"""The default topology-departure row grades a departure degraded, not failed: the card still works, its links do
not. The action stays drain_repair, which opens a repair naming the pair for a degraded card too.

Only a row still holding 0007's values is changed: an operator's edit stands.
"""

from django.db import migrations

OLD = {"severity": "critical", "action": "drain_repair", "marks_failed": True}
OLD_DESCRIPTION = (
    "Topology departs from the server model (fewer NVLinks, a GPU-NIC path moved to SYS): drain and repair"
)
NEW_DESCRIPTION = (
    "Topology departs from the server model (fewer NVLinks, a GPU-NIC path moved to SYS): degraded, drain and repair"
)


def _rows(apps, marks_failed: bool, description: str):
    return apps.get_model("cmdb", "HealthPolicy").objects.filter(
        vendor__isnull=True,
        kind="topology",
        code="departure",
        severity=OLD["severity"],
        action=OLD["action"],
        marks_failed=marks_failed,
        description=description,
    )


def forward(apps, schema_editor):
    _rows(apps, True, OLD_DESCRIPTION).update(marks_failed=False, description=NEW_DESCRIPTION)


def backward(apps, schema_editor):
    _rows(apps, False, NEW_DESCRIPTION).update(marks_failed=True, description=OLD_DESCRIPTION)


class Migration(migrations.Migration):
    dependencies = [("inventory_agents", "0007_topology_health_policy")]

    operations = [migrations.RunPython(forward, backward)]
