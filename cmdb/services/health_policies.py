"""The default health policy rows: how a fresh install grades health signals, and what the demo uses too.

One list. The data migrations of inventory_agents hold frozen copies of it (0002, 0004, 0006, 0007; changed by
0005); a test checks that a migrated database holds exactly these rows. Changing a row here needs a migration like
0005.
"""

from __future__ import annotations

from typing import Any

from ..models import HealthPolicy

# (kind, code, severity, action, marks_failed, description). Vendor-independent rows: Xid codes only exist on
# NVIDIA, so they need no vendor row, and they can be created before any vendor exists (fresh database).
# Operators may override any of them with a vendor-specific row or edit them; ensure never overwrites.
DEFAULT_POLICIES: list[tuple[str, str, str, str, bool, str]] = [
    ("xid", "13", "warning", "monitor", False, "Graphics engine exception (usually the application)"),
    ("xid", "31", "warning", "monitor", False, "GPU memory page fault (usually the application)"),
    ("xid", "43", "warning", "monitor", False, "GPU stopped processing (application)"),
    ("xid", "45", "info", "monitor", False, "Preemptive cleanup after an application fault"),
    ("xid", "48", "critical", "rma", True, "Double-bit ECC error"),
    ("xid", "61", "warning", "reset", False, "Internal micro-controller breakpoint/warning"),
    ("xid", "62", "critical", "drain_repair", True, "Internal micro-controller halt"),
    ("xid", "63", "critical", "drain_repair", True, "ECC page retirement or row remapping recorded: reset and check"),
    ("xid", "64", "critical", "rma", True, "ECC page retirement or row remapping failure"),
    ("xid", "74", "critical", "drain_repair", True, "NVLink error"),
    ("xid", "79", "critical", "drain_repair", True, "GPU has fallen off the bus"),
    ("xid", "92", "critical", "drain_repair", True, "High single-bit ECC error rate"),
    ("xid", "94", "critical", "drain_repair", True, "Contained ECC error: reset and check before new jobs"),
    ("xid", "95", "critical", "drain_repair", True, "Uncontained ECC error"),
    ("xid", "", "warning", "monitor", False, "Other Xid"),
    ("ecc_uncorrectable", "", "critical", "drain_repair", True, "Uncorrectable (double-bit) ECC errors"),
    (
        "ecc_uncorrectable_aggregate",
        "",
        "warning",
        "monitor",
        False,
        "Uncorrectable ECC errors over the card's life (none since boot)",
    ),
    ("remap_failure", "", "critical", "rma", True, "Row remapping failed"),
    ("remap_pending", "", "warning", "reset", False, "Row remap pending: reset the GPU"),
    ("retired_pages_pending", "", "warning", "reset", False, "Page retirement pending: reset the GPU"),
    ("retired_pages_limit", "", "critical", "rma", True, "Retired page limit reached"),
    ("reset_required", "", "warning", "reset", False, "The vendor tool asks for a GPU reset"),
    ("vendor_health", "critical", "critical", "drain_repair", True, "Vendor tool reports critical"),
    ("vendor_health", "alarm", "critical", "drain_repair", True, "Vendor tool reports alarm"),
    ("vendor_health", "warning", "warning", "monitor", False, "Vendor tool reports warning"),
    ("vendor_health", "", "warning", "monitor", False, "Vendor tool reports another non-OK state"),
    ("agent_health", "failed", "critical", "drain_repair", True, "The agent grades the card failed"),
    ("agent_health", "degraded", "warning", "monitor", False, "The agent grades the card degraded"),
    ("missing", "", "critical", "drain_repair", True, "Card missing from its node's report"),
    ("replaced", "", "warning", "monitor", False, "Card replaced by another card in its slot: record where it went"),
    ("moved", "", "info", "monitor", False, "Card seen in another node than recorded (moved)"),
    ("conflict", "", "warning", "monitor", False, "Report contradicts the CMDB; an operator decides"),
    ("collector", "", "warning", "monitor", False, "An agent collector failed or a section came back empty"),
    # Conditions monitors (Prometheus / Alertmanager, dcgm-exporter, node-exporter) report; added by 0006.
    ("nvlink", "", "warning", "monitor", False, "NVLink errors counted by the monitor"),
    ("temperature", "", "warning", "monitor", False, "Card temperature above its limit"),
    ("power", "", "warning", "monitor", False, "Power draw or power violation above its limit"),
    ("thermal_violation", "", "warning", "monitor", False, "The card throttled for thermal reasons"),
    ("node_down", "", "critical", "reboot", False, "The node stopped answering its monitor"),
    ("disk", "", "warning", "monitor", False, "A disk is filling up or failing"),
    ("memory", "", "warning", "monitor", False, "Host memory nearly exhausted or failing"),
    ("node_unhealthy", "", "warning", "monitor", False, "A monitor reports the node unhealthy"),
    # Added by 0007, made degraded (not failed) by 0008: the card works, its links do not; the repair names the pair.
    (
        "topology",
        "departure",
        "critical",
        "drain_repair",
        False,
        "Topology departs from the server model (fewer NVLinks, a GPU-NIC path moved to SYS): degraded, drain "
        "and repair",
    ),
]


def health_policies_ensure(policy_model: Any = HealthPolicy) -> int:
    """Create the default policy rows that do not exist yet (never changes existing rows). Returns rows created.

    Takes the model as an argument so the data migration can pass its historical model.
    """
    existing = set(policy_model.objects.filter(vendor__isnull=True).values_list("kind", "code"))
    rows = [
        policy_model(
            vendor=None,
            kind=kind,
            code=code,
            severity=severity,
            action=action,
            marks_failed=fails,
            description=description,
        )
        for kind, code, severity, action, fails, description in DEFAULT_POLICIES
        if (kind, code) not in existing
    ]
    policy_model.objects.bulk_create(rows)
    return len(rows)


__all__ = ["DEFAULT_POLICIES", "health_policies_ensure"]
