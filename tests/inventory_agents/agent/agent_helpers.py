"""Helpers for the node agent tests: sample folders, from-dir sets, the report JSON Schema, CLI runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema

REPO = Path(__file__).resolve().parents[3]
DATA = Path(__file__).resolve().parent / "data"
SCHEMA_PATH = REPO / "inventory_agents" / "schema" / "agent-report-v1.json"
PY38 = Path("/root/.pyenv/versions/3.8.18/bin/python")


def load_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def assert_valid(validator: jsonschema.Draft202012Validator, report: dict) -> None:
    errors = sorted(validator.iter_errors(report), key=lambda e: str(list(e.path)))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])


def build_dir(target: Path, files: dict[str, Path | str], base: Path | None = None) -> Path:
    """A --from-dir folder: copy `base` (a sample folder) then each capture under its from-dir name."""
    target.mkdir(parents=True, exist_ok=True)
    if base is not None:
        shutil.copytree(base, target, dirs_exist_ok=True)
    for name, content in files.items():
        if isinstance(content, Path):
            shutil.copyfile(content, target / name)
        else:
            (target / name).write_text(content)
    return target


def run_agent(*args: str, python: str = sys.executable, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [python, "-m", "inventory_agents.agent", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
