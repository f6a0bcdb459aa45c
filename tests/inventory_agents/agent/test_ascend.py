"""Ascend: every real npu-smi capture, and a two-card Atlas 300I Duo sample (an accelerator is the card)."""

from __future__ import annotations

import pytest
from agent_helpers import DATA, assert_valid

from inventory_agents.agent.collectors import ascend
from inventory_agents.agent.report import build_report
from inventory_agents.agent.runner import DictSource, DirSource

CAPTURES = {
    "table": "mindcluster-doc_ascend910_npu-smi-info_table_v24.1.rc1.txt",
    "map_910b": "gpustack_ascend-910b_info-m.txt",
    "collect_910a": "mindcluster-test_ascend910a-8x_npu-info-collect_before.txt",
    "common": "gpustack_ascend-910b_info-t-common.txt",
    "usages": "gpustack_ascend-910b_info-t-usages.txt",
    "board": "mindcluster-doc_ascend910_info-t-board.txt",
    "chip_board": "mindcluster-doc_ascend910_info-c0-t-board.txt",
    "chip_health": "mindcluster-doc_ascend910_info-c0-t-health.txt",
    "ecc": "mindcluster-doc_ascend910_info-t-ecc.txt",
}


@pytest.fixture
def npu(shared_fixtures):
    return {key: (shared_fixtures / "npu-smi" / name).read_text() for key, name in CAPTURES.items()}


def test_every_npu_smi_capture_is_covered(shared_fixtures):
    # `npu-smi info -t topo` captures feed the topology parser, not the inventory collector tested here.
    names = {p.name for p in (shared_fixtures / "npu-smi").iterdir() if "-t-topo" not in p.name}
    assert names == set(CAPTURES.values())


def test_summary_table(npu):
    table = ascend.parse_table(npu["table"])
    assert table["version"] == "24.1.rc1"
    assert list(table["npus"]) == [7]  # rows 0-6 are elided in the doc example
    card = table["npus"][7]
    assert (card["name"], card["health"], card["power_w"], card["temperature_c"]) == ("xxx", "OK", 67.0, 44.0)
    [chip] = card["chips"]
    assert (chip["pci_bus_id"], chip["ddr_mib"], chip["hbm_mib"]) == ("0000:3d:00.0", 15567, 32768)


def test_table_alone(npu, report_validator):
    report, _ = build_report(DictSource({"npu-smi-info.txt": npu["table"]}))
    assert_valid(report_validator, report)
    [card] = report["accelerators"]
    assert card["vendor"] == "ascend"
    assert card["index"] == 7
    assert card["model"] is None and card["model_raw"] == "Ascend xxx"  # chip name masked in the capture
    assert card["serial"] is None and card["serial_raw"] is None
    assert card["memory_mib"] == 32768
    assert card["driver_version"] == "24.1.rc1"
    assert card["pci_bus_id"] == "0000:3d:00.0"
    assert card["health"]["status"] == "ok"


def test_910b_mapping_drops_the_mcu(npu, report_validator):
    rows = ascend.parse_mapping(npu["map_910b"])
    assert len(rows) == 16 and sum(r["is_mcu"] for r in rows) == 8
    report, _ = build_report(DictSource({"npu-smi-info-m.txt": npu["map_910b"]}))
    assert_valid(report_validator, report)
    cards = report["accelerators"]
    assert [c["index"] for c in cards] == list(range(8))
    for card in cards:
        assert card["model"] is None and card["model_raw"] == "Ascend xxx"
        assert [chip["name"] for chip in card["chips"]] == ["Ascend xxx"]
        assert card["health"]["status"] == "unknown"  # -m says nothing about health


def test_910a_collect_script_capture(npu):
    report, _ = build_report(DictSource({"npu-smi-info-m.txt": npu["collect_910a"]}))
    cards = report["accelerators"]
    assert len(cards) == 8
    assert {c["model"] for c in cards} == {"Ascend 910A"}
    assert [c["chips"][0]["logic_id"] for c in cards] == list(range(8))


def test_board_info(npu):
    report, _ = build_report(DictSource({"npu-smi-board-0.txt": npu["board"]}))
    [card] = report["accelerators"]
    assert card["driver_version"] == "23.0.5"
    assert card["firmware_version"] == "7.1.0.7.220"
    assert card["pci_bus_id"] == "0000:61:00.0"
    assert card["pci_device_id"] == "19e5:d801"
    assert card["model"] == "Ascend 910"  # no chip name at all: named from the PCI device id
    assert card["serial"] is None and card["serial_raw"] is None  # this npu-smi prints no serial
    assert {"component": "ascend-firmware", "version": "7.1.0.7.220"} in report["software"]


def test_chip_board_and_health(npu):
    files = {"npu-smi-board-0.txt": npu["chip_board"], "npu-smi-health-0.txt": npu["chip_health"]}
    report, _ = build_report(DictSource(files))
    [card] = report["accelerators"]
    [chip] = card["chips"]
    assert chip["die_id"] == "42C711D4 20B03704 4A10C8D4 14CC040A D2102003"
    assert chip["pci_bus_id"] == "0000:61:00.0"
    assert card["firmware_version"] == "7.1.0.7.220"
    assert card["model"] is None and card["model_raw"] == "Ascend xxx"
    assert card["health"]["health_raw"] == "OK"
    assert card["health"]["status"] == "ok"
    assert card["health"]["error_codes"] == []


def test_common_and_usages(npu):
    files = {"npu-smi-common-0.txt": npu["common"], "npu-smi-usages-0.txt": npu["usages"]}
    report, _ = build_report(DictSource(files))
    [card] = report["accelerators"]
    [chip] = card["chips"]  # the "mcu" block is not a chip
    assert (chip["temperature_c"], chip["power_w"], chip["aicore_count"]) == (46.0, 69.0, 32)
    assert chip["memory_mib"] == 32768 and card["memory_mib"] == 32768  # HBM capacity


def test_ecc_counters(npu):
    report, _ = build_report(DictSource({"npu-smi-ecc-1.txt": npu["ecc"]}))
    [card] = report["accelerators"]
    assert card["index"] == 1
    health = card["health"]
    assert health["ecc_hbm_dbe"] == 0 and health["isolated_pages_hbm_dbe"] == 0 and health["ecc_ddr_sbe"] == 0


def test_atlas_300i_duo_sample(report_validator):
    report, _ = build_report(DirSource(str(DATA / "ascend-310p-duo")))
    assert_valid(report_validator, report)
    assert report["collector_errors"] == []
    first, second = report["accelerators"]
    assert (first["index"], second["index"]) == (1, 2)
    assert first["model"] == "Ascend 310P3"
    assert first["serial"] == "2106030737ZERC004118"
    assert [c["chip_id"] for c in first["chips"]] == [0, 1]
    assert [c["pci_bus_id"] for c in first["chips"]] == ["0000:01:00.0", "0000:02:00.0"]
    assert [c["temperature_c"] for c in first["chips"]] == [51.0, 49.0]
    assert first["memory_mib"] == 44280 + 43693
    assert first["health"]["status"] == "ok"
    assert second["serial"] is None and second["serial_raw"] == "NA"
    assert second["health"]["status"] == "degraded"
    assert second["health"]["error_codes"] == ["80E18402"]
    assert [c["health"] for c in second["chips"]] == ["Warning", "OK"]
    assert second["health"]["ecc_ddr_aggregate_sbe"] == 17
    assert {"component": "ascend-driver", "version": "23.0.0"} in report["software"]


@pytest.mark.parametrize(
    ("raw", "status"),
    [("OK", "ok"), ("Warning", "degraded"), ("Alarm", "failed"), ("Critical", "failed"), ("UNKNOWN", "unknown")],
)
def test_health_words(raw, status):
    card = {"health": {"health_raw": raw, "error_codes": []}}
    ascend.grade(card)
    assert card["health"]["status"] == status


def test_double_bit_errors_degrade_an_ok_card():
    card = {"health": {"health_raw": "OK", "error_codes": [], "ecc_hbm_dbe": 2}}
    ascend.grade(card)
    assert card["health"]["status"] == "degraded"


def test_a_cut_pci_device_id_names_no_device(npu, report_validator):
    board = npu["board"].replace("0xD801", "0xD80")
    report, _ = build_report(DictSource({"npu-smi-info.txt": npu["table"], "npu-smi-board-7.txt": board}))
    assert_valid(report_validator, report)
    assert all(card["pci_device_id"] is None for card in report["accelerators"])
