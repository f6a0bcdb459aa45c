"""`python -m inventory_agents.agent collect --from-dir` as a subprocess, on per-vendor sets built from the real
captures plus the samples; every output is validated against the JSON Schema. Also runs under Python 3.8."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from agent_helpers import DATA, PY38, FakeServer, assert_valid, build_dir, run_agent

COMMON = DATA / "node-common"


def _collect(folder: Path, python: str | None = None) -> dict:
    result = run_agent("collect", "--from-dir", str(folder), **({"python": python} if python else {}))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def nvidia_node(tmp_path, shared_fixtures) -> Path:
    f = shared_fixtures
    files = {
        "nvidia-smi-q-x.xml": f / "nvidia-smi-xml" / "telegraf_a100-sxm4-80gb_4gpu_mig_driver535_v12.xml",
        "nvidia-smi-query-gpu.csv": f / "nvidia-smi-csv" / "nvgpuexp_h100-80gb-hbm3_590.48.01_linux.csv",
        "dmidecode.txt": f / "dmidecode" / "netboxagent_hpe-proliant-bl460c-gen10-graphics-exp.txt",
        "lspci-vmm.txt": f / "lspci" / "jc_ubuntu20.10_lspci-nnmmv.txt",
    }
    return build_dir(tmp_path / "nvidia", files, base=COMMON)


def test_nvidia_node(nvidia_node, report_validator):
    report = _collect(nvidia_node)
    assert_valid(report_validator, report)
    assert report["schema"] == "gpuops.agent-report/1"
    assert report["hostname"] == "gpu-a17.dc1.example.net"
    assert report["collector_errors"] == []
    a100, fallen = report["accelerators"]
    assert (a100["model"], a100["serial"], a100["driver_version"]) == (
        "NVIDIA A100-SXM4-80GB",
        "1650522003820",
        "535.54.03",
    )
    assert a100["health"]["status"] == "failed"  # Xid 94 (contained ECC error) in the kernel log
    assert fallen["seen_by_tool"] is False and fallen["health"]["status"] == "failed"
    assert report["system"]["product"] == "ProLiant BL460c Gen10 Graphics Exp"
    assert report["system"]["memory_gib"] == 128
    assert {n["name"] for n in report["nics"]} >= {"eno1", "bond0", "ibp94s0"}
    assert [ca["ca"] for ca in report["infiniband"]] == ["mlx5_0", "mlx5_1", "mlx5_bond_0"]
    assert len(report["lldp_neighbors"]) == 2
    assert {"component": "cuda", "version": "12.2"} in report["software"]


def test_nvidia_csv_only_node(tmp_path, shared_fixtures, report_validator):
    f = shared_fixtures
    folder = build_dir(
        tmp_path / "csv",
        {
            "nvidia-smi-query-gpu.csv": f / "nvidia-smi-csv" / "nvgpuexp_h100-mig_590.48.01_linux.csv",
            "dmidecode.txt": f / "dmidecode" / "netboxagent_dell-poweredge-m630.txt",
            "hostname": "h100-mig-01\n",
        },
    )
    report = _collect(folder)
    assert_valid(report_validator, report)
    [card] = report["accelerators"]
    assert (card["model"], card["serial"], card["serial_raw"], card["mig_mode"]) == (
        "NVIDIA H100 80GB HBM3",
        None,
        "0000000000000",
        "enabled",
    )
    assert report["system"]["vendor"] == "Dell Inc."


def test_ascend_910_node(tmp_path, shared_fixtures, report_validator):
    npu = shared_fixtures / "npu-smi"
    folder = build_dir(
        tmp_path / "ascend910",
        {
            "npu-smi-info.txt": npu / "mindcluster-doc_ascend910_npu-smi-info_table_v24.1.rc1.txt",
            "npu-smi-board-0.txt": npu / "mindcluster-doc_ascend910_info-t-board.txt",
            "npu-smi-health-0.txt": npu / "mindcluster-doc_ascend910_info-c0-t-health.txt",
            "npu-smi-ecc-1.txt": npu / "mindcluster-doc_ascend910_info-t-ecc.txt",
            "dmidecode.txt": shared_fixtures / "dmidecode" / "netboxagent_supermicro-sys-5039ms-h12trf.txt",
        },
        base=COMMON,
        exclude=("kernel-log.txt",),
    )
    report = _collect(folder)
    assert_valid(report_validator, report)
    cards = {c["index"]: c for c in report["accelerators"]}
    assert sorted(cards) == [0, 1, 7]
    assert {c["vendor"] for c in cards.values()} == {"ascend"}
    assert (cards[0]["model"], cards[0]["firmware_version"], cards[0]["driver_version"]) == (
        "Ascend 910",
        "7.1.0.7.220",
        "23.0.5",
    )
    assert cards[7]["memory_mib"] == 32768 and cards[7]["model_raw"] == "Ascend xxx"
    assert all(c["serial"] is None for c in cards.values())


@pytest.mark.parametrize(
    ("files", "count", "model"),
    [
        (
            {
                "npu-smi-info-m.txt": "gpustack_ascend-910b_info-m.txt",
                "npu-smi-common-0.txt": "gpustack_ascend-910b_info-t-common.txt",
                "npu-smi-usages-0.txt": "gpustack_ascend-910b_info-t-usages.txt",
            },
            8,
            None,
        ),
        ({"npu-smi-info-m.txt": "mindcluster-test_ascend910a-8x_npu-info-collect_before.txt"}, 8, "Ascend 910A"),
    ],
)
def test_ascend_910b_and_910a_nodes(tmp_path, shared_fixtures, report_validator, files, count, model):
    folder = build_dir(tmp_path / "npu", {k: shared_fixtures / "npu-smi" / v for k, v in files.items()})
    report = _collect(folder)
    assert_valid(report_validator, report)
    assert len(report["accelerators"]) == count
    assert {c["model"] for c in report["accelerators"]} == {model}


def test_ascend_duo_sample_node(report_validator):
    report = _collect(DATA / "ascend-310p-duo")
    assert_valid(report_validator, report)
    assert [len(c["chips"]) for c in report["accelerators"]] == [2, 2]


def test_hygon_node(tmp_path, shared_fixtures, report_validator):
    folder = build_dir(
        tmp_path / "hygon",
        {
            "rocm-smi.json": shared_fixtures / "hygon-dcu" / "gpustack_hygon-dcu_dtk24.04.3_rocm-smi.json",
            "dmidecode.txt": shared_fixtures / "dmidecode" / "netboxagent_supermicro-ssg-6028r.txt",
        },
        base=COMMON,
        exclude=("kernel-log.txt",),
    )
    report = _collect(folder)
    assert_valid(report_validator, report)
    [card] = report["accelerators"]
    assert (card["vendor"], card["serial"], card["serial_raw"], card["memory_mib"]) == (
        "hygon",
        None,
        "TPXxxxx",
        65520,
    )
    assert report["system"]["serial"] == "S212101X7A18218"


def test_hygon_sample_node(report_validator):
    report = _collect(DATA / "hygon-k100")
    assert_valid(report_validator, report)
    assert [c["serial"] for c in report["accelerators"]] == ["TPD31A2404150027", None]


def test_empty_folder_gives_an_empty_valid_report(tmp_path, report_validator):
    report = _collect(tmp_path)
    assert_valid(report_validator, report)
    assert report["accelerators"] == [] and report["collector_errors"] == []


def test_from_dir_must_exist(tmp_path):
    result = run_agent("collect", "--from-dir", str(tmp_path / "missing"))
    assert result.returncode == 2 and "not a directory" in result.stderr


def test_compact_output_is_one_line():
    result = run_agent("collect", "--from-dir", str(DATA / "hygon-k100"), "--compact")
    assert result.returncode == 0 and result.stdout.count("\n") == 1


needs_py38 = pytest.mark.skipif(not PY38.exists(), reason=f"{PY38} is not installed")


@needs_py38
def test_python38_collect(tmp_path, report_validator):
    """The agent runs on nodes as they are: Python 3.8 must import it and parse every kind of capture."""
    folder = build_dir(tmp_path / "py38", {}, base=COMMON)
    for sample in ("ascend-310p-duo", "hygon-k100"):
        build_dir(folder, {}, base=DATA / sample)
    report = _collect(folder, python=str(PY38))
    assert_valid(report_validator, report)
    assert report["collector_errors"] == []
    assert {c["vendor"] for c in report["accelerators"]} == {"nvidia", "ascend", "hygon"}
    current = _collect(folder)
    for key in ("accelerators", "nics", "infiniband", "lldp_neighbors", "system", "software"):
        assert report[key] == current[key], key


@needs_py38
def test_python38_collect_real_captures(nvidia_node, report_validator):
    report = _collect(nvidia_node, python=str(PY38))
    assert_valid(report_validator, report)
    assert report["accelerators"][0]["model"] == "NVIDIA A100-SXM4-80GB"


@needs_py38
def test_python38_report_spools_and_sends(tmp_path):
    token = tmp_path / "token"
    token.write_text("tok")
    spool = tmp_path / "spool"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    args = ["--token-file", str(token), "--spool-dir", str(spool), "--from-dir", str(DATA / "hygon-k100")]
    assert run_agent("report", "--server", dead, *args, python=str(PY38)).returncode == 3
    server = FakeServer()
    try:
        result = run_agent("report", "--server", server.url, *args, python=str(PY38))
        assert result.returncode == 0, result.stderr
        assert len(server.received) == 2
    finally:
        server.close()
