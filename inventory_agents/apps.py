from django.apps import AppConfig


class InventoryAgentsConfig(AppConfig):
    name = "inventory_agents"
    verbose_name = "Inventory agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from cmdb import permissions

        from .models import AgentState, AgentToken, Report

        # Reports and tokens are seen by whoever sees their node (site / cluster / tenant grants).
        node_paths = {"site": "node__site_id", "cluster": "node__cluster_id", "tenant": "node__tenant_id"}
        for model in (Report, AgentToken, AgentState):
            permissions.register_scope(model, node_paths)
