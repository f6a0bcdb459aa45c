"""workflows_graph renders each workflow as Mermaid; the committed docs match the declarations."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from workflows.graph import workflow_markdown, workflow_mermaid
from workflows.registry import workflow

DOCS = Path(settings.BASE_DIR) / "docs" / "workflows"


@pytest.mark.parametrize("type_", ["repair", "decommission", "incident", "cabling"])
def test_committed_diagram_is_current(type_):
    assert (DOCS / f"{type_}.md").read_text() == workflow_markdown(workflow(type_)), (
        "run: python manage.py workflows_graph"
    )


def test_mermaid_marks_people_system_and_steps():
    text = workflow_mermaid(workflow("repair"))
    assert text.startswith("stateDiagram-v2")
    assert "    awaiting_swap --> updating_cmdb : confirm_swap [repair_swap]" in text
    assert "    draining --> diagnosing : drained (auto)" in text
    assert 'state "Draining node ⚙ drain" as draining' in text
    assert "    [*] --> new" in text and "    closed --> [*]" in text


def test_command_writes_and_checks(tmp_path):
    call_command("workflows_graph", "--out", str(tmp_path), verbosity=0)
    assert (tmp_path / "repair.md").exists() and (tmp_path / "decommission.md").exists()
    call_command("workflows_graph", "--out", str(tmp_path), "--check")
    (tmp_path / "incident.md").write_text("stale")
    with pytest.raises(CommandError, match=r"incident\.md"):
        call_command("workflows_graph", "--out", str(tmp_path), "--check")
