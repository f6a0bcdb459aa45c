"""The glue between outside events and the rest of gpuops: adapters and ingestion expose hook points, and these
modules, connected at start-up (WorkflowsConfig.ready), turn their events into tickets and tasks. It lives in
workflows because workflows may import every app, while cmdb, integrations and inventory_agents may not import
each other (docs/architecture.md, tests/test_architecture.py).

- procurement: request changes and deliveries -> procurement and provisioning tickets;
- cabling: the switches' cabling faults -> cabling repair tickets (the desk their pages and commands call);
- host_lldp: applied agent reports -> the switches' host LLDP observations.
"""

from __future__ import annotations

from django.apps import apps


def register() -> None:
    """Connect every glue whose app is installed."""
    if apps.is_installed("integrations.procurement"):
        from . import procurement

        procurement.register()
    if apps.is_installed("integrations.switches"):
        from . import cabling, host_lldp

        cabling.register()
        host_lldp.register()


__all__ = ["register"]
