"""Hygon DCU: the real rocm-smi JSON capture, the hy-smi sample, and how the two merge."""

from __future__ import annotations

import json

from agent_helpers import DATA, assert_valid

from inventory_agents.agent.collectors import hygon
from inventory_agents.agent.report import build_report
from inventory_agents.agent.runner import DictSource, DirSource

HY_SMI = (DATA / "hygon-k100" / "hy-smi.txt").read_text()


def test_rocm_smi_capture(shared_fixtures, report_validator):
    text = (shared_fixtures / "hygon-dcu" / "gpustack_hygon-dcu_dtk24.04.3_rocm-smi.json").read_text()
    report, _ = build_report(DictSource({"rocm-smi.json": text}))
    assert_valid(report_validator, report)
    [card] = report["accelerators"]
    assert card["vendor"] == "hygon"
    assert card["model"] is None and card["model_raw"] == "DCU xxxx"  # series masked upstream
    assert card["serial"] is None and card["serial_raw"] == "TPXxxxx"  # partly masked serial is no identity
    assert card["uuid"] == "7100fa8866904061"
    assert card["memory_mib"] == 65520
    assert card["pci_device_id"] == "1d94:6210"
    assert (card["temperature_c"], card["power_w"]) == (41.0, 80.0)
    assert card["driver_version"] is None  # the capture has no "system" object
    assert card["health"]["status"] == "ok"


def test_rocminfo_capture_is_not_rocm_smi_json(shared_fixtures):
    text = (shared_fixtures / "hygon-dcu" / "gpustack_hygon-dcu_dtk24.04.3_rocminfo.txt").read_text()
    report, _ = build_report(DictSource({"rocm-smi.json": text}))
    assert report["accelerators"] == []
    assert [e["collector"] for e in report["collector_errors"]] == ["hygon"]


def test_hy_smi_sample(report_validator):
    report, _ = build_report(DirSource(str(DATA / "hygon-k100")))
    assert_valid(report_validator, report)
    first, second = report["accelerators"]
    assert (first["model"], first["serial"], first["uuid"]) == ("K100_AI", "TPD31A2404150027", "0x3b1f6c2e9a7d0541")
    assert first["pci_bus_id"] == "0000:1d:00.0"
    assert (first["memory_mib"], first["firmware_version"], first["driver_version"]) == (
        65520,
        "113-D6650100-103",
        "6.2.26",
    )
    assert (first["temperature_c"], first["power_w"]) == (49.0, 118.0)
    assert second["serial"] is None and second["serial_raw"] == "N/A"
    assert {"component": "hygon-driver", "version": "6.2.26"} in report["software"]
    assert {"component": "dtk", "version": "24.04.1"} in report["software"]


def test_summary_table_only():
    cards = hygon.parse_hy_smi(HY_SMI.split("\n\n\n")[0])["cards"]
    assert cards[1]["table temp"] == "53.0C" and cards[1]["table mode"] == "Normal"


def test_json_wins_for_identity_and_table_fills_the_rest():
    data = {
        "card0": {"Card Series": "K100_AI", "Serial Number": "TPD31A2404150099", "Card Vendor": "Hygon"},
        "system": {"Driver version": "6.2.31"},
    }
    report, _ = build_report(DictSource({"rocm-smi.json": json.dumps(data), "hy-smi.txt": HY_SMI}))
    first = report["accelerators"][0]
    assert first["serial"] == "TPD31A2404150099"
    assert first["driver_version"] == "6.2.31"
    assert first["temperature_c"] == 49.0  # from the hy-smi table


def test_abnormal_mode_and_uncorrectable_counts():
    card = hygon._card(0, {"table mode": "Abnormal", "uncorrectable errors": "2"}, None)
    assert card["health"]["status"] == "failed"
    card = hygon._card(0, {"table mode": "Abnormal"}, None)
    assert card["health"]["status"] == "degraded"


def test_amd_cards_are_not_reported():
    data = {"card0": {"Card Series": "Instinct MI210", "Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]"}}
    report, _ = build_report(DictSource({"rocm-smi.json": json.dumps(data)}))
    assert report["accelerators"] == []


def test_rocm_smi_json_after_a_banner_line(shared_fixtures):
    text = (shared_fixtures / "hygon-dcu" / "gpustack_hygon-dcu_dtk24.04.3_rocm-smi.json").read_text()
    banner = "\x1b[37mhygon module is loaded\x1b[0m\n"  # as DTK tools print it (see the rocminfo capture)
    report, _ = build_report(DictSource({"rocm-smi.json": banner + text}))
    assert [c["uuid"] for c in report["accelerators"]] == ["7100fa8866904061"]
