"""Xid 63 (row remap / page retirement event) and 94 (contained ECC error) now fail the card and open a repair.

Only rows still holding the old defaults are changed: a policy an operator edited stays as they set it.
"""

from django.db import migrations

OLD = {"severity": "warning", "action": "reset", "marks_failed": False}


def forwards(apps, schema_editor):
    policy = apps.get_model("cmdb", "HealthPolicy")
    policy.objects.filter(vendor__isnull=True, kind="xid", code="63", **OLD).update(
        severity="critical",
        action="drain_repair",
        marks_failed=True,
        description="ECC page retirement or row remapping recorded: reset and check",
    )
    policy.objects.filter(vendor__isnull=True, kind="xid", code="94", **OLD).update(
        severity="critical",
        action="drain_repair",
        marks_failed=True,
        description="Contained ECC error: reset and check before new jobs",
    )


def backwards(apps, schema_editor):
    policy = apps.get_model("cmdb", "HealthPolicy")
    policy.objects.filter(
        vendor__isnull=True,
        kind="xid",
        code__in=["63", "94"],
        severity="critical",
        action="drain_repair",
        marks_failed=True,
    ).update(**OLD)


class Migration(migrations.Migration):
    dependencies = [("inventory_agents", "0004_more_default_health_policies")]

    operations = [migrations.RunPython(forwards, backwards)]
