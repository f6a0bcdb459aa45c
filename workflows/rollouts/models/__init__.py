"""Models of the rollouts app: node locks, driver rollouts, provisioning runs."""

from .locks import NodeLock
from .provisioning import ProvisioningLogLine, ProvisioningRun, ProvisioningStatus, ProvisioningStep
from .rollouts import (
    FINAL_STATUSES,
    IN_FLIGHT_NODE_STATES,
    LOCKING_STATUSES,
    TERMINAL_NODE_STATES,
    NodeLogLine,
    NodeRun,
    NodeRunAction,
    NodeRunState,
    NodeStep,
    NodeStepStatus,
    Rollout,
    RolloutStatus,
    RolloutWave,
    WaveKind,
    WaveStatus,
)

__all__ = [
    "FINAL_STATUSES",
    "IN_FLIGHT_NODE_STATES",
    "LOCKING_STATUSES",
    "TERMINAL_NODE_STATES",
    "NodeLock",
    "NodeLogLine",
    "NodeRun",
    "NodeRunAction",
    "NodeRunState",
    "NodeStep",
    "NodeStepStatus",
    "ProvisioningLogLine",
    "ProvisioningRun",
    "ProvisioningStatus",
    "ProvisioningStep",
    "Rollout",
    "RolloutStatus",
    "RolloutWave",
    "WaveKind",
    "WaveStatus",
]
