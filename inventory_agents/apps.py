from django.apps import AppConfig


class InventoryAgentsConfig(AppConfig):
    name = "inventory_agents"
    verbose_name = "Inventory agents"
    default_auto_field = "django.db.models.BigAutoField"
