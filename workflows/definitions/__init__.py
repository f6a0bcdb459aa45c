"""Every ticket type of gpuops, one module each; this list is the one place they are registered.

WorkflowsConfig.ready() registers TICKET_TYPES (validating each graph); no other app registers a ticket type.
The modules import their apps' services inside functions, so listing them here loads no other app's code early.
"""

from . import cabling, decommission, incident, procurement, provisioning, repair, rollout

TICKET_TYPES = (
    repair.WORKFLOW,
    decommission.WORKFLOW,
    incident.WORKFLOW,
    cabling.WORKFLOW,
    rollout.WORKFLOW,  # driver rollouts (workflows.rollouts)
    provisioning.WORKFLOW,  # node provisioning (workflows.rollouts.provisioning)
    procurement.WORKFLOW,  # procurement requests (integrations.procurement)
)
# Ticket types that work on another app's records: registered only when that app is installed.
REQUIRES_APP: dict[str, str] = {
    rollout.WORKFLOW.type: "workflows.rollouts",
    provisioning.WORKFLOW.type: "workflows.rollouts",
    procurement.WORKFLOW.type: "integrations.procurement",
}

__all__ = [
    "REQUIRES_APP",
    "TICKET_TYPES",
    "cabling",
    "decommission",
    "incident",
    "procurement",
    "provisioning",
    "repair",
    "rollout",
]
