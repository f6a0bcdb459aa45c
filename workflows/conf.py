"""Settings of the workflows app, with their defaults.

Production overrides any of them in `settings.GPUOPS_WORKFLOWS = {...}`; nothing else reads settings directly.
Adapters are dotted paths so a deployment picks Slurm over SSH, kubectl, email or a webhook without code.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    # The adapters (SCHEDULERS, NOTIFIERS and their options) are the integrations' settings: integrations/conf.py.
    # Absolute base URL for links in notifications.
    "BASE_URL": "http://127.0.0.1:8000",
    # Repair: wait this long for the agent to report the new card healthy, polling at this interval.
    "VERIFY_TIMEOUT_MINUTES": 60,
    "VERIFY_POLL_SECONDS": 60,
    # Cabling repair: how long verification waits for the switches to see the planned peers, and how often it
    # polls and re-validates meanwhile.
    "CABLING_VERIFY_TIMEOUT_MINUTES": 60,
    "CABLING_VERIFY_POLL_SECONDS": 120,
    # Repair: with no spare in stock, look again this often (the operator can also retry at once).
    "SPARE_RECHECK_MINUTES": 30,
    # Drain: poll the scheduler until the node runs no jobs; give up (step fails, operator decides) after.
    "DRAIN_POLL_SECONDS": 30,
    "DRAIN_TIMEOUT_MINUTES": 240,
    # Job impact: the jobs that ran on a failed node in this many hours before the failure are listed on its repair
    # or incident ticket (and its postmortem), at most JOB_IMPACT_MAX of them.
    "JOB_IMPACT_HOURS": 24,
    "JOB_IMPACT_MAX": 200,
    # Spares forecast (workflows.services.spares_forecast): days from ordering spares to having them in stock,
    # and the safety margin in standard deviations of the failures expected meanwhile (1.65: 95% of lead times).
    "SPARES_LEAD_DAYS": 30,
    "SPARES_SERVICE_Z": 1.65,
    # Repair tickets opened by the health hook start draining at once.
    "REPAIR_AUTO_START": True,
    "REPAIR_ASSIGNEE_GROUP": "dc-technicians",
    "DECOMMISSION_APPROVALS_REQUIRED": 2,
    "DECOMMISSION_ASSIGNEE_GROUP": "dc-technicians",
    # Members of this group see and act on every ticket (plus the global permissions it is given).
    "OPS_LEADS_GROUP": "ops-leads",
    # Step retries on TransientError: exponential backoff from this base, capped.
    "STEP_RETRY_BACKOFF_SECONDS": 5,
    "STEP_RETRY_BACKOFF_MAX_SECONDS": 300,
    # A run "running" longer than its time limit plus this grace is presumed lost with its worker.
    "REAPER_GRACE_SECONDS": 120,
    # A queued run whose message was sent this long ago and still not claimed is sent again (lost in the broker;
    # a duplicate is harmless, the claim is a compare-and-set). Unsent messages go out at the next sweep.
    "STEP_REPUBLISH_AFTER_SECONDS": 60,
    # How often the ticket page polls for step progress: while steps run, and while one waits on an event.
    "UI_POLL_SECONDS": 3,
    "UI_POLL_WAITING_SECONDS": 15,
    # Templates other apps contribute to the ticket page (each gets `ticket`; each decides whether it applies).
    # Missing templates are skipped, so an app can be removed without breaking ticket pages.
    "TICKET_PANELS": ["rollouts/_ticket_panel.html"],
}

# Periodic tasks of the workflows app. Added to Celery's beat schedule in WorkflowsConfig.ready() unless the
# project's CELERY_BEAT_SCHEDULE already has an entry of the same name (settings win).
BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "workflows.reap_stuck_runs": {"task": "workflows.reap_stuck_runs", "schedule": 60.0},
    "workflows.wake_due_runs": {"task": "workflows.wake_due_runs", "schedule": 30.0},
    "workflows.republish_unsent": {"task": "workflows.republish_unsent", "schedule": 30.0},
}


def workflows_setting(name: str) -> Any:
    """One setting: `settings.GPUOPS_WORKFLOWS[name]` if given, else the default above."""
    if name not in DEFAULTS:
        raise KeyError(f"Unknown workflows setting {name!r}.")
    return getattr(settings, "GPUOPS_WORKFLOWS", {}).get(name, DEFAULTS[name])
