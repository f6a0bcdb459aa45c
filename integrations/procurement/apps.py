from django.apps import AppConfig


class ProcurementConfig(AppConfig):
    name = "integrations.procurement"
    label = "procurement"
    verbose_name = "Procurement"
    default_auto_field = "django.db.models.BigAutoField"
