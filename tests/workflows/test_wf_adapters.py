"""Scheduler and notifier adapters against fakes of what they drive: a recorded command runner, Django's locmem
mail backend, an httpx MockTransport. Also: a real local subprocess through LocalRunner."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import httpx
import pytest
from django.core import mail

from integrations.exceptions import PermanentError, TransientError
from integrations.notifiers import Notification
from integrations.notifiers.email import EmailNotifier
from integrations.notifiers.webhook import WebhookNotifier
from integrations.schedulers import SchedulerNode
from integrations.schedulers.base import Scheduler
from integrations.schedulers.fake import FakeScheduler
from integrations.schedulers.kubernetes import KubernetesScheduler
from integrations.schedulers.noop import NoopScheduler
from integrations.schedulers.runners import CommandResult, LocalRunner, SshRunner
from integrations.schedulers.slurm import SlurmScheduler, slurm_state_parse

NODE = SchedulerNode(name="sh1-h100-0007", cluster="sh1-train", cluster_kind="slurm")

# `scontrol show node --oneliner` as Slurm 23.11 prints it (trimmed of the TRES noise).
SCONTROL_DRAINING = (
    "NodeName=sh1-h100-0007 Arch=x86_64 CoresPerSocket=56 CPUAlloc=112 CPUEfctv=224 CPUTot=224 CPULoad=97.10 "
    "AvailableFeatures=h100 ActiveFeatures=h100 Gres=gpu:h100:8 NodeAddr=sh1-h100-0007 NodeHostName=sh1-h100-0007 "
    "Version=23.11.4 OS=Linux 5.15.0-119-generic RealMemory=2000000 AllocMem=1000000 FreeMem=812345 Sockets=2 "
    "Boards=1 State=MIXED+DRAIN ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu "
    "CfgTRES=cpu=224,mem=2000000M,billing=224,gres/gpu=8 CapWatts=n/a CurrentWatts=0 AveWatts=0 "
    "Reason=REP-12: GPU 1654SH100000003 failed (XID 79) [gpuops@2026-11-29T10:00:00]"
)
SCONTROL_DRAINED = SCONTROL_DRAINING.replace("State=MIXED+DRAIN", "State=IDLE+DRAIN")


class RecordingRunner:
    """A CommandRunner that answers from a table and records every argv."""

    peer = "fake-host"

    def __init__(self, answers: dict[str, CommandResult | Exception] | None = None) -> None:
        self.answers = answers or {}
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
        self.calls.append(list(argv))
        for prefix, answer in self.answers.items():
            if " ".join(argv).startswith(prefix):
                if isinstance(answer, Exception):
                    raise answer
                return answer
        return CommandResult(tuple(argv), 0, "", "")


def result(returncode: int = 0, stdout: str = "", stderr: str = "") -> CommandResult:
    return CommandResult(("x",), returncode, stdout, stderr)


@pytest.mark.parametrize(
    "adapter",
    [
        FakeScheduler(),
        NoopScheduler(),
        SlurmScheduler(RecordingRunner()),
        KubernetesScheduler(kubeconfig="/nonexistent"),
    ],
)
def test_every_scheduler_satisfies_the_protocol(adapter):
    assert isinstance(adapter, Scheduler)


def test_slurm_state_parsing():
    draining = slurm_state_parse("n", SCONTROL_DRAINING)
    assert draining.state == "MIXED+DRAIN" and not draining.is_schedulable and not draining.is_drained
    assert draining.reason.startswith("REP-12: GPU 1654SH100000003 failed (XID 79)")
    drained = slurm_state_parse("n", SCONTROL_DRAINED)
    assert drained.is_drained and not drained.is_schedulable
    idle = slurm_state_parse("n", "NodeName=n State=IDLE Reason=")
    assert idle.is_schedulable and not idle.is_drained
    down = slurm_state_parse("n", "NodeName=n State=DOWN+DRAIN+NOT_RESPONDING Reason=hw")
    assert down.is_drained
    with pytest.raises(PermanentError):
        slurm_state_parse("n", "garbage")


def test_slurm_commands_and_errors():
    runner = RecordingRunner({"scontrol show node": result(stdout=SCONTROL_DRAINED)})
    slurm = SlurmScheduler(runner)
    slurm.drain(NODE, reason="REP-12: card\nfailed")
    slurm.resume(NODE)
    assert slurm.node_state(NODE).is_drained
    slurm.remove(NODE, reason="DEC-3: end of life")
    assert runner.calls == [
        ["scontrol", "update", "NodeName=sh1-h100-0007", "State=DRAIN", "Reason=REP-12: card failed"],
        ["scontrol", "update", "NodeName=sh1-h100-0007", "State=RESUME"],
        ["scontrol", "show", "node", "sh1-h100-0007", "--oneliner"],
        ["squeue", "-h", "-a", "-w", "sh1-h100-0007", "-o", "%i|%T|%u|%P|%S|%N|%j"],
        ["scontrol", "update", "NodeName=sh1-h100-0007", "State=DOWN", "Reason=DEC-3: end of life"],
    ]
    down = SlurmScheduler(
        RecordingRunner(
            {"scontrol": result(1, stderr=("slurm_update error: Unable to contact slurm controller (connect failure)"))}
        )
    )
    with pytest.raises(TransientError):
        down.drain(NODE, reason="x")
    unknown = SlurmScheduler(
        RecordingRunner({"scontrol": result(1, stderr=("slurm_update error: Invalid node name specified"))})
    )
    with pytest.raises(PermanentError):
        unknown.drain(NODE, reason="x")


def test_slurm_draining_node_names_the_jobs_still_on_it():
    runner = RecordingRunner(
        {
            "scontrol show node": result(stdout=SCONTROL_DRAINING),
            "squeue": result(stdout="901|RUNNING|alice|gpu|2026-11-29T09:00:00|sh1-h100-0007|llm\n"),
        }
    )
    state = SlurmScheduler(runner).node_state(NODE)
    assert not state.is_drained and state.jobs == ("901",) and state.running == 1


def test_slurm_resume_of_an_idle_node_is_done_already():
    runner = RecordingRunner(
        {
            "scontrol update": result(1, stderr="slurm_update error: Invalid node state specified"),
            "scontrol show node": result(stdout="NodeName=sh1-h100-0007 State=IDLE Reason="),
        }
    )
    SlurmScheduler(runner).resume(NODE)  # no error: it is schedulable


def test_local_runner_runs_real_processes():
    runner = LocalRunner()
    ok = runner.run([sys.executable, "-c", "print('drained')"])
    assert ok.ok and ok.stdout.strip() == "drained"
    assert runner.run([sys.executable, "-c", "import sys; sys.exit(3)"]).returncode == 3
    with pytest.raises(TransientError, match="timed out"):
        runner.run([sys.executable, "-c", "import time; time.sleep(5)"], timeout_s=0.2)
    with pytest.raises(PermanentError, match="not installed"):
        runner.run(["/nonexistent/scontrol"])


def test_ssh_runner_quotes_one_remote_command_line():
    argv = SshRunner("slurmctld01", user="gpuops", identity_file="/etc/gpuops/id").ssh_argv(
        ["scontrol", "update", "NodeName=n1", "Reason=REP-1: card failed"]
    )
    assert argv[:3] == ["ssh", "-o", "BatchMode=yes"]
    assert argv[-3:] == ["gpuops@slurmctld01", "--", "scontrol update NodeName=n1 'Reason=REP-1: card failed'"]
    assert "-i" in argv


NOTE = Notification(
    key="k1",
    event="opened",
    subject="REP-1 opened",
    body="card failed",
    url="http://x/tickets/1/",
    ticket_ref="REP-1",
    recipients=("tech@example.com",),
    data={"ticket_id": 1},
)


def test_notification_round_trips_through_json():
    assert Notification.from_dict(json.loads(json.dumps(NOTE.as_dict()))) == NOTE


def test_email_notifier(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    EmailNotifier().send(NOTE)
    EmailNotifier().send(Notification(key="k2", event="x", subject="nobody", body=""))  # no recipients: skipped
    assert len(mail.outbox) == 1
    assert mail.outbox[0].subject == "[gpuops] REP-1 opened" and "http://x/tickets/1/" in mail.outbox[0].body


def test_webhook_notifier_statuses():
    seen: list[httpx.Request] = []

    def handler(status: int):
        def respond(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return httpx.Response(status, json={})

        return respond

    def notifier(status: int) -> WebhookNotifier:
        return WebhookNotifier(
            url="https://hooks.example/ops", client=httpx.Client(transport=httpx.MockTransport(handler(status)))
        )

    notifier(204).send(NOTE)
    assert seen[0].headers["Idempotency-Key"] == "k1" and json.loads(seen[0].content)["ticket_ref"] == "REP-1"
    with pytest.raises(TransientError):
        notifier(503).send(NOTE)
    with pytest.raises(TransientError):
        notifier(429).send(NOTE)
    with pytest.raises(PermanentError):
        notifier(400).send(NOTE)

    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("slow", request=request)

    with pytest.raises(TransientError, match="timed out"):
        WebhookNotifier(
            url="https://hooks.example/ops", client=httpx.Client(transport=httpx.MockTransport(timeout))
        ).send(NOTE)


@pytest.mark.django_db
def test_notification_task_retries_transient_errors(wf, fleet, groups):
    from tests.workflows.helpers import open_by_hook

    wf.notifier.fail_next = 2
    open_by_hook(wf, fleet)
    assert wf.notifier.attempts == len(wf.notifier.sent) + 2
    assert wf.notifier.sent[0].event == "opened"
    assert wf.notifier.sent[0].recipients == ()  # a system ticket: requester none, the group has no members yet
