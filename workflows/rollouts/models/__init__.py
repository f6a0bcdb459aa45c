"""Models of the rollouts app: node locks, driver rollouts, provisioning runs."""

from .locks import NodeLock
from .provisioning import ProvisioningRun, ProvisioningStatus
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
    "ProvisioningRun",
    "ProvisioningStatus",
    "Rollout",
    "RolloutStatus",
    "RolloutWave",
    "WaveKind",
    "WaveStatus",
]
