"""Sending reports: headers, the spool when the server is down (oldest first next time), 4xx kept in rejected/."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from agent_helpers import DATA, FakeServer, assert_valid, build_dir, run_agent

from inventory_agents.agent import __main__ as cli
from inventory_agents.agent import transport


@pytest.fixture
def server():
    fake = FakeServer()
    yield fake
    fake.close()


@pytest.fixture
def dead_url() -> str:
    """A port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def token_file(tmp_path) -> Path:
    path = tmp_path / "token"
    path.write_text("s3cr3t-agent-token\n")
    return path


def _node(tmp_path: Path, hostname: str) -> Path:
    return build_dir(tmp_path / "node", {"hostname": hostname + "\n"}, base=DATA / "hygon-k100")


def _report(url: str, token_file: Path, spool: Path, node: Path) -> int:
    args = [
        "report",
        "--server",
        url,
        "--token-file",
        str(token_file),
        "--spool-dir",
        str(spool),
        "--from-dir",
        str(node),
        "--http-timeout",
        "5",
    ]
    return cli.main(args)


def test_delivered_with_token_and_json(server, tmp_path, token_file, report_validator):
    spool = tmp_path / "spool"
    assert _report(server.url, token_file, spool, _node(tmp_path, "n1")) == cli.EXIT_OK
    [request] = server.received
    assert request["path"] == "/api/agent/reports/"
    assert request["headers"]["Authorization"] == "Token s3cr3t-agent-token"
    assert request["headers"]["Content-Type"] == "application/json"
    assert_valid(report_validator, request["body"])
    assert transport.spooled_files(str(spool)) == []


def test_server_down_spools_then_sends_oldest_first(server, dead_url, tmp_path, token_file):
    spool = tmp_path / "spool"
    assert _report(dead_url, token_file, spool, _node(tmp_path, "n1")) == cli.EXIT_SPOOLED
    assert _report(dead_url, token_file, spool, _node(tmp_path, "n2")) == cli.EXIT_SPOOLED
    spooled = transport.spooled_files(str(spool))
    assert [json.loads(Path(p).read_text())["hostname"] for p in spooled] == ["n1", "n2"]
    assert _report(server.url, token_file, spool, _node(tmp_path, "n3")) == cli.EXIT_OK
    assert server.hostnames() == ["n1", "n2", "n3"]
    assert transport.spooled_files(str(spool)) == []


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_server_errors_and_throttling_are_retried_later(server, tmp_path, token_file, status):
    spool = tmp_path / "spool"
    server.statuses = [status]
    assert _report(server.url, token_file, spool, _node(tmp_path, "n1")) == cli.EXIT_SPOOLED
    assert len(transport.spooled_files(str(spool))) == 1
    assert _report(server.url, token_file, spool, _node(tmp_path, "n2")) == cli.EXIT_OK
    assert server.hostnames() == ["n1", "n1", "n2"]


def test_rejected_report_is_kept_aside_and_not_retried(server, tmp_path, token_file):
    spool = tmp_path / "spool"
    server.statuses = [400]
    assert _report(server.url, token_file, spool, _node(tmp_path, "n1")) == cli.EXIT_REJECTED
    assert transport.spooled_files(str(spool)) == []
    assert len(list((spool / "rejected").glob("*.json"))) == 1
    assert _report(server.url, token_file, spool, _node(tmp_path, "n2")) == cli.EXIT_OK
    assert server.hostnames() == ["n1", "n2"]


def test_rejected_spooled_report_does_not_block_the_rest(server, dead_url, tmp_path, token_file):
    spool = tmp_path / "spool"
    for name in ("n1", "n2"):
        assert _report(dead_url, token_file, spool, _node(tmp_path, name)) == cli.EXIT_SPOOLED
    server.statuses = [422]
    assert _report(server.url, token_file, spool, _node(tmp_path, "n3")) == cli.EXIT_OK
    assert server.hostnames() == ["n1", "n2", "n3"]
    assert len(list((spool / "rejected").glob("*.json"))) == 1


def test_spool_is_capped(dead_url, tmp_path, token_file, monkeypatch):
    monkeypatch.setattr(transport, "MAX_SPOOLED", 2)
    spool = tmp_path / "spool"
    for name in ("n1", "n2", "n3"):
        _report(dead_url, token_file, spool, _node(tmp_path, name))
    kept = [json.loads(Path(p).read_text())["hostname"] for p in transport.spooled_files(str(spool))]
    assert kept == ["n2", "n3"]


def test_unwritable_spool_is_exit_5(dead_url, tmp_path, token_file):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert _report(dead_url, token_file, blocker / "spool", _node(tmp_path, "n1")) == cli.EXIT_SPOOL_FAILED


def test_xid_state_advances_only_when_delivered_or_spooled(server, dead_url, tmp_path, token_file, monkeypatch):
    state_dir = tmp_path / "state"
    report = {"hostname": "n1"}

    def fake_build(source, state_dir=None):
        return report, {"version": 1, "last_at": "2026-03-03T02:17:55Z", "recent_hashes": ["abc"]}

    monkeypatch.setattr(cli, "build_report", fake_build)
    base = [
        "report",
        "--token-file",
        str(token_file),
        "--spool-dir",
        str(tmp_path / "spool"),
        "--state-dir",
        str(state_dir),
    ]
    server.statuses = [403]
    assert cli.main([*base, "--server", server.url]) == cli.EXIT_REJECTED
    assert not (state_dir / "xid-state.json").exists()
    assert cli.main([*base, "--server", dead_url]) == cli.EXIT_SPOOLED
    assert json.loads((state_dir / "xid-state.json").read_text())["recent_hashes"] == ["abc"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--server", "gpuops.example.com"], "must be an http:// or https:// URL"),
        (["--server", "http://127.0.0.1:9", "--token-file", "/nonexistent/token"], "cannot read token file"),
    ],
)
def test_bad_arguments_exit_2(tmp_path, args, message):
    argv = ["report", "--token-file", str(tmp_path / "t"), "--spool-dir", str(tmp_path / "s"), *args]
    (tmp_path / "t").write_text("tok")
    result = run_agent(*argv)
    assert result.returncode == 2
    assert message in result.stderr


def test_empty_token_file_exit_2(tmp_path):
    (tmp_path / "t").write_text("\n")
    result = run_agent("report", "--server", "http://127.0.0.1:9", "--token-file", str(tmp_path / "t"))
    assert result.returncode == 2 and "token file" in result.stderr


def test_missing_required_option_exit_2():
    result = run_agent("report", "--server", "http://127.0.0.1:9")
    assert result.returncode == 2 and "--token-file" in result.stderr


def test_report_subprocess_end_to_end(server, dead_url, tmp_path, token_file):
    node = _node(tmp_path, "e2e")
    spool = tmp_path / "spool"
    down = run_agent(
        "report",
        "--server",
        dead_url,
        "--token-file",
        str(token_file),
        "--spool-dir",
        str(spool),
        "--from-dir",
        str(node),
    )
    assert down.returncode == 3 and "report spooled" in down.stderr
    up = run_agent(
        "report",
        "--server",
        server.url + "/",
        "--token-file",
        str(token_file),
        "--spool-dir",
        str(spool),
        "--from-dir",
        str(node),
    )
    assert up.returncode == 0, up.stderr
    assert server.hostnames() == ["e2e", "e2e"]


def test_enroll_force_rewrites_a_world_readable_token_file_mode_600(tmp_path, monkeypatch):
    answers = []

    def fake_enroll(url, token, body, timeout):
        answers.append((url, token, json.loads(body)["hostname"]))
        return {"token": "gpa_new", "hostname": "n1", "node_id": 7, "status": "received"}

    monkeypatch.setattr(cli, "enroll", fake_enroll)
    (tmp_path / "enrollment").write_text("gpe_site\n")
    token_file = tmp_path / "agent.token"
    token_file.write_text("gpa_old\n")
    token_file.chmod(0o644)
    args = [
        "enroll",
        "--server",
        "http://gpuops.example",
        "--from-dir",
        str(_node(tmp_path, "n1")),
        "--enrollment-token-file",
        str(tmp_path / "enrollment"),
        "--token-file",
        str(token_file),
    ]
    assert cli.main(args) == 2 and not answers  # refused locally: the node has a token file
    assert cli.main([*args, "--force"]) == 0
    assert answers == [("http://gpuops.example/api/agent/enroll/", "gpe_site", "n1")]
    assert token_file.read_text() == "gpa_new\n" and (token_file.stat().st_mode & 0o777) == 0o600
