"""Settings of the rollouts app (driver rollouts, node locks, provisioning), with their defaults.

Production overrides any of them in `settings.GPUOPS_ROLLOUTS = {...}`; nothing else in the app reads settings.
Adapters are dotted paths, so a deployment picks the SSH executor or the PXE webhook without code changes.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    # The executor and the OS installer (EXECUTOR, OS_INSTALLER and their options) are the integrations' settings:
    # integrations/conf.py.
    # Pushes switch port configuration during provisioning (integrations.ports.SwitchConfigurator).
    # The in-memory fake is the demo default; production: "integrations.switches.config_push.NetmikoConfigurator".
    "SWITCH_CONFIGURATOR": "integrations.switches.fakes.FakeSwitchConfigurator",
    "SWITCH_CONFIGURATOR_OPTIONS": {},
    # True: provisioning only shows each port's diff (in the step log) and changes nothing, so a rollback has
    # nothing to restore. False by default so a configured real configurator pushes; the demo (script/server)
    # turns it on through $GPUOPS_SWITCH_CONFIG_DRY_RUN (gpuops/settings.py).
    "SWITCH_CONFIG_DRY_RUN": False,
    # MTU pushed on a node's leaf ports, by fabric kind; a kind not listed keeps its ports' MTU. InfiniBand is
    # never listed: its MTU is negotiated by the subnet manager, not set on the switch port.
    "SWITCH_PORT_MTU": {"roce": 9000},
    # Per fabric (by name), what its ports get beyond that: {"vlan": 120, "mtu": 9216} for RoCE / Ethernet (the
    # access VLAN; an MTU overriding SWITCH_PORT_MTU), {"pkey": "0x8001"} for InfiniBand (the partition; a
    # configurator without partition support refuses it, which fails the step visibly). The CMDB has no such
    # fields on Fabric or SwitchPort. A key that does not apply to the fabric's kind fails the step.
    "SWITCH_PORT_FABRICS": {},
    # Per node step timing (a rollout's own options override the timeouts).
    "DRAIN_POLL_SECONDS": 30,
    "DRAIN_TIMEOUT_MINUTES": 240,
    "VERIFY_POLL_SECONDS": 30,
    "VERIFY_TIMEOUT_MINUTES": 30,
    "COMMAND_TIMEOUT_SECONDS": 1800,
    # Transient adapter errors (TransientError) are retried this many times with capped exponential backoff.
    "STEP_MAX_ATTEMPTS": 5,
    "STEP_RETRY_BACKOFF_SECONDS": 5,
    "STEP_RETRY_BACKOFF_MAX_SECONDS": 300,
    # A step "running" longer than this is presumed lost with its worker and is requeued by the beat task.
    "STEP_STUCK_AFTER_SECONDS": 2400,
    # ETA before any node finished: the expected duration of one node (drain + install + reboot + verify).
    "NODE_ESTIMATE_MINUTES": 25,
    # Node statuses a rollout may touch; others are refused at planning with their status as the reason.
    "ELIGIBLE_STATUSES": ["active"],
    # Provisioning: burn-in window (the agent must report all expected cards healthy for this long) and polling.
    "BURN_IN_WINDOW_MINUTES": 60,
    "BURN_IN_POLL_SECONDS": 60,
    "BURN_IN_TIMEOUT_MINUTES": 240,
    "OS_INSTALL_TIMEOUT_MINUTES": 90,
    "OS_INSTALL_POLL_SECONDS": 60,
    # The image provisioning asks for when the ticket names none: {vendor slug: image}, "default" for the rest.
    "OS_IMAGES": {
        "default": "ubuntu-22.04-gpu",
        "ascend": "openeuler-22.03-sp3-ascend",
        "hygon": "openeuler-22.03-sp3-dtk",
    },
    # Environment variable with the shared secret that signs OS install callbacks (empty: callbacks refused).
    "OS_INSTALL_CALLBACK_SECRET_ENV": "GPUOPS_OS_INSTALL_CALLBACK_SECRET",
    # Each accelerator vendor's driver component (the one provisioning installs as the baseline).
    "DRIVER_COMPONENTS": {"nvidia": "nvidia-driver", "ascend": "ascend-driver", "hygon": "hygon-driver"},
    # The baseline driver each accelerator vendor gets at provisioning: {vendor slug: [[component, version], ...]}.
    # Empty: the version most of the target cluster runs, else the newest package supporting the node's cards.
    "BASELINE_DRIVERS": {},
    # Approvals a driver rollout ticket needs (the requester never counts).
    "APPROVALS_REQUIRED": 1,
    # How often the progress panel polls.
    "UI_POLL_SECONDS": 3,
}

# Periodic tasks. RolloutsConfig.ready() adds them to Celery's beat schedule unless the project's
# CELERY_BEAT_SCHEDULE already has an entry of the same name (settings win).
BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "workflows.rollouts.wake_due": {"task": "workflows.rollouts.wake_due", "schedule": 15.0},
}


def rollouts_setting(name: str) -> Any:
    """One setting: `settings.GPUOPS_ROLLOUTS[name]` if given, else the default above."""
    if name not in DEFAULTS:
        raise KeyError(f"Unknown rollouts setting {name!r}.")
    return getattr(settings, "GPUOPS_ROLLOUTS", {}).get(name, DEFAULTS[name])
