"""The JSON step lines of a driver rollout's node steps (eager Celery, fakes)."""

from __future__ import annotations

from cmdb import models as m
from workflows.rollouts.options import RolloutOptions
from workflows.rollouts.selectors import NodeSelector
from workflows.rollouts.services import rollout_create, rollout_prepare, rollout_start


def test_each_node_step_attempt_is_one_json_line(demo_fleet, fakes, json_logs):
    package = m.DriverPackage.objects.get(component="nvidia-driver", version="570.133.20")
    options = {"canary_size": 1, "wave_size": 1, "max_per_rack": 1, "failure_budget": 0, "verify_timeout_minutes": 0}
    rollout = rollout_create(
        package=package,
        selector=NodeSelector(hostnames=("sh1-h100-0002",)),
        options=RolloutOptions.from_dict(options),
    )
    rollout = rollout_prepare(rollout=rollout)
    fakes.run(rollout_start, rollout=rollout)

    steps = [line for line in json_logs() if line.get("event") == "step_run" and line.get("rollout_id") == rollout.pk]
    node = m.Node.objects.get(hostname="sh1-h100-0002")
    assert [line["step"] for line in steps if line["outcome"] == "succeeded"] == [
        "drain",
        "install",
        "reboot",
        "verify",
        "resume",
    ]
    assert all(line["node_id"] == node.pk and line["logger"] == "gpuops.step" for line in steps)
    assert all(line["correlation_id"] == rollout.correlation_id and line["duration_ms"] >= 0 for line in steps)
