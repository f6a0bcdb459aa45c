"""Migration 0004: rollouts saved with "no limit" as null keep no limit after the upgrade."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from tests.factories.cmdb import DriverPackageFactory
from workflows.rollouts.models import Rollout
from workflows.rollouts.options import RolloutOptions

migration = importlib.import_module("workflows.rollouts.migrations.0004_rollout_options_no_limit_zero")

# RolloutOptions.as_dict before "no limit" was stored as 0: no limit per rack or cluster is null.
OLD_NO_LIMITS = {
    "canary_size": 1,
    "wave_size": 4,
    "wave_percent": None,
    "max_per_cluster": None,
    "max_per_rack": None,
    "failure_budget": 1,
    "failure_budget_percent": None,
    "canary_failure_budget": 0,
    "eligible_statuses": ["active"],
    "pause_after_canary": False,
    "drain_timeout_minutes": None,
    "verify_timeout_minutes": None,
}


def _rollout(options: dict) -> Rollout:
    package = DriverPackageFactory()
    return Rollout.objects.create(
        package=package,
        component=package.component,
        target_version=package.version,
        options=options,
        correlation_id="c",
    )


@pytest.mark.django_db
def test_null_limits_become_no_limit():
    old = _rollout(OLD_NO_LIMITS)
    assert RolloutOptions.from_dict(old.options).plan.max_per_rack == 1  # the bug: read as the default
    # A limit the operator set, and a rollout without the keys (the default then too), are left alone.
    limited = _rollout({**OLD_NO_LIMITS, "max_per_rack": 2, "max_per_cluster": 3})
    bare = _rollout({"canary_size": 1})

    assert migration.options_no_limit_zero(apps, None) == 1

    old.refresh_from_db()
    assert old.options == {**OLD_NO_LIMITS, "max_per_rack": 0, "max_per_cluster": 0}
    plan = RolloutOptions.from_dict(old.options).plan
    assert (plan.max_per_rack, plan.max_per_cluster, plan.wave_size) == (None, None, 4)
    assert Rollout.objects.get(pk=limited.pk).options == {**OLD_NO_LIMITS, "max_per_rack": 2, "max_per_cluster": 3}
    assert Rollout.objects.get(pk=bare.pk).options == {"canary_size": 1}
    # Running it again changes nothing.
    assert migration.options_no_limit_zero(apps, None) == 0
