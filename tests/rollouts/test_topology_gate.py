"""The topology gate before a node returns to service: the rollout's verify and provisioning's burn-in compare the
node's reported topology with its server model's expected one. A departure fails the gate with the pair named; a
model without an expected topology passes with a note saying it was not checked."""

from __future__ import annotations

import pytest
from django.utils import timezone

from cmdb import models as m
from cmdb.services.topology import (
    node_topology_check,
    node_topology_record,
    server_model_expected_topology_set,
    topology_canonical,
)
from integrations.executors import ExecTarget
from tests.factories.cmdb import NodeFactory, ServerModelFactory
from tests.factories.topology import hgx_topology
from tests.rollouts.test_provisioning import _fresh, _take, _uncabled, _wake, prov  # noqa: F401  (fixture)
from workflows.engine import ticket_create
from workflows.models import StepLogLine, StepRun
from workflows.rollouts.models import NodeRun, NodeRunState, ProvisioningRun, RolloutStatus
from workflows.rollouts.options import RolloutOptions
from workflows.rollouts.selectors import NodeSelector
from workflows.rollouts.services import rollout_create, rollout_prepare, rollout_start

MOVED = {("GPU2", "GPU5"): "NV12", ("GPU1", "NIC1"): "SYS"}
DEPARTS = "topology departs from the server model: GPU1-NIC1 is SYS, expected PIX; GPU2-GPU5 is NV12, expected NV18"


def _set(node: m.Node, *, expected: dict | None, reported: dict | None) -> None:
    if expected is not None:
        server_model_expected_topology_set(node.server_model, expected)
    if reported is not None:
        node_topology_record(node, topology_canonical(reported), None)


# (name, expected, reported, problems, note)
CASES = [
    ("matches", hgx_topology(), hgx_topology(), [], ""),
    ("more NVLinks than expected", hgx_topology(nvlink="NV12"), hgx_topology(nvlink="NV18"), [], ""),
    ("departs", hgx_topology(), hgx_topology(moved=MOVED), [DEPARTS], ""),
    (
        "pair not printed",
        hgx_topology(gpus=2, nics=1),
        hgx_topology(gpus=2, nics=1, moved={("GPU0", "GPU1"): None}),
        ["topology departs from the server model: GPU0-GPU1 is no link reported, expected NV18"],
        "",
    ),
    ("expected, none reported", hgx_topology(gpus=2, nics=1), None, ["no topology reported"], ""),
    ("no expected topology", None, hgx_topology(moved=MOVED), [], "has no expected topology"),
    ("no expected, none reported", None, None, [], "has no expected topology"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "expected", "reported", "problems", "note"), CASES, ids=[c[0] for c in CASES])
def test_node_topology_check(name, expected, reported, problems, note):
    node = NodeFactory(server_model=ServerModelFactory(name=f"model {name}"))
    _set(node, expected=expected, reported=reported)
    node = m.Node.objects.select_related("server_model", "topology").get(pk=node.pk)
    check = node_topology_check(node)
    assert len(check.problems) == len(problems) and all(
        got.startswith(want) for got, want in zip(check.problems, problems, strict=True)
    )
    assert check.passed is (not problems)
    assert (note in check.note) if note else check.note == ""


@pytest.mark.django_db
def test_more_than_eight_departing_pairs_are_named_up_to_eight_and_counted():
    node = NodeFactory(server_model=ServerModelFactory(name="capped"))
    _set(node, expected=hgx_topology(), reported=hgx_topology(nvlink="NV6"))
    (problem,) = node_topology_check(m.Node.objects.get(pk=node.pk)).problems
    assert problem.count("expected NV18") == 8 and problem.endswith("and 20 more pairs")


# --- the rollout's verify -------------------------------------------------------------------------------------------

GATE = {
    "matches": (hgx_topology(), hgx_topology(), NodeRunState.SUCCEEDED, ""),
    "departs": (hgx_topology(), hgx_topology(moved=MOVED), NodeRunState.FAILED, DEPARTS),
    "no expected topology": (None, hgx_topology(moved=MOVED), NodeRunState.SUCCEEDED, "has no expected topology"),
}


@pytest.mark.parametrize("case", GATE)
def test_rollout_verify_gates_on_the_topology(demo_fleet, fakes, case):
    expected, reported, state, text = GATE[case]
    node = m.Node.objects.filter(cluster__name="sh1-train", status="active", health="ok").order_by("hostname")[0]
    _set(node, expected=expected, reported=reported)
    options = {"canary_size": 1, "wave_size": 4, "failure_budget": 0, "verify_timeout_minutes": 0}
    package = m.DriverPackage.objects.get(component="nvidia-driver", version="570.133.20")
    rollout = rollout_create(
        package=package, selector=NodeSelector(hostnames=(node.hostname,)), options=RolloutOptions.from_dict(options)
    )
    rollout = rollout_prepare(rollout=rollout)
    fakes.run(rollout_start, rollout=rollout)
    run = NodeRun.objects.get(rollout=rollout, node=node)
    assert run.state == state
    if state == NodeRunState.FAILED:
        # The pair is named on the run (the rollout ticket's panel) and the rollout stops.
        assert text in run.error and run.error.startswith("verify: ")
        rollout.refresh_from_db()
        assert rollout.status == RolloutStatus.PAUSED
    else:
        verify = run.steps.get(name="verify")
        assert verify.message.startswith("agent confirms nvidia-driver 570.133.20") and text in verify.message


# --- provisioning's burn-in -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", GATE)
def test_provisioning_burn_in_gates_on_the_topology(prov, fakes, case):  # noqa: F811
    expected, reported, state, text = GATE[case]
    lead, _, _ = prov
    node = _uncabled("sh1-h100-0024")
    _set(node, expected=expected, reported=reported)
    ticket = fakes.run(
        ticket_create,
        type_="provisioning",
        title="Bring up sh1-h100-0024",
        requester=lead,
        inputs={"node": node.hostname, "cluster": "sh1-train"},
    )
    _take(fakes, ticket, "start", lead)
    ticket = _take(fakes, ticket, "confirm_cabling", lead, note="cabled")
    fakes.agent(ExecTarget(host=node.hostname, name=node.hostname), "report")
    _wake(fakes)

    def burn_in() -> tuple[StepRun, str]:
        run = StepRun.objects.filter(ticket=ticket, step="burn_in").order_by("-sequence").first()
        return run, " ".join(StepLogLine.objects.filter(run=run).values_list("message", flat=True))

    if state == NodeRunState.SUCCEEDED:
        assert _fresh(ticket).state == "done" and m.Node.objects.get(pk=node.pk).status == "active"
        assert "Step 'Burn-in' succeeded: healthy in every report" in burn_in()[1] and text in burn_in()[1]
        return
    # A departure keeps the node in burn-in, the pair named, until the burn-in times out: then the step fails
    # with the pair on the ticket, and the node is not returned to service.
    run, lines = burn_in()
    assert _fresh(ticket).state == "burn_in" and run.status == "waiting" and f"burn-in: {text}" in lines
    run.state["deadline:burn_in"] = timezone.now().isoformat()  # the burn-in's time is up
    run.save(update_fields=["state"])
    _wake(fakes)
    run, lines = burn_in()
    assert _fresh(ticket).state == "burn_in" and run.status == "failed"
    assert text in run.error and text in lines
    assert ProvisioningRun.objects.get(ticket=ticket).error.startswith(f"burn-in did not pass: {text}")
    assert m.Node.objects.get(pk=node.pk).status == "burn_in"
