"""Settings of the procurement integration, with their defaults.

A deployment overrides any of them in `settings.GPUOPS_PROCUREMENT = {...}`; nothing else in the package reads
Django settings for procurement. Secrets are never literal values in code: a secret setting is a *reference*
resolved at call time by `secret_resolve` ("env:NAME" reads an environment variable, "file:/path" a file;
anything else is taken literally, which is only meant for tests and the local demo).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

DEFAULTS: dict[str, Any] = {
    # The ProcurementClient implementation (dotted path). The fake keeps POs in memory (tests, demo without a
    # procurement system); production sets "integrations.procurement.adapter.HttpProcurementClient".
    "CLIENT": "integrations.procurement.fakes.FakeProcurementClient",
    # REST client options (HttpProcurementClient).
    "BASE_URL": "http://127.0.0.1:8099",
    "API_TOKEN": "env:GPUOPS_PROCUREMENT_API_TOKEN",
    "CONNECT_TIMEOUT_S": 3.0,
    "TIMEOUT_S": 10.0,
    # Attempts per call (the first one included) before a TransientError reaches the Celery task, which
    # retries again later with its own backoff. Every attempt carries the same Idempotency-Key.
    "ATTEMPTS": 3,
    "BACKOFF_S": 0.5,
    "BACKOFF_MAX_S": 8.0,
    # Inbound webhooks: source name -> its shared secrets. Two entries while a secret is being rotated (the new
    # one first); a request signed with either is accepted. A source without secrets accepts nothing.
    "WEBHOOK_SOURCES": {
        "procurement": {
            "secrets": ["env:GPUOPS_PROCUREMENT_WEBHOOK_SECRET", "env:GPUOPS_PROCUREMENT_WEBHOOK_SECRET_PREVIOUS"],
        },
    },
    # A signed request older (or further in the future) than this is refused: the replay window.
    "REPLAY_WINDOW_S": 300,
    "MAX_BODY_BYTES": 1024 * 1024,
    # Currency of request amounts and of ApprovalRule bounds.
    "CURRENCY": "USD",
    # Warranty of received hardware when the event does not say (months from the purchase date).
    "WARRANTY_MONTHS": 36,
    # An event waiting for a PO that never arrives is failed (visible in the admin) after this long.
    "DEFERRED_EVENT_TIMEOUT_H": 24,
    # A delivery whose dispatch notice has not come after this long is a discrepancy (no_dispatch_notice).
    "DISPATCH_NOTICE_GRACE_H": 24,
    # Ticket types: opened for each delivered server when that workflow is registered.
    "PROVISIONING_TICKET_TYPE": "provisioning",
    # Group procurement tickets are assigned to (workflows/definitions/procurement.py).
    "TICKET_ASSIGNEE_GROUP": "procurement",
    # procurement_simulate defaults.
    "SIMULATE_URL": "http://127.0.0.1:8000",
    "SIMULATE_SOURCE": "procurement",
}

# Periodic tasks of this app. Add them to settings.CELERY_BEAT_SCHEDULE (see docs/procurement.md).
BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "procurement-sweep": {"task": "integrations.procurement.sweep", "schedule": 900.0},
}


def procurement_setting(name: str) -> Any:
    """One setting: `settings.GPUOPS_PROCUREMENT[name]` if given, else the default above."""
    if name not in DEFAULTS:
        raise KeyError(f"Unknown procurement setting {name!r}.")
    return getattr(settings, "GPUOPS_PROCUREMENT", {}).get(name, DEFAULTS[name])


def secret_resolve(reference: str) -> str:
    """The secret a reference names: "env:NAME", "file:/path" (first line), or a literal. "" when unset.

    Resolved at call time (not import time) so a rotated secret is picked up without a restart when it
    comes from a file, and tests can change the environment.
    """
    if not reference:
        return ""
    if reference.startswith("env:"):
        return os.environ.get(reference[4:], "").strip()
    if reference.startswith("file:"):
        path = Path(reference[5:])
        try:
            return path.read_text().splitlines()[0].strip() if path.exists() else ""
        except (OSError, IndexError):
            return ""
    return reference


def webhook_secrets(sources: dict[str, Any], source: str) -> list[str]:
    """The usable secrets of `source` in a WEBHOOK_SOURCES mapping (empty references dropped)."""
    entry = sources.get(source)
    if entry is None:
        return []
    if not isinstance(entry, dict) or not isinstance(entry.get("secrets", []), list | tuple):
        raise ImproperlyConfigured(f"WEBHOOK_SOURCES[{source!r}] must be {{'secrets': [...]}}.")
    return [s for s in (secret_resolve(ref) for ref in entry.get("secrets", [])) if s]
