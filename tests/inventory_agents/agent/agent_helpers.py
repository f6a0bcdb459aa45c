"""Helpers for the node agent tests: sample folders, from-dir sets, the report JSON Schema, CLI runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


def build_dir(
    target: Path, files: dict[str, Path | str], base: Path | None = None, exclude: tuple[str, ...] = ()
) -> Path:
    """A --from-dir folder: copy `base` (a sample folder, less `exclude`) then each capture under its name."""
    target.mkdir(parents=True, exist_ok=True)
    if base is not None:
        shutil.copytree(base, target, dirs_exist_ok=True, ignore=lambda _d, names: [n for n in names if n in exclude])
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


class FakeServer:
    """A real HTTP server on 127.0.0.1 that records POSTs and answers with scripted statuses."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        self.statuses: list[int] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.received.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
                status = outer.statuses.pop(0) if outer.statuses else 201
                payload = b'{"detail": "scripted"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def hostnames(self) -> list[str]:
        return [r["body"]["hostname"] for r in self.received]
