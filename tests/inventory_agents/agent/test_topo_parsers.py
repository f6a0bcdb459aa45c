"""Topology parsers on every real capture (nvidia-smi topo -m, npu-smi info -t topo, rocm-smi --showtopo), the
report's `topology` object, and how broken matrices are refused (a collector error, no half matrix)."""

from __future__ import annotations

import json
import sys

import pytest
from agent_helpers import DATA, PY38, assert_valid, build_dir, run_agent

from inventory_agents.agent.collectors import topology
from inventory_agents.agent.report import build_report
from inventory_agents.agent.runner import DictSource, DirSource, ToolError

NV = "nvidia-smi-topo"
# file -> (device count, links, GPUs, NICs as (name, alias))
NVIDIA_CAPTURES = {
    "gengwg_dgx-a100-8gpu-nv12-12nic_topo-m.txt": (20, 190, 8, [(f"mlx5_{i}", None) for i in range(12)]),
    "mlengineering_8x-h100-nv18_topo-m.txt": (8, 28, 8, []),
    "nccl-issue1084_8x-a30-pcie-2nic-phb_topo-m.txt": (10, 45, 8, [("NIC0", None), ("NIC1", None)]),
    "nccl-issue243_6gpu-pcie-2nic_topo-m.txt": (8, 28, 6, [("mlx5_1", None), ("mlx5_0", None)]),
    "nccltests-issue307_8x-rtx4090-pix-bondnic_topo-m.txt": (9, 36, 8, [("NIC0", "mlx5_bond_0")]),
    "nvgpuexp_geforce-rtx-2080-super_595.71.05_linux.txt": (1, 0, 1, []),
    "nvgpuexp_geforce-rtx-4080-super_595.71.05_linux.txt": (1, 0, 1, []),
    "nvgpuexp_h100-80gb-hbm3_590.48.01_linux.txt": (1, 0, 1, []),
    "nvgpuexp_h100-mig_590.48.01_linux.txt": (1, 0, 1, []),
    "stelline_asus-esc8000a-e12-4x-rtx6000ada-4nic_topo-m.txt": (
        8,
        28,
        4,
        [(f"NIC{i}", f"mlx5_{i}") for i in range(4)],
    ),
}


def _kind(topo: dict, a: str, b: str) -> str:
    [link] = [x for x in topo["links"] if {x["a"], x["b"]} == {a, b}]
    return link["kind"]


def _device(topo: dict, name: str) -> dict:
    [device] = [d for d in topo["devices"] if d["name"] == name]
    return device


def test_every_capture_in_the_folder_parses_to_a_full_matrix(shared_fixtures, report_validator):
    # Captures added to the folder later are held to the same rules: a whole symmetric matrix, GPUs first.
    for path in sorted((shared_fixtures / NV).iterdir()):
        report, _ = build_report(DictSource({"nvidia-smi-topo-m.txt": path.read_text()}))
        assert_valid(report_validator, report)
        assert report["collector_errors"] == [], path.name
        devices = report["topology"]["devices"]
        assert len(report["topology"]["links"]) == len(devices) * (len(devices) - 1) // 2, path.name
        assert devices[0]["name"] == "GPU0" and devices[0]["type"] == "gpu", path.name


@pytest.mark.parametrize("name", sorted(NVIDIA_CAPTURES))
def test_nvidia_capture_parses_to_a_full_matrix(shared_fixtures, report_validator, name):
    count, nlinks, gpus, nics = NVIDIA_CAPTURES[name]
    report, _ = build_report(DictSource({"nvidia-smi-topo-m.txt": (shared_fixtures / NV / name).read_text()}))
    assert_valid(report_validator, report)
    assert report["collector_errors"] == []
    topo = report["topology"]
    assert topo["sources"] == ["nvidia-smi topo -m"]
    assert len(topo["devices"]) == count and len(topo["links"]) == nlinks == count * (count - 1) // 2
    assert [d["name"] for d in topo["devices"] if d["type"] == "gpu"] == [f"GPU{i}" for i in range(gpus)]
    assert [(d["name"], d["alias"]) for d in topo["devices"] if d["type"] == "nic"] == nics
    assert all(d["cpu_affinity"] for d in topo["devices"] if d["type"] == "gpu")
    assert all("cpu_affinity" not in d for d in topo["devices"] if d["type"] == "nic")


def test_dgx_a100_nvlinks_nic_affinity_and_numa(shared_fixtures):
    topo = topology.parse_matrix((shared_fixtures / NV / "gengwg_dgx-a100-8gpu-nv12-12nic_topo-m.txt").read_text(), "t")
    assert {link["kind"] for link in topo["links"] if link["b"].startswith("GPU")} == {"NV12"}
    assert _kind(topo, "GPU0", "mlx5_0") == "PXB" and _kind(topo, "GPU0", "mlx5_2") == "SYS"
    assert _kind(topo, "GPU6", "mlx5_9") == "PXB" and _kind(topo, "mlx5_4", "mlx5_5") == "PIX"
    assert _device(topo, "GPU4")["cpu_affinity"] == "112-127,240-255"
    assert [_device(topo, f"GPU{i}")["numa_affinity"] for i in range(8)] == list("33117755")


def test_h100_nv18_and_numa_split(shared_fixtures):
    topo = topology.parse_matrix((shared_fixtures / NV / "mlengineering_8x-h100-nv18_topo-m.txt").read_text(), "t")
    assert {link["kind"] for link in topo["links"]} == {"NV18"}
    assert _device(topo, "GPU7") == {
        "name": "GPU7",
        "type": "gpu",
        "alias": None,
        "cpu_affinity": "52-103,156-207",
        "numa_affinity": "1",
    }


def test_pcie_captures_keep_their_kinds(shared_fixtures):
    a30 = topology.parse_matrix(
        (shared_fixtures / NV / "nccl-issue1084_8x-a30-pcie-2nic-phb_topo-m.txt").read_text(), ""
    )
    assert _kind(a30, "GPU1", "NIC0") == "PHB" and _kind(a30, "GPU6", "NIC1") == "PHB"
    assert _kind(a30, "GPU0", "NIC0") == "SYS" and _kind(a30, "GPU0", "GPU7") == "SYS"
    # The capture's extra tab before "GPU NUMA ID" must not shift N/A into another column.
    assert _device(a30, "GPU5")["numa_affinity"] == "1" and _device(a30, "GPU5")["gpu_numa_id"] is None
    old = topology.parse_matrix((shared_fixtures / NV / "nccl-issue243_6gpu-pcie-2nic_topo-m.txt").read_text(), "")
    assert _kind(old, "GPU2", "mlx5_0") == "PIX" and _kind(old, "GPU5", "mlx5_1") == "PIX"
    assert _kind(old, "GPU0", "GPU2") == "NODE" and "numa_affinity" not in _device(old, "GPU0")
    ada = topology.parse_matrix(
        (shared_fixtures / NV / "stelline_asus-esc8000a-e12-4x-rtx6000ada-4nic_topo-m.txt").read_text(), ""
    )
    [link] = [x for x in ada["links"] if (x["a"], x["b"]) == ("GPU2", "NIC3")]
    assert link == {"a": "GPU2", "b": "NIC3", "kind": "NODE", "b_alias": "mlx5_3"}


def test_single_gpu_with_terminal_colours(shared_fixtures):
    topo = topology.parse_matrix((shared_fixtures / NV / "nvgpuexp_h100-mig_590.48.01_linux.txt").read_text(), "t")
    assert topo["links"] == []
    assert topo["devices"] == [
        {
            "name": "GPU0",
            "type": "gpu",
            "alias": None,
            "cpu_affinity": "0-19",
            "numa_affinity": "0",
            "gpu_numa_id": None,
        }
    ]


def test_ascend_hccs_and_sio(shared_fixtures, report_validator):
    text = (shared_fixtures / "npu-smi" / "msswift_ascend-910b3-8x_info-t-topo.txt").read_text()
    report, _ = build_report(DictSource({"npu-smi-info-t-topo.txt": text}))
    assert_valid(report_validator, report)
    topo = report["topology"]
    assert topo["sources"] == ["npu-smi info -t topo"]
    assert len(topo["links"]) == 28 and {x["kind"] for x in topo["links"]} == {"HCCS"}
    assert [d["cpu_affinity"] for d in topo["devices"]][::2] == ["144-167", "96-119", "0-23", "48-71"]
    a3 = topology.parse_matrix(
        (shared_fixtures / "npu-smi" / "sglang-issue30453_ascend-a3-2die-sio_info-t-topo.txt").read_text(), ""
    )
    assert a3["links"] == [{"a": "Phy-ID12", "b": "Phy-ID13", "kind": "SIO"}]
    assert [d["type"] for d in a3["devices"]] == ["npu", "npu"]


@pytest.mark.parametrize("name", ["rocm-smi-showtopo.txt", "hy-smi-showtopo.txt"])
def test_rocm_xgmi_weights_hops_numa(shared_fixtures, report_validator, name):
    text = (shared_fixtures / "rocm-smi" / "msswift_amd-8x-mi300-class_rocm-smi-showtopo.txt").read_text()
    report, _ = build_report(DictSource({name: text}))
    assert_valid(report_validator, report)
    topo = report["topology"]
    assert len(topo["links"]) == 28
    assert topo["links"][0] == {"a": "GPU0", "b": "GPU1", "kind": "XGMI", "weight": 15, "hops": 1}
    assert _device(topo, "GPU5")["numa_node"] == "1" and _device(topo, "GPU2")["numa_affinity"] == "0"


def test_other_npu_smi_and_rocm_outputs_are_not_topology(shared_fixtures):
    for path in sorted((shared_fixtures / "npu-smi").iterdir()):
        if "topo" in path.name:
            continue
        with pytest.raises(ToolError, match="npu-smi info -t topo: not a topology matrix"):
            topology.parse_matrix(path.read_text(), "npu-smi info -t topo")
    for path in sorted((shared_fixtures / "hygon-dcu").iterdir()):
        with pytest.raises(ToolError, match="hy-smi --showtopo: no 'Link Type"):
            topology.parse_rocm_topo(path.read_text(), "hy-smi --showtopo")
    table = sorted((shared_fixtures / "nvidia-smi-table").iterdir())[0]
    report, _ = build_report(DictSource({"nvidia-smi-topo-m.txt": table.read_text()}))
    assert "topology" not in report
    assert report["collector_errors"] == [
        {
            "collector": "topology",
            "error": "nvidia-smi topo -m: not a topology matrix (no header row naming GPU0 / NPU0 ...)",
        }
    ]


# --------------------------------------------------------------------------------------------- bad input

H100 = "mlengineering_8x-h100-nv18_topo-m.txt"
STELLINE = "stelline_asus-esc8000a-e12-4x-rtx6000ada-4nic_topo-m.txt"


def _error_of(text: str, name: str = "nvidia-smi-topo-m.txt") -> str:
    report, _ = build_report(DictSource({name: text}))
    assert "topology" not in report  # never half a matrix
    [error] = report["collector_errors"]
    assert error["collector"] == "topology"
    return error["error"]


def test_truncated_file(shared_fixtures):
    lines = (shared_fixtures / NV / H100).read_text().splitlines()
    assert (
        _error_of("\n".join(lines[:5]))
        == "nvidia-smi topo -m: matrix without row(s) for GPU4, GPU5, GPU6, GPU7, truncated"
    )
    cut = "\n".join([*lines[:5], lines[5][:30]])
    assert _error_of(cut) == "nvidia-smi topo -m: row GPU4 has 3 of 8 link cells, truncated or garbled (line 6)"


def test_missing_row(shared_fixtures):
    lines = (shared_fixtures / NV / STELLINE).read_text().splitlines()
    del lines[6]  # NIC1
    assert "without row(s) for NIC1" in _error_of("\n".join(lines))


def test_unknown_link_code_and_stray_self(shared_fixtures):
    text = (shared_fixtures / NV / H100).read_text()
    broken = text.replace("GPU2    NV18    NV18", "GPU2    NV18    ZZZ", 1)
    assert _error_of(broken) == "nvidia-smi topo -m: unknown link code 'ZZZ' between GPU2 and GPU1 (line 4)"
    assert "GPU0 to itself is 'NV18'" in _error_of(text.replace("GPU0     X  ", "GPU0    NV18", 1))


def test_new_link_code_declared_in_the_legend_is_accepted(shared_fixtures):
    text = (shared_fixtures / NV / STELLINE).read_text().replace("SYS     SYS      X", "C2C     SYS      X", 1)
    text = text.replace("GPU0     X      NODE    SYS ", "GPU0     X      NODE    C2C ", 1)
    assert "unknown link code 'C2C'" in _error_of(text)
    text = text.replace("  X    = Self", "  X    = Self\n  C2C  = Connection over a chip-to-chip link")
    topo = topology.parse_matrix(text, "t")
    assert _kind(topo, "GPU2", "GPU0") == "C2C"


def test_asymmetric_matrix_is_garbled(shared_fixtures):
    text = (shared_fixtures / NV / STELLINE).read_text().replace("SYS     SYS      X", "PIX     SYS      X", 1)
    assert _error_of(text) == "nvidia-smi topo -m: GPU0-GPU2 printed as SYS and as PIX (line 4)"


def test_extra_spaces_and_tabs_give_the_same_matrix(shared_fixtures):
    text = (shared_fixtures / NV / STELLINE).read_text()
    expected = topology.parse_matrix(text, "t")
    spaced = "\n".join(line.replace("    ", "      ") + "   " for line in text.splitlines())
    tabbed = "\n".join(line[:1] + "\t".join(line[1:].split()) if line.strip() else line for line in text.splitlines())
    tabbed = tabbed.replace("CPU\tAffinity", "CPU Affinity").replace("NUMA\tAffinity", "NUMA Affinity")
    tabbed = tabbed.replace("GPU\tNUMA\tID", "GPU NUMA ID").replace("\r", "")
    assert topology.parse_matrix(spaced, "t") == expected
    assert topology.parse_matrix(tabbed.replace("\n", "\r\n"), "t") == expected


def test_legend_missing_keeps_nic_names_without_alias(shared_fixtures):
    text = (shared_fixtures / NV / STELLINE).read_text().split("\nLegend:")[0]
    topo = topology.parse_matrix(text, "t")
    assert [(d["name"], d["alias"]) for d in topo["devices"] if d["type"] == "nic"] == [
        ("NIC0", None),
        ("NIC1", None),
        ("NIC2", None),
        ("NIC3", None),
    ]
    assert "b_alias" not in topo["links"][3]


def test_garbled_rows_and_header(shared_fixtures):
    text = (shared_fixtures / NV / H100).read_text()
    assert "row 'GPU9' is not a header column (line 3)" in _error_of(text.replace("GPU1    NV18", "GPU9    NV18", 1))
    assert "row GPU0 printed twice" in _error_of(text.replace("GPU1    NV18     X", "GPU0    NV18     X", 1))
    assert "unknown header column 'Socket Affinity'" in _error_of(text.replace("NUMA Affinity", "Socket Affinity", 1))
    assert "cells too many" in _error_of(text.replace("0-51,104-155    0", "0-51,104-155    0  7  8", 1))
    assert "not a topology matrix" in _error_of("\x00\x01garbage\n")


def test_rocm_garbled_tables(shared_fixtures):
    text = (shared_fixtures / "rocm-smi" / "msswift_amd-8x-mi300-class_rocm-smi-showtopo.txt").read_text()
    lines = text.splitlines()
    cut = "\n".join(lines[:32])  # inside the link type table
    assert "link type table without row(s) for" in _error_of(cut, "rocm-smi-showtopo.txt")
    weird = text.replace("GPU3   XGMI ", "GPU3   QPI  ", 1)
    assert "rocm-smi --showtopo: unknown link type 'QPI' between GPU3 and GPU0 (line" in _error_of(
        weird, "rocm-smi-showtopo.txt"
    )
    assert "is not a number" in _error_of(text.replace("GPU1   15 ", "GPU1   ab ", 1), "rocm-smi-showtopo.txt")


def test_nic_column_the_node_does_not_report(tmp_path, shared_fixtures, report_validator):
    # node-common's ibstat lists mlx5_0, mlx5_1 and mlx5_bond_0.
    folder = build_dir(
        tmp_path / "n",
        {"nvidia-smi-topo-m.txt": shared_fixtures / NV / STELLINE},
        base=DATA / "node-common",
        exclude=("kernel-log.txt",),
    )
    report, _ = build_report(DirSource(str(folder)))
    assert_valid(report_validator, report)
    assert "topology" not in report
    assert {
        "collector": "topology",
        "error": "nvidia-smi topo -m: NIC column(s) mlx5_2, mlx5_3 name device(s) ibstat does not report",
    } in report["collector_errors"]


def test_from_dir_replay_on_the_cli(tmp_path, shared_fixtures, report_validator):
    folder = build_dir(
        tmp_path / "n",
        {"nvidia-smi-topo-m.txt": shared_fixtures / NV / "nccltests-issue307_8x-rtx4090-pix-bondnic_topo-m.txt"},
        base=DATA / "node-common",
        exclude=("kernel-log.txt",),
    )
    python = str(PY38) if PY38.exists() else sys.executable
    result = run_agent("collect", "--from-dir", str(folder), "--compact", python=python)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert_valid(report_validator, report)
    assert report["collector_errors"] == []
    assert _kind(report["topology"], "GPU3", "NIC0") == "PIX"
    assert _device(report["topology"], "NIC0")["alias"] == "mlx5_bond_0"


def test_report_without_topology_tools_has_no_topology_key(report_validator):
    report, _ = build_report(DirSource(str(DATA / "hygon-k100")))
    assert_valid(report_validator, report)
    assert "topology" not in report
