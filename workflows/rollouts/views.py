"""HTML views: a rollout's page (plan and live progress) and the progress fragment the ticket page polls.

Mounted at /rollouts/ (workflows/rollouts/urls.py). The ticket page includes templates/rollouts/_ticket_panel.html,
which polls `ticket-progress` every few seconds with htmx; the fragment answers HTTP 286 once the rollout stops
moving, which tells htmx to stop polling.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from .access import can_see
from .conf import rollouts_setting
from .models import ProvisioningRun, Rollout
from .progress import rollout_progress

STOP_POLLING = 286  # htmx: stop the `every Ns` trigger


def _rollout_or_404(request: HttpRequest, **lookup: object) -> Rollout:
    rollout = Rollout.objects.select_related("package", "ticket").filter(**lookup).first()
    if rollout is None or not can_see(request.user, rollout):
        raise Http404("No such rollout.")
    return rollout


def _progress_response(request: HttpRequest, rollout: Rollout) -> HttpResponse:
    progress = rollout_progress(rollout)
    response = render(
        request,
        "rollouts/_progress.html",
        {"rollout": rollout, "p": progress, "poll_seconds": rollouts_setting("UI_POLL_SECONDS")},
    )
    # An approved rollout is still "planned" until its first step runs on a worker, and a new one "preparing" until
    # a worker has written its plan: keep polling through both.
    starting = rollout.status == "planned" and rollout.ticket_id is not None and rollout.ticket.state == "running"
    if getattr(request, "htmx", False) and not progress["is_active"] and not starting and not progress["is_preparing"]:
        response.status_code = STOP_POLLING
    return response


@login_required
def rollout_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    rollout = _rollout_or_404(request, pk=pk)
    return render(
        request,
        "rollouts/detail.html",
        {"rollout": rollout, "p": rollout_progress(rollout), "poll_seconds": rollouts_setting("UI_POLL_SECONDS")},
    )


@login_required
def rollout_progress_view(request: HttpRequest, pk: int) -> HttpResponse:
    return _progress_response(request, _rollout_or_404(request, pk=pk))


def _reload_if_moved(request: HttpRequest, response: HttpResponse, state: str) -> HttpResponse:
    """The page polling this panel shows the ticket in `?state=`; once a step moved it on, htmx reloads the page."""
    shown = request.GET.get("state")
    if getattr(request, "htmx", False) and shown and shown != state:
        response["HX-Refresh"] = "true"
    return response


@login_required
def ticket_progress_view(request: HttpRequest, ticket_id: int) -> HttpResponse:
    """The panel of a rollout or provisioning ticket (whichever the ticket is)."""
    rollout = Rollout.objects.select_related("package", "ticket").filter(ticket_id=ticket_id).first()
    if rollout is not None:
        if not can_see(request.user, rollout):
            raise Http404("No such rollout.")
        return _reload_if_moved(request, _progress_response(request, rollout), rollout.ticket.state)
    run = ProvisioningRun.objects.select_related("ticket", "rack", "cluster").filter(ticket_id=ticket_id).first()
    if run is None or not can_see(request.user, run):
        raise Http404("Nothing to show for this ticket.")
    from .provisioning.progress import provisioning_progress

    progress = provisioning_progress(run)
    response = render(request, "rollouts/_provisioning.html", {"run": run, "p": progress})
    if getattr(request, "htmx", False) and not progress["is_moving"]:
        response.status_code = STOP_POLLING
    return _reload_if_moved(request, response, run.ticket.state)
