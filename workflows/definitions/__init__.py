"""One module per ticket type. Each defines WORKFLOW; WorkflowsConfig.ready() registers them all."""

from . import cabling, decommission, incident, repair

ALL = (repair.WORKFLOW, decommission.WORKFLOW, incident.WORKFLOW, cabling.WORKFLOW)

__all__ = ["ALL", "cabling", "decommission", "incident", "repair"]
