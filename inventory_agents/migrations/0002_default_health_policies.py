"""Default health policy rows ingestion grades signals with (vendor-independent; never overwrites a row)."""

from django.db import migrations


def ensure(apps, schema_editor):
    from inventory_agents.services.health import health_policies_ensure

    health_policies_ensure(apps.get_model("cmdb", "HealthPolicy"))


class Migration(migrations.Migration):
    dependencies = [
        ("inventory_agents", "0001_initial"),
        ("cmdb", "0001_initial"),
    ]

    operations = [migrations.RunPython(ensure, migrations.RunPython.noop)]
