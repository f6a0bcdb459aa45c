"""NVIDIA parsers against every real nvidia-smi XML and CSV capture, plus truncation, fallback and grading."""

from __future__ import annotations

import re

import pytest
from agent_helpers import assert_valid

from inventory_agents.agent.collectors import nvidia
from inventory_agents.agent.report import build_report
from inventory_agents.agent.runner import DictSource, ToolError

# Values read in the capture files. serial None + serial_raw: the capture has a placeholder or masked serial.
XML_EXPECTED = {
    "datakit_tesla-v100-pcie-32gb_driver460_v11.xml": dict(
        model="Tesla V100-PCIE-32GB",
        serial="0324418086185",
        serial_raw="0324418086185",
        uuid="GPU-e77ce5d8-8b63-c936-3c1b-839d45bcd0f2",
        driver_version="460.39",
        cuda_version="11.2",
        memory_mib=32510,
        firmware_version="88.00.48.00.02",
        pci_bus_id="0000:21:01.0",
        pci_device_id="10de:1db6",
        temperature_c=66.0,
        power_w=170.16,
        mig_mode=None,
    ),
    "telegraf_a100-sxm4-80gb_4gpu_mig_driver535_v12.xml": dict(
        model="NVIDIA A100-SXM4-80GB",
        serial="1650522003820",
        serial_raw="1650522003820",
        uuid="GPU-513536b6-7d19-9063-b049-1e69664bb298",
        driver_version="535.54.03",
        cuda_version="12.2",
        memory_mib=81920,
        firmware_version="92.00.36.00.02",
        pci_bus_id="0000:01:00.0",
        pci_device_id="10de:20b2",
        temperature_c=27.0,
        power_w=67.03,
        mig_mode="enabled",
        mig_devices=4,
    ),
    "telegraf_gtx-1070-ti_truncated_v10.xml": dict(
        model="GeForce GTX 1070 Ti",
        serial=None,
        serial_raw=None,
        uuid="GPU-f9ba66fc-a7f5-94c5-da19-019ef2f9c665",
        driver_version=None,
        cuda_version=None,
        memory_mib=4096,
        firmware_version=None,
        pci_bus_id="0000:01:00.0",
        temperature_c=39.0,
        power_w=None,
    ),
    "telegraf_gtx-1660-ti_driver418_graphics-device.xml": dict(
        model="Graphics Device",
        serial=None,
        serial_raw="N/A",
        uuid="GPU-304a277d-3545-63b8-3a36-dfde3c992989",
        driver_version="418.43",
        cuda_version="10.1",
        memory_mib=5912,
        firmware_version="90.16.25.00.4C",
        pci_bus_id="0000:43:00.0",
        pci_device_id="10de:2184",
        temperature_c=40.0,
        power_w=8.93,
    ),
    "telegraf_quadro-p400_driver418_nodtd.xml": dict(
        model="Quadro P400",
        serial="0424418054852",
        serial_raw="0424418054852",
        uuid="GPU-8f750be4-dfbc-23b9-b33f-da729a536494",
        driver_version="418.43",
        cuda_version="10.1",
        memory_mib=1998,
        firmware_version="86.07.3B.00.4A",
        pci_bus_id="0000:43:00.0",
        temperature_c=33.0,
        power_w=None,
    ),
    "telegraf_rtx-3080_driver595_v13.xml": dict(
        model="NVIDIA GeForce RTX 3080",
        serial=None,
        serial_raw="REDACTED",
        uuid="GPU-19d6d965-2acc-f646-00f8-4c76979aabb4",
        driver_version="595.58.03",
        cuda_version="13.2",
        memory_mib=10240,
        firmware_version="94.02.71.40.72",
        pci_bus_id="0000:0c:00.0",
        temperature_c=27.0,
        power_w=142.33,
    ),
    "telegraf_rtx-3090_driver525_v12.xml": dict(
        model="NVIDIA GeForce RTX 3090",
        serial=None,
        serial_raw="N/A",
        uuid=None,
        uuid_raw="GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
        driver_version="525.147.05",
        cuda_version="12.0",
        memory_mib=24576,
        firmware_version="94.02.71.40.72",
        pci_bus_id="0000:00:10.0",
        pci_device_id=None,
        temperature_c=37.0,
        power_w=27.23,
    ),
    "telegraf_tesla-t4_driver515_v11.xml": dict(
        model="Tesla T4",
        serial=None,
        serial_raw="0000000000000",
        uuid="GPU-d37e67a5-91dd-3774-a5cb-99096249601a",
        driver_version="515.105.01",
        cuda_version="11.7",
        memory_mib=15360,
        firmware_version="90.04.84.00.06",
        pci_bus_id="0000:00:1e.0",
        pci_device_id="10de:1eb8",
        temperature_c=40.0,
        power_w=26.78,
    ),
}

CSV_EXPECTED = {
    "nvgpuexp_geforce-rtx-2080-super_595.71.05_linux.csv": dict(
        model="NVIDIA GeForce RTX 2080 SUPER",
        serial=None,
        serial_raw="[N/A]",
        uuid=None,
        uuid_raw="GPU-00000000-0000-0000-0000-000000000000",
        driver_version="595.71.05",
        memory_mib=8192,
        firmware_version="90.04.7A.40.73",
        pci_bus_id="0000:0c:00.0",
        temperature_c=40.0,
        power_w=39.32,
        mig_mode=None,
    ),
    "nvgpuexp_geforce-rtx-4080-super_595.71.05_linux.csv": dict(
        model="NVIDIA GeForce RTX 4080 SUPER",
        serial=None,
        serial_raw="[N/A]",
        uuid=None,
        driver_version="595.71.05",
        memory_mib=16376,
        firmware_version="95.03.44.00.B2",
        pci_bus_id="0000:01:00.0",
    ),
    "nvgpuexp_h100-80gb-hbm3_590.48.01_linux.csv": dict(
        model="NVIDIA H100 80GB HBM3",
        serial=None,
        serial_raw="0000000000000",
        uuid=None,
        driver_version="590.48.01",
        memory_mib=81559,
        firmware_version="96.00.A5.00.01",
        pci_bus_id="0000:00:09.0",
        pci_device_id="10de:2330",
        mig_mode="disabled",
        temperature_c=41.0,
        power_w=69.85,
    ),
    "nvgpuexp_h100-mig_590.48.01_linux.csv": dict(
        model="NVIDIA H100 80GB HBM3",
        serial=None,
        serial_raw="0000000000000",
        uuid=None,
        driver_version="590.48.01",
        memory_mib=81559,
        pci_bus_id="0000:00:09.0",
        mig_mode="enabled",
    ),
}


def _read(shared_fixtures, folder: str, name: str) -> str:
    return (shared_fixtures / folder / name).read_text()


def test_every_xml_capture_has_expectations(shared_fixtures):
    assert {p.name for p in (shared_fixtures / "nvidia-smi-xml").glob("*.xml")} == set(XML_EXPECTED)


def test_every_query_gpu_capture_has_expectations(shared_fixtures):
    found = {p.name for p in (shared_fixtures / "nvidia-smi-csv").glob("*.csv") if not p.name.endswith(".apps.csv")}
    assert found == set(CSV_EXPECTED)


@pytest.mark.parametrize("name", sorted(XML_EXPECTED))
def test_xml_capture(shared_fixtures, report_validator, name):
    report, _ = build_report(DictSource({"nvidia-smi-q-x.xml": _read(shared_fixtures, "nvidia-smi-xml", name)}))
    assert_valid(report_validator, report)
    assert report["collector_errors"] == []
    [card] = report["accelerators"]
    assert card["vendor"] == "nvidia"
    assert card["index"] == 0
    for key, value in XML_EXPECTED[name].items():
        assert card.get(key) == value, key
    assert card["health"]["status"] == "ok"
    if card["driver_version"]:
        assert {"component": "nvidia-driver", "version": card["driver_version"]} in report["software"]


@pytest.mark.parametrize("name", sorted(CSV_EXPECTED))
def test_query_gpu_capture(shared_fixtures, report_validator, name):
    text = _read(shared_fixtures, "nvidia-smi-csv", name)
    report, _ = build_report(DictSource({"nvidia-smi-query-gpu.csv": text}))
    assert_valid(report_validator, report)
    [card] = report["accelerators"]
    for key, value in CSV_EXPECTED[name].items():
        assert card.get(key) == value, key
    assert card["cuda_version"] is None  # --query-gpu has no CUDA field


def test_h100_csv_counters_by_header_name(shared_fixtures):
    [card] = nvidia.parse_csv(_read(shared_fixtures, "nvidia-smi-csv", "nvgpuexp_h100-80gb-hbm3_590.48.01_linux.csv"))
    health = card["health"]
    assert health["ecc_mode"] == "enabled"
    assert (health["ecc_volatile_sbe"], health["ecc_volatile_dbe"]) == (0, 0)
    assert (health["ecc_aggregate_sbe"], health["ecc_aggregate_dbe"]) == (0, 0)
    assert health["remapped_rows_correctable"] == 0
    assert health["remapped_rows_uncorrectable"] == 0
    assert health["remapped_rows_pending"] is False
    assert health["remapped_rows_failure"] is False
    assert health["retired_pages_sbe"] is None  # [N/A] on Hopper


def test_csv_columns_are_found_whatever_their_order(shared_fixtures):
    text = _read(shared_fixtures, "nvidia-smi-csv", "nvgpuexp_h100-80gb-hbm3_590.48.01_linux.csv")
    header, row = (line.split(", ") for line in text.strip().splitlines())
    shuffled = list(reversed(list(zip(header, row, strict=True))))
    text = ", ".join(h for h, _ in shuffled) + "\n" + ", ".join(v for _, v in shuffled) + "\n"
    [card] = nvidia.parse_csv(text)
    assert card["model"] == "NVIDIA H100 80GB HBM3"
    assert card["memory_mib"] == 81559


def test_csv_with_nounits_values():
    text = "index, name, serial, uuid, pci.bus_id, memory.total [MiB], driver_version\n"
    text += (
        "0, NVIDIA H200, 1654123456789, GPU-7f1c9a2e-5b3d-4e8f-a1c6-2d9e0b4f6a8c, 00000000:18:00.0, 143771, 550.90.07\n"
    )
    [card] = nvidia.parse_csv(text)
    assert card["memory_mib"] == 143771
    assert card["serial"] == "1654123456789"
    assert card["pci_bus_id"] == "0000:18:00.0"


def test_csv_without_header_is_an_error():
    with pytest.raises(ToolError):
        nvidia.parse_csv("0, NVIDIA H100, 123, GPU-x\n")


def test_apps_csv_is_not_mistaken_for_query_gpu(shared_fixtures):
    text = _read(shared_fixtures, "nvidia-smi-csv", "nvgpuexp_h100-80gb-hbm3_590.48.01_linux.apps.csv")
    report, _ = build_report(DictSource({"nvidia-smi-query-gpu.csv": text}))
    assert report["accelerators"] == []
    assert [e["collector"] for e in report["collector_errors"]] == ["nvidia"]


def test_xml_wins_over_csv(shared_fixtures):
    files = {
        "nvidia-smi-q-x.xml": _read(
            shared_fixtures, "nvidia-smi-xml", "telegraf_a100-sxm4-80gb_4gpu_mig_driver535_v12.xml"
        ),
        "nvidia-smi-query-gpu.csv": _read(
            shared_fixtures, "nvidia-smi-csv", "nvgpuexp_h100-80gb-hbm3_590.48.01_linux.csv"
        ),
    }
    report, _ = build_report(DictSource(files))
    assert [c["model"] for c in report["accelerators"]] == ["NVIDIA A100-SXM4-80GB"]


def test_broken_xml_falls_back_to_csv(shared_fixtures):
    files = {
        "nvidia-smi-q-x.xml": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
        "nvidia-smi-query-gpu.csv": _read(
            shared_fixtures, "nvidia-smi-csv", "nvgpuexp_h100-80gb-hbm3_590.48.01_linux.csv"
        ),
    }
    report, _ = build_report(DictSource(files))
    assert [c["model"] for c in report["accelerators"]] == ["NVIDIA H100 80GB HBM3"]
    [error] = report["collector_errors"]
    assert error["collector"] == "nvidia" and "couldn't communicate" in error["error"]


def _two_gpu_document(shared_fixtures) -> str:
    text = _read(shared_fixtures, "nvidia-smi-xml", "datakit_tesla-v100-pcie-32gb_driver460_v11.xml")
    start, end = text.index("<gpu id="), text.index("</gpu>") + len("</gpu>")
    second = text[start:end].replace("00000000:21:01.0", "00000000:22:01.0").replace("0324418086185", "0324418086186")
    return text[:end] + "\n" + second + text[end:]


def test_two_gpu_document_parses(shared_fixtures):
    cards, error = nvidia.parse_xml(_two_gpu_document(shared_fixtures))
    assert error is None
    assert [c["serial"] for c in cards] == ["0324418086185", "0324418086186"]
    assert [c["index"] for c in cards] == [0, 1]


def test_truncated_xml_keeps_complete_cards_and_reports_the_cut(shared_fixtures, report_validator):
    text = _two_gpu_document(shared_fixtures)
    cut = text[: text.rindex("<fb_memory_usage>")]  # inside the second <gpu>
    report, _ = build_report(DictSource({"nvidia-smi-q-x.xml": cut}))
    assert_valid(report_validator, report)
    assert [c["serial"] for c in report["accelerators"]] == ["0324418086185"]
    [error] = report["collector_errors"]
    assert error["collector"] == "nvidia" and "truncated" in error["error"]


def test_truncated_xml_is_completed_from_csv_by_bus_id(shared_fixtures):
    text = _two_gpu_document(shared_fixtures)
    csv_text = (
        "index, name, serial, uuid, pci.bus_id, memory.total [MiB]\n"
        "0, Tesla V100-PCIE-32GB, 0324418086185, GPU-e77ce5d8-8b63-c936-3c1b-839d45bcd0f2, 00000000:21:01.0, 32510\n"
        "1, Tesla V100-PCIE-32GB, 0324418086186, GPU-e77ce5d8-8b63-c936-3c1b-839d45bcd0f3, 00000000:22:01.0, 32510\n"
    )
    files = {"nvidia-smi-q-x.xml": text[: text.rindex("<fb_memory_usage>")], "nvidia-smi-query-gpu.csv": csv_text}
    report, _ = build_report(DictSource(files))
    assert [c["serial"] for c in report["accelerators"]] == ["0324418086185", "0324418086186"]


def test_document_cut_before_any_gpu_is_an_error(shared_fixtures):
    text = _read(shared_fixtures, "nvidia-smi-xml", "telegraf_tesla-t4_driver515_v11.xml")
    with pytest.raises(ToolError):
        nvidia.parse_xml(text[: text.index("<serial>")])


def _card_with(**health) -> dict:
    card = {"vendor": "nvidia", "health": nvidia.new_health()}
    card["health"].update(health)
    return card


@pytest.mark.parametrize(
    ("health", "status"),
    [
        ({"ecc_volatile_dbe": 0, "ecc_aggregate_dbe": 0}, "ok"),
        ({"ecc_volatile_dbe": 2}, "failed"),
        ({"ecc_aggregate_dbe": 1}, "degraded"),
        ({"remapped_rows_failure": True}, "failed"),
        ({"remapped_rows_pending": True}, "degraded"),
        ({"retired_pages_pending": True}, "degraded"),
        ({"xid_events": [{"xid": 79}]}, "failed"),
        ({"xid_events": [{"xid": 94}]}, "failed"),
        ({"xid_events": [{"xid": 61}]}, "degraded"),
        ({"xid_events": [{"xid": 13}]}, "ok"),
    ],
)
def test_grading_hints(health, status):
    card = _card_with(**health)
    nvidia.grade(card)
    assert card["health"]["status"] == status
    assert bool(card["health"]["reasons"]) == (status != "ok")


def test_remapped_rows_xml_block():
    xml = """<?xml version="1.0" ?><nvidia_smi_log><driver_version>550.54.15</driver_version>
    <gpu id="00000000:18:00.0"><product_name>NVIDIA H100 80GB HBM3</product_name><serial>1654123456789</serial>
    <uuid>GPU-7f1c9a2e-5b3d-4e8f-a1c6-2d9e0b4f6a8c</uuid><remapped_rows><remapped_row_corr>0</remapped_row_corr>
    <remapped_row_unc>3</remapped_row_unc><remapped_row_pending>No</remapped_row_pending>
    <remapped_row_failure>Yes</remapped_row_failure></remapped_rows></gpu></nvidia_smi_log>"""
    [card], error = nvidia.parse_xml(xml)
    assert error is None
    assert card["health"]["remapped_rows_uncorrectable"] == 3
    assert card["health"]["remapped_rows_failure"] is True
    nvidia.grade(card)
    assert card["health"]["status"] == "failed"


def test_dual_gpu_board_is_one_accelerator(shared_fixtures):
    text = _two_gpu_document(shared_fixtures)
    text = re.sub(r"<multigpu_board>No</multigpu_board>", "<multigpu_board>Yes</multigpu_board>", text)
    text = text.replace("<serial>0324418086186</serial>", "<serial>0324418086185</serial>")
    cards, _ = nvidia.parse_xml(text)
    [board] = cards
    assert board["serial"] == "0324418086185"
    assert [chip["pci_bus_id"] for chip in board["chips"]] == ["0000:21:01.0", "0000:22:01.0"]
    assert board["memory_mib"] == 2 * 32510


def test_warning_before_the_xml_document(shared_fixtures):
    text = _read(shared_fixtures, "nvidia-smi-xml", "telegraf_tesla-t4_driver515_v11.xml")
    cards, error = nvidia.parse_xml("WARNING: infoROM is corrupted at gpu 0000:00:1E.0\n" + text)
    assert error is None and cards[0]["model"] == "Tesla T4"
