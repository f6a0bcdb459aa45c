"""`nvidia-smi nvlink -s`: per GPU, per link, speed or inactive, merged into the topology's GPU devices; truncated or
garbled output is a collector error naming the tool and the line, and no link states are kept (the matrix stands)."""

from __future__ import annotations

import json
import sys

import pytest
from agent_helpers import DATA, PY38, assert_valid, build_dir, run_agent

from inventory_agents.agent.collectors.topology import parse_nvlink_status
from inventory_agents.agent.report import build_report
from inventory_agents.agent.runner import DictSource, ToolError

NVLINK = "nvidia-smi-nvlink-s.txt"
SAMPLE = (DATA / "nvlink" / NVLINK).read_text()
V100 = (DATA / "nvlink" / "nvidia-smi-nvlink-s-v100.txt").read_text()
H100_TOPO = "mlengineering_8x-h100-nv18_topo-m.txt"


def test_h100_links_speeds_and_an_inactive_link():
    gpus = parse_nvlink_status(SAMPLE)
    assert list(gpus) == [f"GPU{i}" for i in range(8)]
    assert all(len(links) == 18 for links in gpus.values())
    assert gpus["GPU0"][0] == {"link": 0, "state": "active", "speed_gbps": 26.562}
    assert gpus["GPU3"][7] == {"link": 7, "state": "inactive", "speed_gbps": None}
    assert sum(1 for links in gpus.values() for x in links if x["state"] == "inactive") == 1


def test_older_drivers_whole_number_speeds_crlf_and_colours():
    gpus = parse_nvlink_status(V100.replace("\n", "\r\n").replace("GPU 1:", "\x1b[1mGPU 1:\x1b[0m"))
    assert gpus["GPU1"][5] == {"link": 5, "state": "active", "speed_gbps": 25.0}
    # A GPU without NVLink prints its header only; bare "inactive" (no brackets) is read too.
    text = "GPU 0: NVIDIA L40S (UUID: GPU-1)\nGPU 1: NVIDIA L40S (UUID: GPU-2)\n"
    assert parse_nvlink_status(text) == {"GPU0": [], "GPU1": []}
    assert parse_nvlink_status("GPU 0: X (UUID: GPU-1)\n Link 0: inactive\n")["GPU0"][0]["state"] == "inactive"


BAD = {
    "link before any GPU": (" Link 0: 26.562 GB/s\nGPU 0: A (UUID: GPU-1)\n", "a link before any GPU header (line 1)"),
    "garbled line": (
        "GPU 0: A (UUID: GPU-1)\n Link 0: 26.562 GB/s\n Lnk 1: ?? \n",
        "unreadable line 'Lnk 1: ??' (line 3)",
    ),
    "speed without unit (cut mid-line)": (
        "GPU 0: A (UUID: GPU-1)\n Link 0: 26.562 GB/s\n Link 1: 26.5",
        "unreadable line 'Link 1: 26.5' (line 3)",
    ),
    "unknown state": ("GPU 0: A (UUID: GPU-1)\n Link 0: degraded\n", "unreadable line 'Link 0: degraded' (line 2)"),
    "link twice": (
        "GPU 0: A (UUID: GPU-1)\n Link 0: 25 GB/s\n Link 0: 25 GB/s\n",
        "GPU0 link 0 listed twice (line 3)",
    ),
    "GPU twice": ("GPU 0: A (UUID: GPU-1)\nGPU 0: A (UUID: GPU-1)\n", "GPU0 listed twice (line 2)"),
    "not nvlink output": ("NVIDIA-SMI has failed because it couldn't communicate\n", "unreadable line"),
    "empty of GPUs": ("NVLink is not supported\n", "no GPU header"),
}


@pytest.mark.parametrize("case", BAD)
def test_garbled_output_names_the_tool_and_the_line(case):
    text, message = BAD[case]
    with pytest.raises(ToolError) as exc:
        parse_nvlink_status(text)
    assert str(exc.value).startswith("nvidia-smi nvlink -s: ") and message in str(exc.value)


def test_a_truncated_capture_is_refused():
    lines = SAMPLE.splitlines()
    cut = "\n".join(lines[: 19 * 7 + 10])  # GPU 7's header and 9 of its 18 links
    with pytest.raises(ToolError, match=r"output cut short: GPU7 lists 9 links, the GPU before it 18 \(line 143\)"):
        parse_nvlink_status(cut)
    header_only = "\n".join(lines[: 19 * 7 + 1])
    with pytest.raises(ToolError, match="GPU7 lists 0 links"):
        parse_nvlink_status(header_only)


def test_the_report_carries_each_gpus_links_beside_the_matrix(shared_fixtures, report_validator):
    topo_m = (shared_fixtures / "nvidia-smi-topo" / H100_TOPO).read_text()
    report, _ = build_report(DictSource({"nvidia-smi-topo-m.txt": topo_m, NVLINK: SAMPLE}))
    assert_valid(report_validator, report)
    assert report["collector_errors"] == []
    topo = report["topology"]
    assert topo["sources"] == ["nvidia-smi topo -m", "nvidia-smi nvlink -s"]
    gpu3 = next(d for d in topo["devices"] if d["name"] == "GPU3")
    assert gpu3["cpu_affinity"] and len(gpu3["nvlinks"]) == 18 and gpu3["nvlinks"][7]["state"] == "inactive"
    assert len(topo["links"]) == 28  # the matrix is untouched


def test_bad_nvlink_output_keeps_the_matrix_and_reports_the_error(shared_fixtures, report_validator):
    topo_m = (shared_fixtures / "nvidia-smi-topo" / H100_TOPO).read_text()
    garbled = SAMPLE.replace("Link 4: 26.562 GB/s", "Link 4: 26.5#2 GB/s", 1)
    report, _ = build_report(DictSource({"nvidia-smi-topo-m.txt": topo_m, NVLINK: garbled}))
    assert_valid(report_validator, report)
    assert report["collector_errors"] == [
        {"collector": "topology", "error": "nvidia-smi nvlink -s: unreadable line 'Link 4: 26.5#2 GB/s' (line 6)"}
    ]
    assert report["topology"]["sources"] == ["nvidia-smi topo -m"]
    assert not any("nvlinks" in d for d in report["topology"]["devices"])  # never half the link states


def test_a_gpu_the_matrix_does_not_list_is_an_error(shared_fixtures, report_validator):
    two_gpu_matrix = (shared_fixtures / "nvidia-smi-topo" / "nvgpuexp_h100-80gb-hbm3_590.48.01_linux.txt").read_text()
    report, _ = build_report(DictSource({"nvidia-smi-topo-m.txt": two_gpu_matrix, NVLINK: V100}))
    assert_valid(report_validator, report)
    assert report["collector_errors"] == [
        {"collector": "topology", "error": "nvidia-smi nvlink -s: GPU1 not in the topology matrix"}
    ]
    assert not any("nvlinks" in d for d in report["topology"]["devices"])


def test_without_a_matrix_the_gpus_carry_their_links_alone(report_validator):
    report, _ = build_report(DictSource({NVLINK: V100}))
    assert_valid(report_validator, report)
    assert report["topology"]["links"] == [] and [d["name"] for d in report["topology"]["devices"]] == ["GPU0", "GPU1"]


def test_from_dir_replay_on_the_cli(tmp_path, shared_fixtures, report_validator):
    folder = build_dir(
        tmp_path / "n",
        {"nvidia-smi-topo-m.txt": shared_fixtures / "nvidia-smi-topo" / H100_TOPO, NVLINK: DATA / "nvlink" / NVLINK},
        base=DATA / "node-common",
        exclude=("kernel-log.txt",),
    )
    python = str(PY38) if PY38.exists() else sys.executable
    result = run_agent("collect", "--from-dir", str(folder), "--compact", python=python)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert_valid(report_validator, report)
    assert report["collector_errors"] == []
    assert next(d for d in report["topology"]["devices"] if d["name"] == "GPU3")["nvlinks"][7]["state"] == "inactive"
