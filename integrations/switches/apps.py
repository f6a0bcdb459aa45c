from django.apps import AppConfig


class SwitchesConfig(AppConfig):
    name = "integrations.switches"
    label = "switches"
    verbose_name = "Switches and fabric discovery"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from inventory_agents.signals import report_applied

        from .receivers import on_report_applied

        report_applied.connect(on_report_applied, dispatch_uid="switches_observe_agent_report")
