"""The groups the workflows expect, with their permissions (idempotent; run by `manage.py workflows_bootstrap`).

- ops-leads: see every ticket, take every transition (including force-resume), approve changes, operate
  automation, reassign; read the CMDB objects tickets link to.
- dc-technicians: a role, not a place: open tickets, take the hands-on transitions of repairs and
  decommissions, operate automation - wherever a scope grant (cmdb.permissions.grant_scope on a site or
  cluster) lets them. The group holds no global view or change of scoped CMDB models, so a site-A technician
  sees and moves nothing of site B.
- change-approvers: see every ticket and approve (or reject) change tickets.
"""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.db.models import Q

from ..conf import workflows_setting
from ..models import Ticket
from ..permissions import group_permissions_set, transition_permissions_ensure
from ..registry import workflows

TECHNICIAN_PERMISSIONS = [
    "add_ticket",
    "operate_ticket",
    "repair_start",
    "repair_diagnose",
    "repair_swap",
    "repair_verify",
    "repair_rma",
    "repair_cancel",
    "decommission_wipe",
    "decommission_unrack",
    "decommission_submit",
    "incident_work",
    "incident_cancel",
    "cabling_work",
    "cabling_cancel",
    "provisioning_start",
    "provisioning_cabling",
    "provisioning_rollback",
]
APPROVER_PERMISSIONS = ["view_ticket", "decommission_approve", "rollout_approve", "approve_emergency_change"]
CMDB_READ = ["view_node", "view_accelerator", "view_rack", "view_switch", "view_link", "view_site", "view_cluster"]


@transaction.atomic
def groups_bootstrap() -> dict[str, Group]:
    """Create (or top up) the three groups. Returns them by name."""
    transition_permissions_ensure()
    ct = ContentType.objects.get_for_model(Ticket)
    every = list(Permission.objects.filter(content_type=ct).values_list("codename", flat=True))
    leads, _ = Group.objects.get_or_create(name=workflows_setting("OPS_LEADS_GROUP"))
    techs, _ = Group.objects.get_or_create(name=workflows_setting("REPAIR_ASSIGNEE_GROUP"))
    approvers, _ = Group.objects.get_or_create(name="change-approvers")
    group_permissions_set(leads, every)
    group_permissions_set(techs, TECHNICIAN_PERMISSIONS)
    group_permissions_set(approvers, APPROVER_PERMISSIONS)
    cmdb_read = Permission.objects.filter(content_type__app_label="cmdb", codename__in=CMDB_READ)
    leads.permissions.add(*cmdb_read)
    # Groups give roles, scopes give where: drop any global grant on scoped models (an older bootstrap gave
    # view_node / view_accelerator, which showed every site to every technician).
    techs.permissions.remove(*_scoped_model_permissions())
    return {g.name: g for g in (leads, techs, approvers)}


def _scoped_model_permissions() -> list[Permission]:
    from cmdb.permissions import SCOPE_PATHS

    wanted = Q()
    for label in SCOPE_PATHS:
        app_label, model = label.split(".")
        wanted |= Q(content_type__app_label=app_label, content_type__model=model)
    # Transition rights (repair_swap, ...) stay: they are the role. Only row-wide view/change/delete go.
    rows = Q(codename__startswith="view_") | Q(codename__startswith="change_") | Q(codename__startswith="delete_")
    return list(Permission.objects.filter(wanted, rows))


def permission_codenames() -> list[str]:
    """Every workflows permission a ticket type checks (for docs and tests)."""
    return sorted({codename for wf in workflows() for codename, _ in wf.permissions()})
