from django.apps import AppConfig


class SwitchesConfig(AppConfig):
    name = "integrations.switches"
    label = "switches"
    verbose_name = "Switches and fabric discovery"
    default_auto_field = "django.db.models.BigAutoField"
