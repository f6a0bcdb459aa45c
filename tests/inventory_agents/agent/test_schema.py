"""The report JSON Schema: strict on types and on the top level, open for extra keys in nested objects."""

from __future__ import annotations

import copy

import pytest
from agent_helpers import DATA

from inventory_agents.agent.report import build_report
from inventory_agents.agent.runner import DirSource


@pytest.fixture(scope="module")
def good() -> dict:
    report, _ = build_report(DirSource(str(DATA / "ascend-310p-duo")))
    return report


def _errors(validator, report) -> list[str]:
    return [e.message for e in validator.iter_errors(report)]


def test_sample_report_is_valid(report_validator, good):
    assert _errors(report_validator, good) == []


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r.update(extra_top_level_key=1),
        lambda r: r.update(schema="gpuops.agent-report/2"),
        lambda r: r.update(collected_at="yesterday"),
        lambda r: r["accelerators"][0].update(vendor="amd"),
        lambda r: r["accelerators"][0].update(serial=12345),
        lambda r: r["accelerators"][0].update(serial=""),
        lambda r: r["accelerators"][0].update(pci_bus_id="00000000:3B:00.0"),
        lambda r: r["accelerators"][0].update(memory_mib="32 GB"),
        lambda r: r["accelerators"][0]["health"].update(status="broken"),
        lambda r: r["accelerators"][0].pop("serial"),
        lambda r: r["system"].update(cpu_count=-1),
        lambda r: r["software"].append({"component": "CUDA Toolkit", "version": "12.2"}),
        lambda r: r["collector_errors"].append({"collector": "nvidia"}),
        lambda r: r.pop("nics"),
    ],
)
def test_violations_are_caught(report_validator, good, mutate):
    report = copy.deepcopy(good)
    mutate(report)
    assert _errors(report_validator, report)


def test_nested_objects_accept_new_keys(report_validator, good):
    report = copy.deepcopy(good)
    report["accelerators"][0]["nvlink_peers"] = ["0000:41:00.0"]
    report["accelerators"][0]["health"]["new_counter"] = 3
    report["system"]["tpm_version"] = "2.0"
    assert _errors(report_validator, report) == []
