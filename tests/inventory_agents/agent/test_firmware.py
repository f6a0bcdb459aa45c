"""Firmware: BIOS from every real dmidecode capture, VBIOS / InfoROM from every nvidia-smi XML capture, Ascend and
Hygon firmware, BMC / NIC samples (no public capture of `ipmitool mc info`, `ethtool -i` or `mlxfwmanager`), and
garbled or truncated output becoming a collector error that names the tool and the line."""

from __future__ import annotations

import pytest
from agent_helpers import DATA, assert_valid

from inventory_agents.agent.collectors import firmware
from inventory_agents.agent.report import build_report
from inventory_agents.agent.runner import DictSource, DirSource, ToolError

FW = DATA / "firmware"

BIOS_EXPECTED = {
    "netboxagent_dell-poweredge-m630.txt": ("PowerEdge M630", "Dell Inc.", "1.2.5", "05/04/2015"),
    "netboxagent_hp-proliant-dl380p-gen8.txt": ("ProLiant DL380p Gen8", "HP", "P70", "07/01/2015"),
    "netboxagent_hpe-proliant-bl460c-gen10-graphics-exp.txt": (
        "ProLiant BL460c Gen10 Graphics Exp",
        "HPE",
        "I41",
        "04/18/2019",
    ),
    "netboxagent_hpe-proliant-bl460c-gen10.txt": ("ProLiant BL460c Gen10", "HPE", "I41", "10/02/2018"),
    "netboxagent_supermicro-ssg-6028r.txt": ("SSG-6028R-OSD072P", "American Megatrends Inc.", "2.0b", "05/02/2017"),
    "netboxagent_supermicro-sys-5039ms-h12trf.txt": (
        "SYS-5039MS-H12TRF-OS012",
        "American Megatrends Inc.",
        "2.2",
        "05/16/2018",
    ),
}

# nvidia-smi -q -x captures: (VBIOS, InfoROM image) of the first GPU; None where the capture masks or lacks it.
NVIDIA_EXPECTED = {
    "datakit_tesla-v100-pcie-32gb_driver460_v11.xml": ("88.00.48.00.02", "G500.0202.00.02"),
    "telegraf_a100-sxm4-80gb_4gpu_mig_driver535_v12.xml": ("92.00.36.00.02", "G506.0212.00.01"),
    "telegraf_gtx-1070-ti_truncated_v10.xml": None,
    "telegraf_gtx-1660-ti_driver418_graphics-device.xml": ("90.16.25.00.4C", "G001.0000.02.04"),
    "telegraf_quadro-p400_driver418_nodtd.xml": ("86.07.3B.00.4A", "G212.0500.00.01"),
    "telegraf_rtx-3080_driver595_v13.xml": ("94.02.71.40.72", "G001.0000.03.03"),
    "telegraf_rtx-3090_driver525_v12.xml": ("94.02.71.40.72", None),
    "telegraf_tesla-t4_driver515_v11.xml": ("90.04.84.00.06", "G183.0200.00.02"),
}


def _by_component(report: dict) -> dict:
    result: dict = {}
    for entry in report["firmware"]:
        result.setdefault(entry["component"], []).append(entry)
    return result


def _errors(report: dict) -> dict:
    return {e["collector"]: e["error"] for e in report["collector_errors"]}


def test_every_dmidecode_capture_is_covered(shared_fixtures):
    assert {p.name for p in (shared_fixtures / "dmidecode").iterdir()} == set(BIOS_EXPECTED)


@pytest.mark.parametrize("name", sorted(BIOS_EXPECTED))
def test_bios_from_dmidecode(shared_fixtures, report_validator, name):
    report, _ = build_report(DictSource({"dmidecode.txt": (shared_fixtures / "dmidecode" / name).read_text()}))
    assert_valid(report_validator, report)
    [bios] = _by_component(report)["bios"]
    assert (bios["model"], bios["vendor"], bios["version"], bios["date"]) == BIOS_EXPECTED[name]
    assert bios["device"] == "system"


def test_every_nvidia_xml_capture_is_covered(shared_fixtures):
    assert {p.name for p in (shared_fixtures / "nvidia-smi-xml").iterdir()} == set(NVIDIA_EXPECTED)


@pytest.mark.parametrize("name", sorted(NVIDIA_EXPECTED))
def test_vbios_and_inforom_from_nvidia_smi(shared_fixtures, report_validator, name):
    xml = (shared_fixtures / "nvidia-smi-xml" / name).read_text()
    report, _ = build_report(DictSource({"nvidia-smi-q-x.xml": xml}))
    assert_valid(report_validator, report)
    found = _by_component(report)
    expected = NVIDIA_EXPECTED[name]
    if expected is None:  # the partial capture has no <vbios_version>: no firmware claimed
        assert "gpu_vbios" not in found and "gpu_inforom" not in found
        return
    vbios, inforom = expected
    first = found["gpu_vbios"][0]
    assert first["version"] == vbios and first["model"] == report["accelerators"][0]["model"]
    assert first["device"] == report["accelerators"][0]["pci_bus_id"]
    if inforom is None:  # [REDACTED] in the capture: never a version
        assert "gpu_inforom" not in found
    else:
        assert found["gpu_inforom"][0]["version"] == inforom
    assert len(found["gpu_vbios"]) == len([a for a in report["accelerators"] if a["firmware_version"]])


def test_ascend_firmware_from_board_info(shared_fixtures, report_validator):
    board = (shared_fixtures / "npu-smi" / "mindcluster-doc_ascend910_info-t-board.txt").read_text()
    report, _ = build_report(DictSource({"npu-smi-board-0.txt": board}))
    assert_valid(report_validator, report)
    [npu] = _by_component(report)["npu_firmware"]
    assert (npu["device"], npu["model"], npu["version"]) == ("0000:61:00.0", "Ascend 910", "7.1.0.7.220")


def test_hygon_vbios_from_hy_smi(report_validator):
    report, _ = build_report(DirSource(str(DATA / "hygon-k100")))
    assert_valid(report_validator, report)
    dcus = _by_component(report)["dcu_vbios"]
    assert len(dcus) == len(report["accelerators"]) and {d["version"] for d in dcus} == {"113-D6650100-103"}


def test_hygon_rocm_smi_capture_without_vbios_claims_none(shared_fixtures):
    # The real rocm-smi capture was taken without --showvbios: no version is invented.
    text = (shared_fixtures / "hygon-dcu" / "gpustack_hygon-dcu_dtk24.04.3_rocm-smi.json").read_text()
    report, _ = build_report(DictSource({"rocm-smi.json": text}))
    assert report["accelerators"] and "dcu_vbios" not in _by_component(report)


def test_bmc_from_ipmitool():
    entry = firmware.parse_ipmitool_mc_info((FW / "ipmitool-mc-info.txt").read_text())
    assert (entry["component"], entry["version"], entry["vendor"], entry["ipmi_version"]) == (
        "bmc",
        "1.73",
        "Supermicro",
        "2.0",
    )


def test_ethtool_i_mlx5_splits_the_psid():
    entry = firmware.parse_ethtool_i((FW / "ethtool-i-ens1f0np0.txt").read_text(), "ens1f0np0")
    assert (entry["device"], entry["version"], entry["psid"], entry["driver"]) == (
        "0000:3b:00.0",
        "22.39.1002",
        "MT_0000000838",
        "mlx5_core",
    )


def test_ethtool_i_intel_and_virtual():
    intel = firmware.parse_ethtool_i((FW / "ethtool-i-eno1.txt").read_text(), "eno1")
    assert (intel["version"], intel.get("psid")) == ("8.70 0x8000d3e9 1.3295.0", None)
    # A bond has no bus-info: no firmware of its own.
    assert firmware.parse_ethtool_i((FW / "ethtool-i-bond0.txt").read_text(), "bond0") is None


def test_mlxfwmanager_query():
    devices = firmware.parse_mlxfwmanager((FW / "mlxfwmanager-query.txt").read_text())
    assert [(d["device"], d["model"], d["version"], d["psid"]) for d in devices] == [
        ("0000:17:00.0", "ConnectX6", "20.39.1002", "MT_0000000223"),
        ("0000:3b:00.0", "ConnectX6DX", "22.39.1002", "MT_0000000359"),
    ]
    assert devices[0]["rom_versions"] == {"pxe": "3.7.0102", "uefi": "14.32.0012"}


def test_node_report_joins_every_source(report_validator):
    """mlxfwmanager wins over ethtool for the same PCI function; ibstat adds only HCAs nobody else named."""
    report, _ = build_report(DirSource(str(FW)))
    assert_valid(report_validator, report)
    assert report["collector_errors"] == []
    nics = {e["device"]: e for e in _by_component(report)["nic"]}
    assert set(nics) == {"0000:17:00.0", "0000:18:00.0", "0000:3b:00.0"}
    assert nics["0000:3b:00.0"]["source"] == "mlxfwmanager --query"
    assert nics["0000:18:00.0"]["source"] == "ethtool -i"
    [bmc] = _by_component(report)["bmc"]
    assert bmc["version"] == "1.73"


def test_ibstat_hca_firmware(report_validator):
    report, _ = build_report(DirSource(str(DATA / "node-common")))
    assert_valid(report_validator, report)
    nics = {e["device"]: e for e in _by_component(report)["nic"]}
    assert nics["mlx5_0"]["version"] == "20.39.1002" and nics["mlx5_0"]["model"] == "MT4123"


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("ipmitool-mc-info.txt", "Device ID                 : 32\nDevice Revision           : 1\n", "line 2"),
        ("ipmitool-mc-info.txt", "Device ID : 32\n\x00\x01garbage\nFirmware Revision : 1.2\n", "line 2"),
        ("ipmitool-mc-info.txt", "Device ID : 32\nFirmware Revision : \n", "line 2"),
        ("ethtool-i-eth0.txt", "driver: mlx5_core\nversion: 5.8\nfirmw", "ethtool -i eth0 line 3"),
        ("ethtool-i-eth0.txt", "driver: mlx5_core\nversion: 5.8\n", "ethtool -i eth0 line 2"),
        ("mlxfwmanager-query.txt", "Device #1:\n------\n  Device Type:  ConnectX6\n  Versions: Current\n", "line 4"),
        ("mlxfwmanager-query.txt", "Querying Mellanox devices firmware ...\nsomething odd\n", "line 1"),
    ],
)
def test_garbled_or_truncated_output_is_a_collector_error(report_validator, name, text, expected):
    base = {p.name: p.read_text() for p in FW.iterdir()}
    base[name] = text
    base.pop("ethtool-i-ens1f0np0.txt")  # one ethtool capture, the broken one, when it is the one tested
    report, _ = build_report(DictSource(base))
    assert_valid(report_validator, report)
    tool = {"ipmitool-mc-info.txt": "bmc", "ethtool-i-eth0.txt": "ethtool", "mlxfwmanager-query.txt": "mlxfwmanager"}
    error = _errors(report)[tool[name]]
    assert expected in error
    assert error.split(" ")[0] in ("ipmitool", "ethtool", "mlxfwmanager")
    # Nothing of the broken tool is kept; the other tools' entries are.
    sources = {e.get("source") for e in report["firmware"]}
    broken = {"bmc": "ipmitool mc info", "ethtool": "ethtool -i", "mlxfwmanager": "mlxfwmanager --query"}[tool[name]]
    assert broken not in sources
    assert len(sources - {broken}) >= 1


def test_ethtool_settings_capture_is_not_ethtool_i(shared_fixtures):
    """The real `ethtool <if>` capture given as `ethtool -i` output: an error naming the first line it cannot read."""
    text = (shared_fixtures / "ethtool" / "jc_ethtool_default1.txt").read_text()
    with pytest.raises(ToolError, match=r"ethtool -i enp0s3 line 1: unreadable line 'Settings for enp0s3:'"):
        firmware.parse_ethtool_i(text, "enp0s3")


def test_psid_split():
    assert firmware.split_psid("2.1.6 (MT_0000000838)") == ("2.1.6", "MT_0000000838")
    assert firmware.split_psid("16.35.2000") == ("16.35.2000", None)
    assert firmware.split_psid("N/A") == (None, None)
