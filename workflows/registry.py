"""The registry of workflows, filled in WorkflowsConfig.ready() and validated on registration.

Validation catches graph mistakes at start-up (and in the test suite) rather than on a ticket at 3 a.m.:
unknown states, duplicate transition names, steps that do not exist, system transitions without a way in,
states no path reaches, and terminal states with a way out.
"""

from __future__ import annotations

from collections import deque

from .declarations import Workflow

_workflows: dict[str, Workflow] = {}


class WorkflowDefinitionError(Exception):
    """A workflow declaration is inconsistent."""


def workflow_problems(wf: Workflow) -> list[str]:
    """Everything wrong with a declaration (empty when it is sound)."""
    states = set(wf.states.values)
    problems: list[str] = []
    if wf.initial not in states:
        problems.append(f"initial state {wf.initial!r} is not a state")
    problems += [f"terminal state {s!r} is not a state" for s in wf.terminal - states]
    names = [t.name for t in wf.transitions]
    problems += [f"transition {n!r} is declared twice" for n in sorted({n for n in names if names.count(n) > 1})]
    step_names = {s.name for s in wf.steps}
    if len(step_names) != len(wf.steps):
        problems.append("a step name is declared twice")
    for t in wf.transitions:
        problems += [f"{t.name}: source {s!r} is not a state" for s in sorted(t.sources - states)]
        if t.target not in states:
            problems.append(f"{t.name}: target {t.target!r} is not a state")
        if t.step and t.step not in step_names:
            problems.append(f"{t.name}: step {t.step!r} is not declared")
        if t.sources & wf.terminal:
            problems.append(f"{t.name}: leaves terminal state(s) {sorted(t.sources & wf.terminal)}")
    if wf.approval:
        rule = wf.approval
        for name in (rule.approve_transition, rule.reject_transition):
            if name not in names:
                problems.append(f"approval: transition {name!r} is not declared")
            elif not wf.transition(name).is_system:
                problems.append(f"approval: transition {name!r} must be a system transition")
            elif rule.state not in wf.transition(name).sources:
                problems.append(f"approval: transition {name!r} does not leave {rule.state!r}")
    if wf.start_transition and wf.start_transition not in names:
        problems.append(f"start transition {wf.start_transition!r} is not declared")
    for s in wf.waiting_states | wf.editable_states:
        if s not in states:
            problems.append(f"{s!r} (waiting/editable) is not a state")
    # Every state reachable from the initial one; every non-terminal state has a way out.
    seen, queue = {wf.initial}, deque([wf.initial])
    while queue:
        here = queue.popleft()
        for t in wf.transitions_from(here):
            if t.target not in seen:
                seen.add(t.target)
                queue.append(t.target)
    problems += [f"state {s!r} cannot be reached from {wf.initial!r}" for s in sorted(states - seen)]
    problems += [f"state {s!r} has no way out" for s in sorted(states - wf.terminal) if not wf.transitions_from(s)]
    return problems


def register(wf: Workflow) -> Workflow:
    """Add a workflow. Raises WorkflowDefinitionError listing every problem of an unsound declaration."""
    problems = workflow_problems(wf)
    if problems:
        raise WorkflowDefinitionError(f"workflow {wf.type!r}: " + "; ".join(problems))
    _workflows[wf.type] = wf
    return wf


def workflow(type_: str) -> Workflow:
    try:
        return _workflows[type_]
    except KeyError:
        raise KeyError(f"No workflow {type_!r}; registered: {', '.join(sorted(_workflows))}.") from None


def workflow_or_none(type_: str) -> Workflow | None:
    return _workflows.get(type_)


def workflows() -> list[Workflow]:
    """All registered workflows, by type name."""
    return [_workflows[k] for k in sorted(_workflows)]
