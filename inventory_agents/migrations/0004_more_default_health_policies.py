"""Default policy rows added since 0002 (replaced cards, collector trouble); existing rows are left alone."""

from django.db import migrations


def ensure(apps, schema_editor):
    from inventory_agents.services.health import health_policies_ensure

    health_policies_ensure(apps.get_model("cmdb", "HealthPolicy"))


class Migration(migrations.Migration):
    dependencies = [("inventory_agents", "0003_agenttoken_revoked_at_no_index")]

    operations = [migrations.RunPython(ensure, migrations.RunPython.noop)]
