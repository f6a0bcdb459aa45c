"""Which adapter each integration uses, with their defaults: the integrations' own settings.

A deployment sets them in `settings.GPUOPS_INTEGRATIONS = {...}`. Each key is also read from where it lived
before the adapters had settings of their own (`GPUOPS_WORKFLOWS` for schedulers and notifiers,
`GPUOPS_ROLLOUTS` for the executor and the OS installer), so existing settings files keep working; a key in
GPUOPS_INTEGRATIONS wins. Adapters never read the workflows' settings modules (integrations do not import
workflows).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    # Scheduler adapter per cluster kind ("slurm", "kubernetes"); "default" for nodes outside a cluster.
    # The demo default logs what it would do; tests install the fake (integrations.schedulers.registry.override).
    "SCHEDULERS": {"default": "integrations.schedulers.noop.NoopScheduler"},
    # Keyword arguments per adapter path, e.g.
    # {"integrations.schedulers.slurm.SlurmScheduler": {"ssh_host": "slurmctld01", "ssh_user": "gpuops"}}.
    "SCHEDULER_OPTIONS": {},
    # Notifiers every ticket notification goes through (each in its own retried task).
    "NOTIFIERS": ["integrations.notifiers.email.EmailNotifier"],
    "NOTIFIER_OPTIONS": {},
    # Chat channels by name: {"dc-oncall": {"adapter": "integrations.notifiers.feishu.FeishuNotifier",
    #                                      "options": {"url": "https://open.feishu.cn/...", "secret": "..."}}}.
    "CHAT_CHANNELS": {},
    # The chat channels of each team (the ticket's assignee group, by name); "*" for every ticket:
    # {"dc-technicians": ["dc-oncall"], "*": ["ops-firehose"]}. Each channel gets its own outbox row and task.
    "TEAM_CHAT_CHANNELS": {},
    # Ticket events also go to the outbound webhook subscriptions of object type "ticket" (integrations.models).
    "TICKET_WEBHOOKS": True,
    # Runs driver install/rollback commands on nodes. The demo default only logs what it would run.
    "EXECUTOR": "integrations.executors.dry_run.DryRunExecutor",
    # Keyword arguments of the executor, e.g. for integrations.executors.ssh.SshExecutor:
    # {"username": "gpuops", "key_file": "/etc/gpuops/ssh/id_ed25519", "known_hosts": "/etc/gpuops/ssh/known_hosts"}.
    "EXECUTOR_OPTIONS": {},
    # Hands a node to the PXE/OS install system.
    "OS_INSTALLER": "integrations.os_install.fake.FakeOsInstaller",
    "OS_INSTALLER_OPTIONS": {},
}

# Where each key was set before GPUOPS_INTEGRATIONS existed (still honoured).
LEGACY_SETTINGS: dict[str, str] = {
    "SCHEDULERS": "GPUOPS_WORKFLOWS",
    "SCHEDULER_OPTIONS": "GPUOPS_WORKFLOWS",
    "NOTIFIERS": "GPUOPS_WORKFLOWS",
    "NOTIFIER_OPTIONS": "GPUOPS_WORKFLOWS",
    "EXECUTOR": "GPUOPS_ROLLOUTS",
    "EXECUTOR_OPTIONS": "GPUOPS_ROLLOUTS",
    "OS_INSTALLER": "GPUOPS_ROLLOUTS",
    "OS_INSTALLER_OPTIONS": "GPUOPS_ROLLOUTS",
}


def integrations_setting(name: str) -> Any:
    """One setting: `settings.GPUOPS_INTEGRATIONS[name]`, else its legacy location, else the default above."""
    if name not in DEFAULTS:
        raise KeyError(f"Unknown integrations setting {name!r}.")
    own = getattr(settings, "GPUOPS_INTEGRATIONS", {}) or {}
    if name in own:
        return own[name]
    legacy = (getattr(settings, LEGACY_SETTINGS[name], {}) or {}) if name in LEGACY_SETTINGS else {}
    return legacy.get(name, DEFAULTS[name])


__all__ = ["DEFAULTS", "integrations_setting"]
