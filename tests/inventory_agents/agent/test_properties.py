"""Property tests: whatever a tool prints (truncated, re-spaced, fields missing, random bytes), no exception
escapes a collector and the report stays valid against the schema."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from agent_helpers import DATA, assert_valid, load_validator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inventory_agents.agent.report import COLLECTORS, build_report, run_collector
from inventory_agents.agent.runner import DictSource

VALIDATOR = load_validator()
CAPTURE_NAMES = [
    "hostname",
    "os-release",
    "uname-r",
    "dmidecode.txt",
    "lspci-vmm.txt",
    "nvidia-smi-q-x.xml",
    "nvidia-smi-query-gpu.csv",
    "npu-smi-info.txt",
    "npu-smi-info-m.txt",
    "npu-smi-board-0.txt",
    "npu-smi-health-0.txt",
    "npu-smi-ecc-0.txt",
    "npu-smi-usages-0.txt",
    "npu-smi-common-0.txt",
    "hy-smi.txt",
    "rocm-smi.json",
    "kernel-log.txt",
    "ip-link.json",
    "ibstat.txt",
    "lldpctl.json",
    "lldpctl.txt",
    "cpuinfo",
    "ipmitool-mc-info.txt",
    "ethtool-i-eth0.txt",
    "mlxfwmanager-query.txt",
]
SHARED = Path(os.environ.get("GPUOPS_SHARED_FIXTURES", Path(__file__).resolve().parents[4] / "shared" / "fixtures"))


def _corpus() -> dict[str, list[str]]:
    """Real captures (when the shared folder is there) and the samples, by the capture name they stand for."""
    corpus: dict[str, list[str]] = {name: [] for name in CAPTURE_NAMES}
    for folder in ("node-common", "ascend-310p-duo", "hygon-k100"):
        for path in (DATA / folder).iterdir():
            if path.is_file() and path.name in corpus:
                corpus[path.name].append(path.read_text())
    for path in (DATA / "firmware").iterdir():
        name = "ethtool-i-eth0.txt" if path.name.startswith("ethtool-i-") else path.name
        if name in corpus:
            corpus[name].append(path.read_text())
    if SHARED.is_dir():
        pairs = [
            ("ethtool", "*.txt", "ethtool-i-eth0.txt"),
            ("nvidia-smi-xml", "*.xml", "nvidia-smi-q-x.xml"),
            ("nvidia-smi-csv", "*linux.csv", "nvidia-smi-query-gpu.csv"),
            ("dmidecode", "*.txt", "dmidecode.txt"),
            ("lspci", "*.txt", "lspci-vmm.txt"),
            ("lldpctl", "*.txt", "lldpctl.txt"),
            ("hygon-dcu", "*.json", "rocm-smi.json"),
            ("npu-smi", "*info-m.txt", "npu-smi-info-m.txt"),
            ("npu-smi", "*table*.txt", "npu-smi-info.txt"),
            ("npu-smi", "*t-board.txt", "npu-smi-board-0.txt"),
            ("npu-smi", "*t-ecc.txt", "npu-smi-ecc-0.txt"),
        ]
        for folder, pattern, name in pairs:
            corpus[name] += [p.read_text() for p in sorted((SHARED / folder).glob(pattern))]
    return {name: texts for name, texts in corpus.items() if texts}


CORPUS = _corpus()
REAL = [(name, text) for name, texts in sorted(CORPUS.items()) for text in texts]


def _check(files: dict[str, str]) -> dict:
    report, _ = build_report(DictSource(files))
    assert_valid(VALIDATOR, report)
    return report


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400)
line_soup = st.lists(
    st.sampled_from(
        [
            "|",
            ":",
            " : ",
            "NPU ID",
            "Chip ID",
            "<gpu>",
            "</gpu>",
            "Xid",
            "CA 'mlx5_0'",
            "Port 1:",
            "lldp.eth0.via=LLDP",
            "DCU[0] : Serial Number: ",
            "Handle 0x0001",
            "\t",
            "\n",
            "0000:3b:00.0",
            "N/A",
            "{",
            "}",
            "[",
            "]",
            '"',
            ",",
            "OK",
            "Alarm",
            "1",
            "-1",
            "99999999999999999999",
        ]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(CAPTURE_NAMES), text=st.one_of(texts, line_soup))
def test_any_text_for_any_tool(name, text):
    _check({name: text})


@settings(max_examples=80, deadline=None)
@given(pick=st.sampled_from(REAL), cut=st.floats(min_value=0, max_value=1))
def test_truncated_real_output(pick, cut):
    name, text = pick
    _check({name: text[: int(len(text) * cut)]})


@settings(max_examples=60, deadline=None)
@given(
    pick=st.sampled_from(REAL),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    drop=st.floats(min_value=0, max_value=0.5),
    sep=st.sampled_from(["\n", "\r\n", "\n\n"]),
    pad=st.sampled_from(["", " ", "\t", "   "]),
    inner=st.sampled_from(["  ", "\t", " "]),
)
def test_lines_dropped_or_respaced(pick, seed, drop, sep, pad, inner):
    name, text = pick
    rng = random.Random(seed)
    lines = [pad + line.replace("  ", inner, 1) + pad for line in text.splitlines() if rng.random() >= drop]
    _check({name: sep.join(lines)})


@settings(max_examples=40, deadline=None)
@given(blob=st.binary(max_size=600), name=st.sampled_from(CAPTURE_NAMES))
def test_random_bytes(blob, name):
    _check({name: blob.decode("utf-8", errors="replace")})


@settings(max_examples=40, deadline=None)
@given(files=st.dictionaries(st.sampled_from(CAPTURE_NAMES), st.one_of(texts, line_soup), max_size=6))
def test_every_collector_returns_a_fragment(files):
    source = DictSource(files)
    for name, fn in COLLECTORS:
        fragment = run_collector(name, fn, source, None)
        assert isinstance(fragment, dict)
        for error in fragment.get("collector_errors", []):
            assert set(error) == {"collector", "error"}


@pytest.mark.parametrize(("name", "text"), REAL, ids=[f"{n}-{i}" for i, (n, _) in enumerate(REAL)])
def test_every_real_capture_as_every_tool(name, text):
    """Feeding a capture to the wrong parser is an error entry, never a crash or an invalid report."""
    for other in CAPTURE_NAMES:
        _check({other: text})
