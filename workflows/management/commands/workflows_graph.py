"""Render every registered workflow as Mermaid into docs/workflows/<type>.md (CI runs it with --check)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from workflows.graph import workflow_markdown
from workflows.registry import workflows


class Command(BaseCommand):
    help = "Write docs/workflows/<type>.md (a Mermaid state diagram and tables) for every workflow."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--out", default=str(Path(settings.BASE_DIR) / "docs" / "workflows"))
        parser.add_argument("--check", action="store_true", help="Fail if a file is missing or out of date.")

    def handle(self, *args, out: str, check: bool, **options) -> None:
        folder = Path(out)
        stale = []
        for wf in workflows():
            path = folder / f"{wf.type}.md"
            text = workflow_markdown(wf)
            if check:
                if not path.exists() or path.read_text() != text:
                    stale.append(str(path))
                continue
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            self.stdout.write(f"wrote {path}")
        if stale:
            raise CommandError("out of date (run manage.py workflows_graph): " + ", ".join(stale))
