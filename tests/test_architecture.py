"""The direction of dependencies between the apps (docs/architecture.md), kept by import-linter.

The contracts are `[tool.importlinter]` in pyproject.toml; `lint-imports` checks the whole import graph, imports
inside functions included, so a lazy `from workflows... import` in an adapter breaks the build like a top-level one.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (dev deps)")


def _lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # No cache: a stale graph must never hide a new import.
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(cwd), "PATH": str(LINT_IMPORTS.parent)},
    )


def test_the_import_contracts_hold():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_lazy_import_of_workflows_in_an_adapter_breaks_the_contract(tmp_path):
    """Our integrations contract, run over a small tree whose only offence sits inside a function."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["source_modules"] == ["integrations"]]
    for package in ("cmdb", "integrations", "inventory_agents", "workflows", "gpuops", "console"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "workflows" / "engine.py").write_text("def ticket_create(): ...\n")
    (tmp_path / "integrations" / "adapter.py").write_text(
        textwrap.dedent("""\
        import cmdb


        def on_event():
            from workflows.engine import ticket_create

            return ticket_create()
        """)
    )
    forbidden = ", ".join(f'"{m}"' for m in contract["forbidden_modules"])
    (tmp_path / ".importlinter.toml").write_text(
        textwrap.dedent(f"""\
        [tool.importlinter]
        root_packages = ["cmdb", "integrations", "inventory_agents", "workflows", "gpuops", "console"]

        [[tool.importlinter.contracts]]
        name = "{contract["name"]}"
        type = "forbidden"
        source_modules = ["integrations"]
        forbidden_modules = [{forbidden}]
        """)
    )
    result = _lint(tmp_path, "--config", ".importlinter.toml")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "integrations.adapter -> workflows.engine (l.5)" in result.stdout, result.stdout
