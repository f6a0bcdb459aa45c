"""Running tools on a live node: timeouts kill hanging tools, missing tools are skipped, collectors are isolated."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
from agent_helpers import assert_valid

from inventory_agents.agent import report as report_module
from inventory_agents.agent.report import build_report
from inventory_agents.agent.runner import DictSource, DirSource, LiveSource, ToolError, _npu_smi_argv, run_command


def _tool(bin_dir: Path, name: str, body: str) -> Path:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def bin_dir(tmp_path) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    return path


def _sandbox_path(bin_dir: Path) -> str:
    for tool in ("sleep", "cat", "echo"):
        for folder in ("/bin", "/usr/bin"):
            if os.path.exists(os.path.join(folder, tool)) and not (bin_dir / tool).exists():
                (bin_dir / tool).symlink_to(os.path.join(folder, tool))
    return str(bin_dir)


def test_hanging_tool_is_killed_with_its_children(bin_dir, tmp_path, report_validator):
    pid_file = tmp_path / "child.pid"
    _tool(bin_dir, "nvidia-smi", f"sleep 60 &\necho $! > {pid_file}\nwait")
    source = LiveSource(timeout=1, path=_sandbox_path(bin_dir))
    started = time.monotonic()
    report, _ = build_report(source, state_dir=str(tmp_path / "state"))
    elapsed = time.monotonic() - started
    assert elapsed < 20
    assert_valid(report_validator, report)
    [error] = [e for e in report["collector_errors"] if e["collector"] == "nvidia"]
    assert "timed out after 1s" in error["error"]
    child = int(pid_file.read_text())
    time.sleep(0.2)
    assert not _alive(child)  # the grandchild went with the process group


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for an init that reaps slowly (containers)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] not in "ZX"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_missing_tools_are_skipped_quietly(bin_dir, tmp_path, report_validator):
    source = LiveSource(timeout=5, path=str(bin_dir))  # an empty PATH: no tool at all
    report, _ = build_report(source, state_dir=str(tmp_path / "state"))
    assert_valid(report_validator, report)
    assert report["collector_errors"] == []
    assert report["accelerators"] == [] and report["lldp_neighbors"] == []
    assert report["hostname"]  # from the node itself, not from a tool
    assert report["system"]["kernel"]


def test_missing_program_returns_none(bin_dir):
    assert run_command(["nvidia-smi", "-q", "-x"], timeout=5, env={"PATH": str(bin_dir)}) is None


def test_failing_tool_is_a_collector_error(bin_dir, tmp_path):
    _tool(bin_dir, "lldpctl", 'echo "cannot find lldpd control socket" >&2\nexit 1')
    report, _ = build_report(LiveSource(timeout=5, path=_sandbox_path(bin_dir)), state_dir=str(tmp_path))
    [error] = report["collector_errors"]
    assert error["collector"] == "lldp"
    assert "exited 1: cannot find lldpd control socket" in error["error"]


def test_old_lldpd_without_json_falls_back_to_keyvalue(bin_dir, tmp_path):
    script = (
        'if [ "$2" = "json" ]; then echo "unknown output format" >&2; exit 1; fi\n'
        "echo lldp.eno1.via=LLDP\necho lldp.eno1.chassis.mac=00:11:22:33:44:55\necho lldp.eno1.port.ifname=Gi1/0/1"
    )
    _tool(bin_dir, "lldpctl", script)
    report, _ = build_report(LiveSource(timeout=5, path=_sandbox_path(bin_dir)), state_dir=str(tmp_path))
    assert report["collector_errors"] == []
    [neighbor] = report["lldp_neighbors"]
    assert (neighbor["remote_chassis_id"], neighbor["remote_port"]) == ("00:11:22:33:44:55", "Gi1/0/1")


def test_tool_printing_garbage_is_an_error_not_a_crash(bin_dir, tmp_path, report_validator):
    _tool(bin_dir, "nvidia-smi", "echo 'No devices were found'")
    report, _ = build_report(LiveSource(timeout=5, path=_sandbox_path(bin_dir)), state_dir=str(tmp_path))
    assert_valid(report_validator, report)
    [error] = report["collector_errors"]
    assert error["collector"] == "nvidia" and "No devices were found" in error["error"]


def test_tools_run_with_c_locale(bin_dir):
    _tool(bin_dir, "show-locale", 'echo "$LC_ALL"')
    assert LiveSource(timeout=5, path=_sandbox_path(bin_dir)).run(["show-locale"]).strip() == "C"


def test_collector_exception_is_isolated(monkeypatch, report_validator):
    def explode(source, state_dir):
        raise RuntimeError("boom")

    collectors = [(name, explode if name == "nvidia" else fn) for name, fn in report_module.COLLECTORS]
    monkeypatch.setattr(report_module, "COLLECTORS", collectors)
    report, _ = build_report(DictSource({"hostname": "n1", "ibstat.txt": "CA 'mlx5_0'\n\tNode GUID: 0x1\n"}))
    assert_valid(report_validator, report)
    assert report["collector_errors"] == [{"collector": "nvidia", "error": "boom"}]
    assert report["hostname"] == "n1" and report["infiniband"][0]["ca"] == "mlx5_0"


def test_unserialisable_fragment_is_rejected_whole(monkeypatch):
    collectors = [
        (n, (lambda s, d: {"accelerators": [{"x": object()}]}) if n == "hygon" else f)
        for n, f in report_module.COLLECTORS
    ]
    monkeypatch.setattr(report_module, "COLLECTORS", collectors)
    report, _ = build_report(DictSource({}))
    assert report["accelerators"] == []
    assert [e["collector"] for e in report["collector_errors"]] == ["hygon"]


def test_dir_source_tolerates_undecodable_bytes(tmp_path):
    (tmp_path / "hostname").write_bytes(b"node\xff\xfe01\n")
    assert DirSource(str(tmp_path)).hostname() == "node\ufffd\ufffd01"


def test_npu_smi_capture_names_map_to_commands():
    assert _npu_smi_argv("npu-smi-board-3.txt") == ["npu-smi", "info", "-t", "board", "-i", "3"]
    assert _npu_smi_argv("npu-smi-info.txt") is None
    assert _npu_smi_argv("npu-smi-rm-3.txt") is None


def test_run_command_error_without_output(bin_dir):
    _tool(bin_dir, "dmidecode", "echo '/dev/mem: Permission denied' >&2\nexit 1")
    with pytest.raises(ToolError, match="Permission denied"):
        run_command(["dmidecode"], timeout=5, env={"PATH": _sandbox_path(bin_dir)})
