"""The vocabulary a workflow module (workflows/definitions/<type>.py) is written in.

A workflow is data: a TextChoices of states, a table of frozen `Transition`s (sources, target, permission,
guards, inputs, the automated step it starts), an optional `ApprovalRule`, and the automated steps
(`@step`-decorated functions returning an outcome). `workflows.registry.register` validates the graph at
start-up; `workflows.engine` executes it; `manage.py workflows_graph` draws it. Nothing here touches the
database.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from django.db import models

if TYPE_CHECKING:
    from .models import Ticket
    from .steps import StepContext, StepOutcome

FieldKind = Literal["text", "textarea", "choice", "int", "bool", "node", "accelerator"]

# A guard reads the ticket and the cleaned inputs and returns what is wrong (empty: the transition may run).
# Guards never write; they may read the CMDB (e.g. "is this serial already known?").
Guard = Callable[["Ticket", Mapping[str, Any]], list[str]]


@dataclass(frozen=True)
class Field:
    """An input a person supplies when creating a ticket or taking a transition.

    `node` and `accelerator` fields take a hostname or a serial and are resolved to CMDB objects by the
    engine (which also checks the user may see them). Values land in `ticket.data[name]` unless `store` is
    False (then they only appear in the transition's log and timeline entry).
    """

    name: str
    label: str
    kind: FieldKind = "text"
    required: bool = True
    choices: tuple[tuple[str, str], ...] = ()
    help_text: str = ""
    max_length: int = 300
    store: bool = True

    def clean(self, raw: Any) -> tuple[Any, str]:
        """Normalise one raw value (from a form or JSON). Returns (value, error message or '')."""
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            if self.required and self.kind != "bool":
                return None, f"{self.label} is required."
            return (False if self.kind == "bool" else None), ""
        if self.kind == "bool":
            if isinstance(raw, bool):
                return raw, ""
            return str(raw).strip().lower() in {"1", "true", "yes", "on"}, ""
        if self.kind == "int":
            try:
                return int(raw), ""
            except (TypeError, ValueError):
                return None, f"{self.label} must be a whole number."
        value = str(raw).strip()
        if len(value) > (self.max_length if self.kind != "textarea" else 20000):
            return None, f"{self.label} is too long."
        if self.kind == "choice" and value not in {c for c, _ in self.choices}:
            allowed = ", ".join(c for c, _ in self.choices)
            return None, f"{self.label}: {value!r} is not one of {allowed}."
        return value, ""


@dataclass(frozen=True)
class Transition:
    """An edge of the workflow graph.

    `permission` is the codename (without app label) a user needs, globally or on the ticket:
    `workflows.<permission>`; None marks a *system* transition that only the engine takes (a step's outcome,
    an approval quorum). `step` names the automated step started once the transition committed.
    """

    name: str
    label: str
    sources: frozenset[str]
    target: str
    permission: str | None
    guards: tuple[Guard, ...] = ()
    fields: tuple[Field, ...] = ()
    step: str | None = None
    allow_requester: bool = False
    allowed_when_paused: bool = False
    # Constant data stored on the ticket when taken, e.g. {"verdict": "replace"}.
    sets: Mapping[str, Any] = field(default_factory=dict)
    style: Literal["primary", "secondary", "danger"] = "primary"
    description: str = ""

    @property
    def is_system(self) -> bool:
        return self.permission is None


@dataclass(frozen=True)
class ApprovalRule:
    """N distinct approvers with `permission` must approve while the ticket is in `state`; the requester
    never counts. One rejection takes `reject_transition`; the quorum takes `approve_transition`."""

    state: str
    required: int | Callable[[], int]
    permission: str
    approve_transition: str
    reject_transition: str

    def required_count(self) -> int:
        return self.required() if callable(self.required) else self.required


@dataclass(frozen=True)
class PlannedChange:
    """One line of the diff an approver sees: `obj`.`field` goes from `before` to `after`."""

    obj: str
    field: str
    before: str
    after: str
    url: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"obj": self.obj, "field": self.field, "before": self.before, "after": self.after, "url": self.url}


StepFunction = Callable[["StepContext"], "StepOutcome"]


@dataclass(frozen=True)
class StepSpec:
    """An automated step: a function of a StepContext returning Done / WaitForEvent / RetryLater / Failed.

    It runs in a Celery task under the ticket's change context. Its side effects go through
    `ctx.effect(...)` (database) or `ctx.external(...)` (adapters) so a retried or resumed run never repeats
    one. `time_limit_s` bounds one attempt (the reaper presumes a longer run lost); `max_attempts` bounds the
    retries of TransientError.
    """

    name: str
    label: str
    fn: StepFunction
    time_limit_s: int = 300
    max_attempts: int = 5
    description: str = ""


def step(
    name: str, *, label: str, time_limit_s: int = 300, max_attempts: int = 5
) -> Callable[[StepFunction], StepSpec]:
    """Declare an automated step: `@step("drain", label="Drain the node")` over `def drain(ctx): ...`."""

    def wrap(fn: StepFunction) -> StepSpec:
        return StepSpec(
            name=name,
            label=label,
            fn=fn,
            time_limit_s=time_limit_s,
            max_attempts=max_attempts,
            description=(fn.__doc__ or "").strip(),
        )

    return wrap


def _default_sla() -> dict[str, dt.timedelta]:
    return {
        "critical": dt.timedelta(hours=4),
        "high": dt.timedelta(hours=24),
        "normal": dt.timedelta(days=3),
        "low": dt.timedelta(days=10),
    }


@dataclass(frozen=True)
class Workflow:
    """Everything about one ticket type. See workflows/definitions/repair.py for a full example."""

    type: str
    label: str
    prefix: str
    states: type[models.TextChoices]
    initial: str
    terminal: frozenset[str]
    transitions: tuple[Transition, ...]
    steps: tuple[StepSpec, ...] = ()
    approval: ApprovalRule | None = None
    is_change: bool = False
    sla: Mapping[str, dt.timedelta] = field(default_factory=_default_sla)
    create_fields: tuple[Field, ...] = ()
    # States in which the ticket waits on the outside world (shown amber) and in which plans may be edited.
    waiting_states: frozenset[str] = frozenset()
    editable_states: frozenset[str] = frozenset()
    # Group name (or a callable returning it) a new ticket is assigned to when nobody is named.
    default_group: str | Callable[[], str] = ""
    # A transition the engine takes right after creating a ticket through the health hook or API/UI.
    start_transition: str | None = None
    # At most one open ticket per key computed from the create inputs (e.g. one repair per card).
    dedup: Callable[[Mapping[str, Any]], str] | None = None
    # Remember what the workflow needs from the create inputs (e.g. the failed card's serial and slot).
    on_create: Callable[[Ticket, Mapping[str, Any]], None] | None = None
    # The diff an approver sees.
    plan_preview: Callable[[Ticket], Sequence[PlannedChange]] | None = None
    description: str = ""
    # How long a drain step waits for the node's jobs to end before it fails and an operator decides; None:
    # the DRAIN_TIMEOUT_MINUTES setting. A failed card's jobs are dying anyway; a decommission can wait a day.
    drain_timeout: dt.timedelta | None = None
    # Change governance (workflows.services.governance). The transitions that start changing the fleet: the
    # engine takes them only inside a maintenance window of every site and cluster the change touches (and
    # outside freezes), unless the ticket holds an emergency approval; system transitions included (an
    # approval quorum starts a rollout).
    window_transitions: frozenset[str] = frozenset()
    # The (site ids, cluster ids) a change touches; None: the ticket's own site/cluster and its linked objects'.
    change_scope: Callable[[Ticket], tuple[set[int], set[int]]] | None = None
    # The change and rollback plans a new ticket gets when it is opened without them (what the automation will
    # do and how it is undone are known for provisioning and cabling); None: the requester writes them.
    default_plans: Callable[[Ticket], tuple[str, str]] | None = None

    def transition(self, name: str) -> Transition:
        for t in self.transitions:
            if t.name == name:
                return t
        raise KeyError(f"Workflow {self.type!r} has no transition {name!r}.")

    def transitions_from(self, state: str) -> list[Transition]:
        return [t for t in self.transitions if state in t.sources]

    def step_spec(self, name: str) -> StepSpec:
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(f"Workflow {self.type!r} has no step {name!r}.")

    def state_label(self, state: str) -> str:
        try:
            return str(self.states(state).label)
        except ValueError:
            return state

    def default_group_name(self) -> str:
        return self.default_group() if callable(self.default_group) else self.default_group

    def permissions(self) -> list[tuple[str, str]]:
        """(codename, name) of every permission this workflow checks (created after migrate)."""
        perms = [(t.permission, f"{self.label}: {t.label}") for t in self.transitions if t.permission]
        if self.approval:
            perms.append((self.approval.permission, f"{self.label}: approve"))
        seen: dict[str, str] = {}
        for codename, name in perms:
            seen.setdefault(codename, name)
        return sorted(seen.items())


__all__ = [
    "ApprovalRule",
    "Field",
    "Guard",
    "PlannedChange",
    "StepSpec",
    "Transition",
    "Workflow",
    "step",
]
