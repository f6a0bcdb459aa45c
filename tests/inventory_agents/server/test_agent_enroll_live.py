"""A new node from the dock, with nothing but the agent and the site's enrollment token: `enroll` registers it
and writes its agent token, `report` then fills in its cards - both against a real running server."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cmdb import models as m
from inventory_agents.services.tokens import enrollment_token_issue
from tests.factories.cmdb import AcceleratorModelFactory, ServerModelFactory, SiteFactory, VendorFactory

REPO = Path(__file__).resolve().parents[3]
AGENT_DATA = REPO / "tests" / "inventory_agents" / "agent" / "data"


def _agent(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [sys.executable, "-m", "inventory_agents.agent", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.django_db(transaction=True)
def test_enroll_then_report_against_a_live_server(live_server, tmp_path):
    hygon = VendorFactory(slug="hygon", name="Hygon")
    AcceleratorModelFactory(name="Hygon K100", vendor=hygon, aliases=["K100", "K100_AI", "BW200"])
    issued = enrollment_token_issue(
        name="gy1-dock", site=SiteFactory(code="gy1"), server_model=ServerModelFactory(), max_uses=1
    )
    captures = tmp_path / "captures"
    for part in ("node-common", "hygon-k100"):
        shutil.copytree(AGENT_DATA / part, captures, dirs_exist_ok=True)
    (captures / "kernel-log.txt").unlink()
    (tmp_path / "enrollment-token").write_text(issued.token + "\n")
    token_file = tmp_path / "etc" / "agent-token"
    common = ["--server", live_server.url, "--from-dir", str(captures), "--state-dir", str(tmp_path / "state")]

    enrolled = _agent(
        "enroll",
        *common,
        "--enrollment-token-file",
        str(tmp_path / "enrollment-token"),
        "--token-file",
        str(token_file),
    )
    assert enrolled.returncode == 0, enrolled.stderr
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600 and token_file.read_text().startswith("gpa_")
    hostname = (captures / "hostname").read_text().strip().lower()
    node = m.Node.objects.get(hostname=hostname)
    assert (node.status, node.site.code) == ("received", "gy1")

    # Enrolling twice is refused on the node (the token file exists) before anything is sent.
    again = _agent(
        "enroll",
        *common,
        "--enrollment-token-file",
        str(tmp_path / "enrollment-token"),
        "--token-file",
        str(token_file),
    )
    assert again.returncode == 2 and "enrolled already" in again.stderr
    # With --force the agent asks again; the server refuses to re-key a node that has a token (exit 4).
    forced = _agent(
        "enroll",
        *common,
        "--enrollment-token-file",
        str(tmp_path / "enrollment-token"),
        "--token-file",
        str(token_file),
        "--force",
    )
    assert forced.returncode == 4 and "enrollment refused" in forced.stderr

    sent = _agent("report", *common, "--token-file", str(token_file), "--spool-dir", str(tmp_path / "spool"))
    assert sent.returncode == 0, sent.stderr
    assert m.Accelerator.objects.filter(node=node, model__name="Hygon K100").count() >= 1


@pytest.mark.django_db(transaction=True)
def test_a_refused_enrollment_is_exit_4_and_writes_no_token(live_server, tmp_path):
    (tmp_path / "enrollment-token").write_text("gpe_not-a-real-token\n")
    token_file = tmp_path / "agent-token"
    done = _agent(
        "enroll",
        "--server",
        live_server.url,
        "--from-dir",
        str(AGENT_DATA / "node-common"),
        "--enrollment-token-file",
        str(tmp_path / "enrollment-token"),
        "--token-file",
        str(token_file),
    )
    assert done.returncode == 4 and "enrollment refused" in done.stderr and "401" in done.stderr
    assert not token_file.exists()
