"""Default health policy rows ingestion grades signals with (vendor-independent; never overwrites a row).

The rows are a frozen copy (a migration must not import app code that changes later). The live list is
inventory_agents.services.health.DEFAULT_POLICIES; tests/inventory_agents/server/test_default_health_policies.py
checks that a migrated database holds exactly it, so a change there needs a migration like 0005.
"""

from django.db import migrations

# (kind, code, severity, action, marks_failed, description), vendor-independent rows.
ROWS = [
    ("xid", "13", "warning", "monitor", False, "Graphics engine exception (usually the application)"),
    ("xid", "31", "warning", "monitor", False, "GPU memory page fault (usually the application)"),
    ("xid", "43", "warning", "monitor", False, "GPU stopped processing (application)"),
    ("xid", "45", "info", "monitor", False, "Preemptive cleanup after an application fault"),
    ("xid", "48", "critical", "rma", True, "Double-bit ECC error"),
    ("xid", "61", "warning", "reset", False, "Internal micro-controller breakpoint/warning"),
    ("xid", "62", "critical", "drain_repair", True, "Internal micro-controller halt"),
    ("xid", "63", "warning", "reset", False, "ECC page retirement or row remapping recorded"),
    ("xid", "64", "critical", "rma", True, "ECC page retirement or row remapping failure"),
    ("xid", "74", "critical", "drain_repair", True, "NVLink error"),
    ("xid", "79", "critical", "drain_repair", True, "GPU has fallen off the bus"),
    ("xid", "92", "critical", "drain_repair", True, "High single-bit ECC error rate"),
    ("xid", "94", "warning", "reset", False, "Contained ECC error"),
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
    ("moved", "", "info", "monitor", False, "Card seen in another node than recorded (moved)"),
    ("conflict", "", "warning", "monitor", False, "Report contradicts the CMDB; an operator decides"),
]


def ensure(apps, schema_editor):
    """Create the rows above that do not exist yet (never changes a row an operator may have edited)."""
    policy = apps.get_model("cmdb", "HealthPolicy")
    existing = set(policy.objects.filter(vendor__isnull=True).values_list("kind", "code"))
    policy.objects.bulk_create(
        [
            policy(
                vendor=None,
                kind=kind,
                code=code,
                severity=severity,
                action=action,
                marks_failed=fails,
                description=description,
            )
            for kind, code, severity, action, fails, description in ROWS
            if (kind, code) not in existing
        ]
    )


class Migration(migrations.Migration):
    dependencies = [
        ("inventory_agents", "0001_initial"),
        ("cmdb", "0001_initial"),
    ]

    operations = [migrations.RunPython(ensure, migrations.RunPython.noop)]
