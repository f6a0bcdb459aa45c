from django.apps import AppConfig


class SwitchesConfig(AppConfig):
    """Switches, fabric discovery and cabling validation. Agent reports reach it through the workflows app's glue
    (workflows/glue/host_lldp.py): integrations do not import ingestion."""

    name = "integrations.switches"
    label = "switches"
    verbose_name = "Switches and fabric discovery"
    default_auto_field = "django.db.models.BigAutoField"
