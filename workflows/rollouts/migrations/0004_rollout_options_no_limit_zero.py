"""Rewrite "no limit" stored as null in Rollout.options to 0.

Rollouts saved before options.py stored "no limit per rack/cluster" as 0 hold null there; `RolloutOptions.from_dict`
now reads null as "the default" (1 per rack), which would throttle (and may pause on the rack limit) rollouts that
were approved without one. Only keys present with null are rewritten: a missing key meant the default then too.
"""

from django.db import migrations

# The limits whose null meant "no limit beyond the capacity floor" (planning.PlanOptions); 0 says so today.
NO_LIMIT_KEYS = ("max_per_rack", "max_per_cluster")
BATCH = 500


def options_no_limit_zero(apps, schema_editor) -> int:
    """Set each null limit of every rollout's options to 0; returns how many rollouts changed."""
    Rollout = apps.get_model("rollouts", "Rollout")
    changed = []
    for rollout in Rollout.objects.only("pk", "options").iterator(chunk_size=BATCH):
        options = rollout.options
        if not isinstance(options, dict):
            continue
        nulls = [k for k in NO_LIMIT_KEYS if k in options and options[k] is None]
        if nulls:
            rollout.options = {**options, **dict.fromkeys(nulls, 0)}
            changed.append(rollout)
    Rollout.objects.bulk_update(changed, ["options"], batch_size=BATCH)
    return len(changed)


class Migration(migrations.Migration):
    dependencies = [
        ("rollouts", "0003_rollout_preparing"),
    ]

    operations = [
        # Backwards: nothing to undo; the code of 0003 reads 0 as "no limit" as well.
        migrations.RunPython(options_no_limit_zero, migrations.RunPython.noop),
    ]
