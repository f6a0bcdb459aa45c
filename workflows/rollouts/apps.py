from django.apps import AppConfig


class RolloutsConfig(AppConfig):
    name = "workflows.rollouts"
    label = "rollouts"
    verbose_name = "Driver rollouts and provisioning"
    default_auto_field = "django.db.models.BigAutoField"
