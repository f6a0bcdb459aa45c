"""Nothing writes a tracked model (cmdb.models.base.TrackedModel) with queryset.update() / bulk_update() except
cmdb.services.changelog's helpers, which record the change: a bulk statement elsewhere would change the CMDB
without a change record.

The scan reads the source (AST): for each `.update(` / `.bulk_update(` call it resolves the model from the
receiver chain - `Node.objects.filter(...).update(...)`, a local name assigned such a chain in the same
function (`qs = Node.objects.filter(...)`; `qs.update(...)`), or a related manager (`card.placements.update`)
by its related_name - and fails when the model is tracked. Receivers it cannot resolve (`self.model`, function
arguments) are not judged here; the writers' own tests cover those.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.apps import apps

from cmdb.models.base import TrackedModel

REPO = Path(__file__).resolve().parent.parent
SCANNED = ("cmdb", "workflows", "integrations", "inventory_agents", "gpuops")
HELPER = REPO / "cmdb" / "services" / "changelog.py"
WRITE_METHODS = {"update", "bulk_update"}
# (file, function): statements whose change is recorded another way in the same transaction. Ingestion's pass
# queues the node's before/after in run.updated and writes every record of a report in one INSERT (its query
# count stays constant); freeing slots is an intermediate value the pass's bulk_save then records.
ALLOWED = {
    ("inventory_agents/services/reconcile.py", "_write_node"),
    ("inventory_agents/services/reconcile.py", "_write_cards"),
}


def _models() -> tuple[dict[str, type], dict[str, set[type]]]:
    by_name: dict[str, type] = {}
    by_accessor: dict[str, set[type]] = {}
    for model in apps.get_models():
        by_name[model.__name__] = model
        for rel in model._meta.related_objects:  # reverse accessors: node.accelerators, card.placements
            accessor = rel.get_accessor_name()
            if accessor:
                by_accessor.setdefault(accessor, set()).add(rel.related_model)
    return by_name, by_accessor


def _root_model(
    node: ast.AST,
    by_name: dict[str, type],
    by_accessor: dict[str, set[type]],
    assigned: dict[str, ast.AST],
    depth: int = 0,
) -> set[type]:
    """The models a receiver expression can be a queryset/manager of (empty when unknown)."""
    if depth > 20:
        return set()
    if isinstance(node, ast.Call):
        return _root_model(node.func, by_name, by_accessor, assigned, depth + 1)
    if isinstance(node, ast.Subscript):
        return _root_model(node.value, by_name, by_accessor, assigned, depth + 1)
    if isinstance(node, ast.Attribute):
        if node.attr in ("objects", "_default_manager", "_base_manager"):
            base = node.value
            if isinstance(base, ast.Name) and base.id in by_name:
                return {by_name[base.id]}
            if isinstance(base, ast.Attribute) and base.attr in by_name:  # m.Node.objects
                return {by_name[base.attr]}
            return set()
        inner = _root_model(node.value, by_name, by_accessor, assigned, depth + 1)
        if inner:
            return inner
        if node.attr in by_accessor:  # a related manager: card.placements
            return by_accessor[node.attr]
        return set()
    if isinstance(node, ast.Name) and node.id in assigned:
        return _root_model(assigned[node.id], by_name, by_accessor, {}, depth + 1)
    return set()


def _violations() -> list[str]:
    by_name, by_accessor = _models()
    found: list[str] = []
    for package in SCANNED:
        for path in sorted((REPO / package).rglob("*.py")):
            if "migrations" in path.parts or path == HELPER:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]:
                if (str(path.relative_to(REPO)), func.name) in ALLOWED:
                    continue
                assigned: dict[str, ast.AST] = {}
                for stmt in ast.walk(func):
                    if (
                        isinstance(stmt, ast.Assign)
                        and len(stmt.targets) == 1
                        and isinstance(stmt.targets[0], ast.Name)
                    ):
                        assigned[stmt.targets[0].id] = stmt.value
                for call in ast.walk(func):
                    if not (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Attribute)
                        and call.func.attr in WRITE_METHODS
                    ):
                        continue
                    models = _root_model(call.func.value, by_name, by_accessor, assigned)
                    tracked = sorted(m.__name__ for m in models if issubclass(m, TrackedModel))
                    if tracked:
                        rel = path.relative_to(REPO)
                        found.append(f"{rel}:{call.lineno} {call.func.attr}() on {', '.join(tracked)}")
    return sorted(set(found))


@pytest.mark.django_db(databases=[])
def test_no_bulk_statement_on_a_tracked_model_outside_the_changelog_helpers():
    violations = _violations()
    assert not violations, (
        "Write tracked models through cmdb.services.changelog.tracked_update / tracked_bulk_update (they record "
        "the change):\n" + "\n".join(violations)
    )


def test_the_scan_finds_what_it_must():
    """The scanner itself: a chain, a local queryset and a related manager are resolved."""
    source = (
        "def f(card):\n"
        "    Node.objects.filter(pk=1).update(status='x')\n"
        "    qs = Accelerator.objects.filter(pk=2)\n"
        "    qs.update(health='ok')\n"
        "    card.placements.update(ended_at=None)\n"
    )
    by_name, by_accessor = _models()
    func = ast.parse(source).body[0]
    assigned = {"qs": func.body[1].value}
    calls = [s.value for s in func.body if isinstance(s, ast.Expr)]
    resolved = [{m.__name__ for m in _root_model(c.func.value, by_name, by_accessor, assigned)} for c in calls]
    assert resolved[0] == {"Node"} and resolved[1] == {"Accelerator"}
    assert "AcceleratorPlacement" in resolved[2]  # allowed: placements are not tracked


PLACEMENT_WRITER = REPO / "cmdb" / "services" / "accelerators.py"
PLACEMENT_WRITES = {"create", "bulk_create", "update", "bulk_update", "delete", "save", "get_or_create"}


def test_placement_history_is_written_only_by_the_accelerator_service():
    """AcceleratorPlacement rows (a card's story) are written by cmdb.services.accelerators only (accelerator_place,
    placements_write); API batches, imports, ingestion and the warehouse call it."""
    by_name, by_accessor = _models()
    placement = by_name["AcceleratorPlacement"]
    found = []
    for package in SCANNED:
        for path in sorted((REPO / package).rglob("*.py")):
            if "migrations" in path.parts or path == PLACEMENT_WRITER:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]:
                assigned = {
                    s.targets[0].id: s.value
                    for s in ast.walk(func)
                    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                }
                for call in ast.walk(func):
                    if not (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Attribute)
                        and call.func.attr in PLACEMENT_WRITES
                    ):
                        continue
                    receiver = call.func.value
                    built = (
                        isinstance(receiver, ast.Call)
                        and isinstance(receiver.func, ast.Name)
                        and receiver.func.id == "placement_build"
                    )
                    if built or _root_model(receiver, by_name, by_accessor, assigned) == {placement}:
                        found.append(f"{path.relative_to(REPO)}:{call.lineno} {call.func.attr}()")
    assert not found, "Write placements through cmdb.services.accelerators.placements_write:\n" + "\n".join(found)
