"""One module per ticket type. Each defines WORKFLOW; WorkflowsConfig.ready() registers them all."""

from . import decommission, incident, repair

ALL = (repair.WORKFLOW, decommission.WORKFLOW, incident.WORKFLOW)

__all__ = ["ALL", "decommission", "incident", "repair"]
